"""pytest-benchmark's JSON (``--benchmark-json`` or a ``--benchmark-save`` file) as result rows.

Each benchmark gives two rows, ``latency`` (time per call: the median, with every timing as
``samples`` when the file was written with ``--benchmark-save-data``) and ``ops`` (calls per
second). Latency is converted from the file's seconds to the well-known metric's ``ms``, so
that the order of uploads never decides its stored unit; ``extra["stats"]`` keeps the other
statistics as written (seconds). What identifies a benchmark across runs:

- ``suite``: the ``suite`` hint, else the benchmark's ``group``, else its test module's name
  (``tests/bench_io.py`` -> ``bench_io``);
- ``model``: the class-qualified test name without its parameter id (``TestIO::test_read``);
- ``params``: pytest's ``params`` dict (``{}`` when not parametrized), with memory addresses
  (`` at 0x7f...``) removed from reprs so the series stay the same from one run to the next.

When two benchmarks of one file would still share suite, model and params (same test name in
two modules of one group), both take the full pytest node id as their model. mode, precision
and config are ``inference``, ``fp32`` and ``eager`` unless the hints say otherwise.
``machine_info`` describes the machine (device ``cpu`` unless hinted), the environment
(Python, pytest-benchmark's version), and ``commit_info`` and ``datetime`` the run.

Reading is held to the caps of ``app.uploads.limits`` and the parse deadline. Timings past
the samples cap are not stored (``extra["samples_omitted"]`` counts them): the median and
the other statistics still come from ``stats``, which pytest-benchmark computed from all.
"""

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.uploads import limits
from app.uploads.base import Hints, Origin, Parsed, UploadError, UploadFile, UploadFormat
from app.uploads.benchmarks_json import at, benchmark_entries, json_safe, load_document, moment

TIME_METRIC = "latency"
TIME_UNIT = vocab.WELL_KNOWN_METRICS[TIME_METRIC].unit
SECONDS_TO_TIME_UNIT = vocab.unit_factor("s", TIME_UNIT) or 1.0
OPS_METRIC = "ops"
# Summary statistics of ``stats`` kept in the latency row's extra (all in seconds but ops).
STAT_FIELDS = (
    "min",
    "max",
    "mean",
    "stddev",
    "median",
    "iqr",
    "q1",
    "q3",
    "ld15iqr",
    "hd15iqr",
    "ops",
    "total",
)
COUNT_FIELDS = ("rounds", "iterations", "iqr_outliers", "stddev_outliers")
# Where the fields this format gives come from, for the run's provenance.
SOURCES = {
    "machine.hostname": "machine_info.node",
    "machine.device": "default for pytest-benchmark (cpu; give device= otherwise)",
    "environment.python": "machine_info.python_version",
    "commit": "commit_info.id",
    "branch": "commit_info.branch",
    "started_at": "datetime",
}
# machine_info keys that become MachineIn / EnvironmentIn fields; the others go to extra.
_ENVIRONMENT_KEYS = ("python_implementation", "python_implementation_version", "python_compiler")
_MACHINE_KEYS = ("system", "release", "machine", "processor")
_STANDARD_INFO_KEYS = frozenset(
    {"node", "cpu", "python_version", "python_build", *_ENVIRONMENT_KEYS, *_MACHINE_KEYS}
)
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")


def parse_pytest_benchmark(file: UploadFile, hints: Hints) -> Parsed:
    """Result rows, machine, environment and run facts of one pytest-benchmark JSON file."""
    document = load_document(file)
    entries = benchmark_entries(file, document)
    # Each benchmark gives one or two rows: counted before any is read.
    limits.check_results(file.name, len(entries), what="benchmarks")
    cases = []
    for index, entry in enumerate(entries):
        limits.check_deadline(file.name, record=index)
        cases.append(_read_case(file, index, entry, hints))
    _reject_duplicates(file, _unique(cases))
    results = [row for case in cases for row in _case_rows(case, hints)]
    limits.check_results(file.name, len(results))
    info = document.get("machine_info")
    info = info if isinstance(info, dict) else {}
    node = info.get("node")
    return Parsed(
        results=results,
        machine=_machine(file, info, hints),
        environment=_environment(info, document.get("version")),
        run=_run(file, document),
        machine_name=(node, Origin("machine_info.node")) if isinstance(node, str) else None,
        sources=SOURCES,
    )


@dataclass
class _Case:
    """One benchmark entry, checked, with its identity (suite, model, params)."""

    index: int
    entry: dict[str, Any]
    suite: str
    model: str
    params: dict[str, Any]
    stats: dict[str, float | int]
    samples: list[float] | int | None  # the timings, or how many were over the cap

    @property
    def identity(self) -> tuple[str, str, str]:
        """What the ingest compares to find duplicate rows (hints are the same for all)."""
        return self.suite, self.model, json.dumps(self.params, sort_keys=True)

    @property
    def node_id(self) -> str:
        """The pytest node id, unique within one pytest session."""
        fullname = self.entry.get("fullname")
        return fullname if isinstance(fullname, str) and fullname else str(self.entry["name"])


