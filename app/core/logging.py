"""Logging setup: one line per record, as text or JSON, with the request id; level from settings."""

import json
import logging
from datetime import UTC, datetime
from typing import Literal

from app.core.request_id import RequestIdFilter

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, request id, and a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single line of JSON."""
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def log_handler(log_format: LogFormat) -> logging.Handler:
    """A stderr handler writing ``log_format`` lines, each with its request id."""
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    return handler


def configure_logging(level: str, log_format: LogFormat = "text") -> None:
    """Send records to stderr, unless the process has set up logging already (as basicConfig)."""
    root = logging.getLogger()
    if root.handlers:
        return
    root.addHandler(log_handler(log_format))
    root.setLevel(level.upper())
