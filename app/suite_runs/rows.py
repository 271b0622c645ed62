"""A worker's result rows: those that say a case did not run, and a run's payload from them.

A case that cannot run gets skipped rows (with why), one that crashed failed rows (with the
error). The harness hands a case's kernel profile over inside its ``kernel_count`` row's
``extra`` (``PROFILE``): the payload keeps it once, in ``kernel_profiles``, not in a result.
"""

import re
from collections.abc import Iterable
from typing import Any

PROFILE = "kernel_profile"  # the key of a case's kernel profile in its kernel_count row's extra
CASE_FIELDS = ("suite", "model", "category", "mode", "precision", "config", "batch_size", "params")

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


def payload_rows(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A run payload's ``results`` and ``kernel_profiles`` from a worker's rows."""
    results: list[dict[str, Any]] = []
    profiles: list[dict[str, Any]] = []
    for row in rows:
        extra = row.get("extra")
        if isinstance(extra, dict) and PROFILE in extra:
            extra = {key: value for key, value in extra.items() if key != PROFILE}
            case = {field: row[field] for field in CASE_FIELDS if field in row}
            profiles.append({**case, **row["extra"][PROFILE]})
            row = {**row, "extra": extra}
        results.append(row)
    return {"results": results, "kernel_profiles": profiles}
