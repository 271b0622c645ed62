"""Logging setup: one line per record, level from settings."""

import logging


def configure_logging(level: str) -> None:
    """Send records to stderr with time, level and logger name."""
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