def _read_case(file: UploadFile, index: int, entry: dict[str, Any], hints: Hints) -> _Case:
    name = _required(file, index, entry, "name", f"benchmarks[{index}]")
    if not isinstance(name, str) or not name:
        raise UploadError(
            file.name, "name must be a non-empty string", record=index, field=at(index, "name")
        )
    limits.check_name(file.name, name, record=index, field=at(index, "name"))
    stats = _required(file, index, entry, "stats", f"benchmarks[{index}]")
    if not isinstance(stats, dict):
        raise UploadError(
            file.name, "stats must be an object", record=index, field=at(index, "stats")
        )
    fullname = entry.get("fullname")
    if isinstance(fullname, str):
        limits.check_name(file.name, fullname, record=index, field=at(index, "fullname"))
    node = fullname if isinstance(fullname, str) and fullname else name
    module, qualname = node.split("::", 1) if "::" in node else ("", node)
    qualname, param_id = _split_param_id(qualname)
    group = entry.get("group")
    suite = hints.suite or (group if isinstance(group, str) and group else None)
    return _Case(
        index,
        entry,
        suite or _module_name(module) or "pytest-benchmark",
        qualname,
        _params(entry.get("params"), param_id),
        _checked_stats(file, index, stats),
        _samples(file, index, stats.get("data")),
    )


def _split_param_id(name: str) -> tuple[str, str | None]:
    """``test_x[a-1]`` -> (``test_x``, ``a-1``); names without an id come back whole.

    The id runs from the first ``[`` of the name's last line to its final ``]``, found by two
    string searches: a pattern that scans to the end from each ``[`` is quadratic in them.
    """
    body = name.removesuffix("\n")
    start = body.find("[", body.rfind("\n") + 1)
    if not body.endswith("]") or start <= 0:
        return name, None
    return name[:start], body[start + 1 : -1]


def _module_name(module: str) -> str:
    """``benchmarks/bench_io.py`` -> ``bench_io``."""
    stem = module.rsplit("/", 1)[-1]
    return stem.removesuffix(".py")


def _params(params: Any, param_id: str | None) -> dict[str, Any]:
    """The params pytest recorded, stable across runs; a bare id when it recorded none."""
    if isinstance(params, dict) and params:
        return {str(key): _stable(value) for key, value in params.items()}
    return {"id": param_id} if param_id else {}


def _stable(value: Any) -> Any:
    """A param value as JSON, without the memory addresses of object reprs."""
    if isinstance(value, str):
        return _ADDRESS.sub("", value)
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return json_safe(value)


def _checked_stats(file: UploadFile, index: int, stats: dict[str, Any]) -> dict[str, float | int]:
    """The summary statistics: median required, every one present a finite number."""
    _required(file, index, stats, "median", at(index, "stats"))
    checked: dict[str, float | int] = {}
    for key in STAT_FIELDS:
        if key in stats:
            checked[key] = _number(file, index, at(index, f"stats.{key}"), stats[key])
    for key in COUNT_FIELDS:
        if key in stats:
            checked[key] = _count(file, index, at(index, f"stats.{key}"), stats[key])
    if checked["median"] < 0:
        raise UploadError(
            file.name,
            "median cannot be negative",
            record=index,
            field=at(index, "stats.median"),
        )
    return checked


def _samples(file: UploadFile, index: int, data: Any) -> list[float] | int | None:
    """The raw timings of ``--benchmark-save-data`` (seconds per call), or None.

    Over the samples cap, their count instead: they are not stored, so they are not read.
    """
    if data is None:
        return None
    if not isinstance(data, list):
        raise UploadError(
            file.name,
            "data must be a list of timings",
            record=index,
            field=at(index, "stats.data"),
        )
    if len(data) > limits.MAX_SAMPLES_PER_RESULT:
        return len(data)
    samples = [
        _number(file, index, at(index, f"stats.data[{i}]"), value) for i, value in enumerate(data)
    ]
    return samples or None


def _unique(cases: list[_Case]) -> list[_Case]:
    """Cases whose identity another case shares take the full node id as their model."""
    seen: dict[tuple[str, str, str], int] = {}
    for case in cases:
        seen[case.identity] = seen.get(case.identity, 0) + 1
    for case in cases:
        if seen[case.identity] > 1:
            case.model = case.node_id
    return cases


def _reject_duplicates(file: UploadFile, cases: list[_Case]) -> None:
    first: dict[tuple[str, str, str], int] = {}
    for case in cases:
        if (seen := first.setdefault(case.identity, case.index)) != case.index:
            raise UploadError(
                file.name,
                f"same benchmark as benchmarks[{seen}] ({case.node_id!r})",
                record=case.index,
                field=at(case.index, "fullname"),
            )


