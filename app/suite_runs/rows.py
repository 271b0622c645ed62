"""The result rows that say a case did not run: skipped (with why) or failed (with the error)."""

import re
from typing import Any

# Where a shard's reason starts quoting its process's output (``workers.shard_runner``): a
# command's stdout or stderr may print a secret, and result rows are read by anyone.
_OUTPUT_TAIL = re.compile(r"; (?:output|stderr): .*\Z", re.DOTALL)


def public_reason(reason: str) -> str:
    """``reason`` without the tail of the process's output that the worker appended."""
    return _OUTPUT_TAIL.sub(
        "; its output is in the shard's reason (for a token or sign-in)", reason
    )


def skipped_rows(ident: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    """A case that cannot run here: latency and accuracy skipped, with the reason."""
    return [
        {**ident, "metric": metric, "status": "skipped", "reason": reason}
        for metric in ("latency", "accuracy")
    ]


def failed_rows(ident: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    """A case that crashed, hung or ran out of memory: latency failed, accuracy says which."""
    status = "OOM" if "out of memory" in reason.lower() else "fail_to_run"
    text = public_reason(reason)[:2000]
    return [
        {**ident, "metric": "latency", "status": "failed", "reason": text},
        {**ident, "metric": "accuracy", "text_value": status},
    ]
