"""The result rows that say a case did not run: skipped (with why) or failed (with the error)."""

from typing import Any


def skipped_rows(ident: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    """A case that cannot run here: latency and accuracy skipped, with the reason."""
    return [
        {**ident, "metric": metric, "status": "skipped", "reason": reason}
        for metric in ("latency", "accuracy")
    ]


def failed_rows(ident: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    """A case that crashed, hung or ran out of memory: latency failed, accuracy says which."""
    text = reason[:2000]
    status = "OOM" if "out of memory" in text.lower() else "fail_to_run"
    return [
        {**ident, "metric": "latency", "status": "failed", "reason": text},
        {**ident, "metric": "accuracy", "text_value": status},
    ]