def _case_rows(case: _Case, hints: Hints) -> list[dict[str, Any]]:
    """The latency row (median, samples, statistics in extra) and the ops row."""
    base: dict[str, Any] = {
        "suite": case.suite,
        "model": case.model,
        "mode": hints.mode or "inference",
        "precision": hints.precision or "fp32",
        "config": hints.config or "eager",
        "params": case.params,
    }
    extra: dict[str, Any] = {"stats": dict(case.stats)}
    for key in ("options", "extra_info"):
        if isinstance(value := case.entry.get(key), dict) and value:
            extra[key] = json_safe(value)
    latency: dict[str, Any] = {
        **base,
        "metric": TIME_METRIC,
        "unit": TIME_UNIT,
        "value": case.stats["median"] * SECONDS_TO_TIME_UNIT,
    }
    if isinstance(case.samples, list):
        latency["samples"] = [s * SECONDS_TO_TIME_UNIT for s in case.samples]
    elif case.samples is not None:
        extra["samples_omitted"] = case.samples
    rows = [{**latency, "extra": extra}]
    if "ops" in case.stats:
        rows.append({**base, "metric": OPS_METRIC, "unit": "ops/s", "value": case.stats["ops"]})
    return rows


def _machine(file: UploadFile, info: dict[str, Any], hints: Hints) -> dict[str, Any]:
    """MachineIn fields from ``machine_info`` (name is the uploader's to give)."""
    cpu: dict[str, Any] = info["cpu"] if isinstance(info.get("cpu"), dict) else {}
    machine: dict[str, Any] = {"device": hints.device or "cpu"}
    brand = cpu.get("brand_raw") or cpu.get("brand")
    if isinstance(brand, str) and brand:
        machine["cpu"] = brand[:256]
    if isinstance(count := cpu.get("count"), int) and not isinstance(count, bool) and count >= 0:
        machine["cpu_count"] = limits.check_int32(file.name, count, field="machine_info.cpu.count")
    if isinstance(node := info.get("node"), str) and node:
        machine["hostname"] = node[:256]
    extra = {k: info[k] for k in _MACHINE_KEYS if isinstance(info.get(k), str) and info[k]}
    if isinstance(arch := cpu.get("arch"), str) and arch:
        extra["cpu_arch"] = arch
    # Keys a project's pytest_benchmark_update_machine_info hook added (a GPU, say).
    extra |= {k: json_safe(v) for k, v in info.items() if k not in _STANDARD_INFO_KEYS}
    if extra:
        machine["extra"] = extra
    return machine


def _environment(info: dict[str, Any], version: Any) -> dict[str, Any]:
    """EnvironmentIn fields: Python and pytest-benchmark's version."""
    environment: dict[str, Any] = {}
    if isinstance(python := info.get("python_version"), str) and python:
        environment["python"] = python[:64]
    if isinstance(version, str) and version:
        environment["packages"] = {"pytest-benchmark": version[:256]}
    extra = {k: info[k] for k in _ENVIRONMENT_KEYS if isinstance(info.get(k), str) and info[k]}
    if extra:
        environment["extra"] = extra
    return environment


def _run(file: UploadFile, document: dict[str, Any]) -> dict[str, Any]:
    """Run fields: commit, branch, start time; the dirty flag and project in extra."""
    run: dict[str, Any] = {}
    if (started_at := _timestamp(file, document.get("datetime"))) is not None:
        run["started_at"] = started_at
    commit = document.get("commit_info")
    if not isinstance(commit, dict):
        return run
    if isinstance(sha := commit.get("id"), str) and sha:
        run["commit"] = sha[:64]
    if isinstance(branch := commit.get("branch"), str) and branch:
        run["branch"] = branch[:256]
    extra = {
        f"commit_{key}" if key in ("time", "author_time") else key: commit[key]
        for key in ("dirty", "project", "time", "author_time")
        if isinstance(commit.get(key), bool | str)
    }
    if extra:
        run["extra"] = extra
    return run


def _timestamp(file: UploadFile, value: Any) -> str | None:
    """ISO 8601 with a zone; pytest-benchmark's zone-less times are UTC (``utcnow()``)."""
    if (at := moment(file, value, "datetime")) is None:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).isoformat()


def _required(file: UploadFile, index: int, obj: dict[str, Any], key: str, where: str) -> Any:
    if key not in obj or obj[key] is None:
        raise UploadError(
            file.name, f"missing required field {key!r}", record=index, field=f"{where}.{key}"
        )
    return obj[key]


def _number(file: UploadFile, index: int, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UploadError(
            file.name, f"expected a finite number, got {value!r:.40}", record=index, field=field
        )
    return float(value)


def _count(file: UploadFile, index: int, field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UploadError(
            file.name, f"expected a whole number >= 0, got {value!r:.40}", record=index, field=field
        )
    return value


def _recognises(_name: str, head: str) -> bool:
    return '"machine_info"' in head and '"benchmarks"' in head


FORMAT = UploadFormat(
    "pytest-benchmark",
    parse_pytest_benchmark,
    _recognises,
    "pytest-benchmark's --benchmark-json files",
)
