"""The pull-request gate's input: the server's verdicts document, read as hostile.

``GET /api/v1/runs/{run_id}/verdicts`` holds one verdict per benchmark (pass, regression,
improvement, no_baseline, error). Everything in it (model names, reasons, branch names) comes
from uploaded files: each text is made printable (:func:`benchwatch_client.gate_github.plain`), each
number finite, each link http(s), and an item that cannot be read becomes an ``error``.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from benchwatch_client.gate_github import plain
from benchwatch_client.text import is_http_url

ORDER = ("regression", "improvement", "error", "no_baseline", "pass")  # how reports list them


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class ReportedVerdict:
    """One benchmark's verdict, as the server judged it (fields cleaned, never trusted)."""

    verdict: str = "error"
    suite: str = ""
    model: str = ""
    config: str = ""
    precision: str = ""
    mode: str = ""
    batch_size: int | None = None
    metric: str = ""
    unit: str = ""
    new: float | None = None
    base: float | None = None
    rel_change: float | None = None
    p_value: float | None = None
    reason: str = ""
    series_url: str = ""

    @property
    def benchmark(self) -> str:
        """``suite/model/config/precision/mode``, and the batch size when there is one."""
        name = "/".join(p for p in (self.suite, self.model, self.config, self.precision, self.mode))
        return f"{name} bs{self.batch_size}" if self.batch_size is not None else name

    @property
    def measure(self) -> str:
        """The metric, with its unit."""
        return f"{self.metric} ({self.unit})" if self.unit else self.metric


def _verdict(raw: object) -> ReportedVerdict:
    """An item of the server's list; one it cannot read becomes an ``error`` saying so."""
    if not isinstance(raw, Mapping):
        return ReportedVerdict(reason="the server sent a verdict that is not an object")
    verdict, reason = raw.get("verdict"), plain(raw.get("reason"), 300)
    if verdict not in ORDER:
        reason = f"unknown verdict {plain(verdict, 40)!r} from the server. {reason}".strip()
        verdict = "error"
    batch = raw.get("batch_size")
    url = raw.get("series_url")
    return ReportedVerdict(
        verdict=str(verdict),
        suite=plain(raw.get("suite")),
        model=plain(raw.get("model")),
        config=plain(raw.get("config")),
        precision=plain(raw.get("precision")),
        mode=plain(raw.get("mode")),
        batch_size=batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
        metric=plain(raw.get("metric")),
        unit=plain(raw.get("unit"), 20),
        new=_number(raw.get("new")),
        base=_number(raw.get("base")),
        rel_change=_number(raw.get("rel_change")),
        p_value=_number(raw.get("p_value")),
        reason=reason,
        series_url=url if isinstance(url, str) and is_http_url(url) else "",
    )


class BadVerdicts(ValueError):
    """The server's answer is not a verdicts document: there is no verdict to gate on."""


@dataclass(frozen=True)
class Report:
    """The server's verdicts for one upload, and what they were compared with."""

    run_id: object
    branch: str
    commit: str
    default_branch: str
    baseline_how: str
    baseline_commit: str
    baseline_runs: tuple[int, ...]
    items: tuple[ReportedVerdict, ...]
    url: str
    server_total: int  # the server's counts, summed: above len(items) when it listed only some


def parse_verdicts(document: object) -> Report:
    """Read ``GET /api/v1/runs/{run_id}/verdicts``; raise :class:`BadVerdicts` if it is not one."""
    if not isinstance(document, Mapping) or not isinstance(document.get("items"), list):
        raise BadVerdicts("the server's answer holds no list of verdicts")
    baseline = document.get("baseline")
    baseline = baseline if isinstance(baseline, Mapping) else {}
    counts = document.get("counts")
    counts = counts if isinstance(counts, Mapping) else {}
    runs = baseline.get("run_ids")
    url = document.get("url")
    return Report(
        run_id=document.get("run_id") if isinstance(document.get("run_id"), int) else None,
        branch=plain(document.get("branch"), 100),
        commit=plain(document.get("commit"), 64),
        default_branch=plain(document.get("default_branch"), 100),
        baseline_how=plain(baseline.get("how"), 40) or "none",
        baseline_commit=plain(baseline.get("commit"), 64),
        baseline_runs=tuple(r for r in runs if isinstance(r, int))[:20]
        if isinstance(runs, list)
        else (),
        items=tuple(_verdict(item) for item in document["items"]),
        url=url if isinstance(url, str) and is_http_url(url) else "",
        server_total=sum(
            n for n in counts.values() if isinstance(n, int) and not isinstance(n, bool) and n > 0
        ),
    )
