"""Google Benchmark's JSON (``--benchmark_format=json`` / ``--benchmark_out``) as result rows.

One benchmark instance (a ``run_name``) gives one row per metric: ``real_time`` and
``cpu_time`` in the file's ``time_unit`` (the ingest converts units), ``bytes_per_second``
(``B/s``), ``items_per_second`` (``items/s``) and each user counter under its own name
(unit ``""``; higher is better when the name says "per second", ``/s``, throughput, bandwidth
or flops, lower otherwise; ``counter_<name>`` when the name is a well-known benchwatch
metric; NaN or infinite values are left out). With ``--benchmark_repetitions`` the
repetitions' values are the row's ``samples`` and its value is the ``median`` aggregate (else
the median of the samples); the aggregates (mean, median, stddev, cv, ...) go to the row's
``extra["aggregates"]``, never to rows of their own, so no (benchmark, metric) pair repeats.
``cv`` is a fraction (0.05 = 5%).

Identity: ``suite`` is the ``suite`` hint, else the executable's file name; ``model`` is the
family name (``run_name`` up to its first ``/``); ``params`` holds the instance's arguments
(``BM_x/8/64`` -> ``{"args": "8/64"}``) and the options Google Benchmark writes into names
(``iterations``, ``threads``, ``min_time``, ``min_warmup_time`` and ``time_type`` for
``real_time`` / ``process_time`` / ``manual_time``); ``repeats:N`` is dropped. A benchmark
that reported ``error_occurred`` gives ``failed`` rows (``skipped`` ones ``skipped``) with its
message as reason. Complexity fits (``BigO``, ``RMS``) go to the run's
``extra["complexity"]``. The context describes the machine (device ``cpu`` unless hinted),
the library (environment) and the run (a ``date`` with a zone becomes ``started_at``).
Reading is linear in the entries and held to the caps of ``app.uploads.limits`` (names,
repetitions per instance as samples, results per file) and to the parse deadline.
"""

import json
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.uploads import limits
from app.uploads.base import Hints, Origin, OverLimit, Parsed, UploadError, UploadFile, UploadFormat
from app.uploads.benchmarks_json import at, benchmark_entries, json_safe, load_document, moment

TIME_UNITS = ("ns", "us", "ms", "s")
# Fields of a benchmark entry that are not user counters.
RESERVED_FIELDS = frozenset(
    [
        "name",
        "family_index",
        "per_family_instance_index",
        "run_name",
        "run_type",
        "repetitions",
        "repetition_index",
        "threads",
        "iterations",
        "real_time",
        "cpu_time",
        "time_unit",
        "aggregate_name",
        "aggregate_unit",
        "error_occurred",
        "error_message",
        "skipped",
        "skip_message",
        "label",
        "big_o",
        "rms",
        "cpu_coefficient",
        "real_coefficient",
    ]
)
# Built-in rates and memory-manager fields: metric -> unit (counters not listed get "").
KNOWN_UNITS = {
    "bytes_per_second": "B/s",
    "items_per_second": "items/s",
    "max_bytes_used": "B",
    "total_allocated_bytes": "B",
    "allocs_per_iter": "count",
}
COMPLEXITY_AGGREGATES = frozenset({"BigO", "RMS"})
NAME_OPTIONS = frozenset({"iterations", "threads", "min_time", "min_warmup_time"})
TIME_TYPES = frozenset({"real_time", "process_time", "manual_time"})
# Counter names that say "per second" (higher is better); other counters are costs.
RATE_NAME = re.compile(r"/s(ec)?\b|per[_ \-]?s(ec(ond)?)?\b|throughput|bandwidth|flops", re.I)
# Where the fields this format gives come from, for the run's provenance.
SOURCES = {
    "machine.hostname": "context.host_name",
    "machine.device": "default for Google Benchmark (cpu; give device= otherwise)",
    "started_at": "context.date",
}
CONTEXT_MACHINE_KEYS = ("mhz_per_cpu", "cpu_scaling_enabled", "aslr_enabled", "caches")
STANDARD_CONTEXT_KEYS = frozenset(
    [
        "date",
        "host_name",
        "executable",
        "num_cpus",
        "load_avg",
        "library_version",
        "library_build_type",
        "json_schema_version",
    ]
).union(CONTEXT_MACHINE_KEYS)
MAX_REASON = 4000


@dataclass
class _Entry:
    """One checked benchmark entry: an iteration (repetition) or an aggregate."""

    index: int
    run_name: str
    aggregate: str | None  # aggregate_name of an aggregate row
    time_unit: str
    values: dict[str, float]  # metric -> value, in file order
    failure: tuple[str, str] | None  # (status, reason)
    info: dict[str, Any]  # iterations, threads, label
    family: int | None  # family_index (absent before Google Benchmark 1.6)


@dataclass
class _Instance:
    """The entries of one benchmark instance (one run_name of one family)."""

    run_name: str
    first: int
    time_unit: str | None = None  # of the first entry that has timings
    repetitions: list[_Entry] = field(default_factory=list)
    aggregates: list[_Entry] = field(default_factory=list)


def parse_google_benchmark(file: UploadFile, hints: Hints) -> Parsed:
    """Result rows, machine, environment and run facts of one Google Benchmark JSON file."""
    document = load_document(file)
    context = document["context"] if isinstance(document.get("context"), dict) else {}
    instances: dict[tuple[str, int | None], _Instance] = {}
    complexity: dict[str, dict[str, Any]] = {}
    entries = benchmark_entries(file, document)
    _count_repetitions(file, entries)
    for index, entry in enumerate(entries):
        limits.check_deadline(file.name, record=index)
        if entry.get("aggregate_name") in COMPLEXITY_AGGREGATES:
            complexity.setdefault(_run_name(file, index, entry), {}).update(_complexity(entry))
        else:
            _add_entry(file, instances, _read_entry(file, index, entry))
    suite = hints.suite or _executable_name(context.get("executable")) or "google-benchmark"
    _reject_duplicates(file, list(instances.values()))
    results: list[dict[str, Any]] = []
    for instance in instances.values():
        limits.check_deadline(file.name, record=instance.first)
        results += _instance_rows(instance, suite, hints)
        limits.check_results(file.name, len(results), record=instance.first)
    run = _run(file, context)
    if complexity:
        run.setdefault("extra", {})["complexity"] = complexity
    host = context.get("host_name")
    return Parsed(
        results=results,
        machine=_machine(file, context, hints),
        environment=_environment(context),
        run=run,
        machine_name=(host, Origin("context.host_name")) if isinstance(host, str) else None,
        sources=SOURCES,
    )


def split_run_name(run_name: str) -> tuple[str, dict[str, str]]:
    """The model and params of a run name: ``BM_x/8/64/threads:2`` -> ``BM_x``, args, threads.

    Arguments (named ones too, ``x:8/y:64``) stay one string, as Google Benchmark prints
    them; ``repeats:N`` is dropped, since repetitions are samples of one series.
    """
    family, *parts = run_name.split("/")
    args: list[str] = []
    params: dict[str, str] = {}
    for part in parts:
        key, colon, value = part.partition(":")
        if part in TIME_TYPES:
            params["time_type"] = part
        elif colon and key in NAME_OPTIONS:
            params[key] = value
        elif not (colon and key == "repeats"):
            args.append(part)
    if args:
        params["args"] = "/".join(args)
    return family, params


def _add_entry(
    file: UploadFile,
    instances: dict[tuple[str, int | None], _Instance],
    checked: _Entry,
) -> None:
    """File an entry under its instance; one instance has one time unit."""
    key = (checked.run_name, checked.family)
    instance = instances.setdefault(key, _Instance(checked.run_name, checked.index))
    if instance.time_unit is None:
        instance.time_unit = checked.time_unit
    elif checked.failure is None and checked.time_unit != instance.time_unit:
        first = (instance.repetitions or instance.aggregates)[0].index
        raise UploadError(
            file.name,
            f"time_unit {checked.time_unit!r} differs from benchmarks[{first}]",
            record=checked.index,
            field=at(checked.index, "time_unit"),
        )
    if checked.aggregate:
        instance.aggregates.append(checked)
        return
    instance.repetitions.append(checked)
    limits.check_samples(
        file.name,
        len(instance.repetitions),
        field=f"repetitions of {checked.run_name!r:.80}",
        record=checked.index,
    )


def _count_repetitions(file: UploadFile, entries: list[dict[str, Any]]) -> None:
    """The samples cap, before the entries are read: repetitions of one name are counted.

    The repetitions of an instance become one row's samples; reading each costs more than
    counting them all, so a file with too many is refused before. (Counted by name: the
    families of one executable do not share names.)
    """
    names: Counter[str] = Counter()
    for entry in entries:
        name = entry.get("run_name", entry.get("name"))
        if isinstance(name, str) and entry.get("run_type", "iteration") == "iteration":
            names[name] += 1
    name, count = max(names.items(), key=lambda item: item[1], default=(None, 0))
    if count > limits.MAX_SAMPLES_PER_RESULT:
        message = f"{count} repetitions of {name!r:.80}; at most {limits.MAX_SAMPLES_PER_RESULT}"
        raise OverLimit(file.name, message, field="benchmarks")


def _read_entry(file: UploadFile, index: int, entry: dict[str, Any]) -> _Entry:
    """Check one entry; timings are required unless it reports an error or a skip."""
    run_name = _run_name(file, index, entry)
    run_type = entry.get("run_type", "iteration")
    if run_type not in ("iteration", "aggregate"):
        raise UploadError(
            file.name,
            f"run_type must be 'iteration' or 'aggregate', got {run_type!r:.40}",
            record=index,
            field=at(index, "run_type"),
        )
    aggregate = None
    if run_type == "aggregate":
        aggregate = _string(file, index, entry, "aggregate_name")
    failure = _failure(entry)
    unit = entry.get("time_unit")
    if failure is not None:
        values: dict[str, float] = {}
        unit = unit if unit in TIME_UNITS else "ns"
    else:
        if unit not in TIME_UNITS:
            message = f"time_unit must be one of {', '.join(TIME_UNITS)}, got {unit!r:.40}"
            raise UploadError(file.name, message, record=index, field=at(index, "time_unit"))
        values = _values(file, index, entry)
    info = {k: entry[k] for k in ("iterations", "threads", "label") if k in entry}
    family = entry.get("family_index")
    if family is not None and (isinstance(family, bool) or not isinstance(family, int)):
        message = f"family_index must be a whole number, got {family!r:.40}"
        raise UploadError(file.name, message, record=index, field=at(index, "family_index"))
    return _Entry(index, run_name, aggregate, unit, values, failure, json_safe(info), family)


def _run_name(file: UploadFile, index: int, entry: dict[str, Any]) -> str:
    """``run_name`` (``name`` in files older than Google Benchmark 1.5)."""
    key = "run_name" if "run_name" in entry else "name"
    name = _string(file, index, entry, key)
    return limits.check_name(file.name, name, record=index, field=at(index, key))


def _failure(entry: dict[str, Any]) -> tuple[str, str] | None:
    """("failed", message) for ``error_occurred``, ("skipped", message) for ``skipped``."""
    for flag, message_key, status in (
        ("error_occurred", "error_message", "failed"),
        ("skipped", "skip_message", "skipped"),
    ):
        if entry.get(flag) is True:
            message = entry.get(message_key)
            reason = message if isinstance(message, str) and message.strip() else flag
            return status, reason[:MAX_REASON]
    return None


def _values(file: UploadFile, index: int, entry: dict[str, Any]) -> dict[str, float]:
    """real_time and cpu_time (required, finite, >= 0), then rates and counters."""
    values: dict[str, float] = {}
    for key in ("real_time", "cpu_time"):
        if key not in entry or entry[key] is None:
            raise UploadError(
                file.name, f"missing required field {key!r}", record=index, field=at(index, key)
            )
        value = entry[key]
        if _is_number(value) and math.isfinite(value) and value >= 0:
            values[key] = float(value)
        else:
            message = f"{key} must be a finite number >= 0, got {value!r:.40}"
            raise UploadError(file.name, message, record=index, field=at(index, key))
    for key, value in entry.items():
        # A NaN or infinite counter (a rate over zero time, say) says nothing: left out.
        if key not in RESERVED_FIELDS and _is_number(value) and math.isfinite(value):
            values[_metric_name(file, index, key)] = float(value)
    return values


def _metric_name(file: UploadFile, index: int, key: str) -> str:
    """A counter's metric: its own name, unless that is a well-known benchwatch metric."""
    if not key.strip() or len(key) > 120:
        raise UploadError(
            file.name,
            "a counter name must have 1 to 120 characters",
            record=index,
            field=at(index, key[:120]),
        )
    if key in KNOWN_UNITS or vocab.canonical_metric(key) not in vocab.WELL_KNOWN_METRICS:
        return key
    return f"counter_{key}"


def _instance_rows(instance: _Instance, suite: str, hints: Hints) -> list[dict[str, Any]]:
    """One row per metric of one benchmark instance."""
    model, params = split_run_name(instance.run_name)
    base: dict[str, Any] = {
        "suite": suite,
        "model": model,
        "mode": hints.mode or "inference",
        "precision": hints.precision or "fp32",
        "config": hints.config or "eager",
        "params": params,
    }
    entries = instance.repetitions + instance.aggregates
    if failed := [e for e in entries if e.failure is not None]:
        return _failure_rows(base, failed)
    # metric -> its repetitions' values, and its aggregates, in one pass over the entries
    samples: dict[str, list[float]] = {}
    aggregates: dict[str, dict[str, float]] = {}
    for entry in instance.repetitions:
        for metric, value in entry.values.items():
            samples.setdefault(metric, []).append(value)
    for entry in instance.aggregates:
        for metric, value in entry.values.items():
            aggregates.setdefault(metric, {})[str(entry.aggregate)] = value
    rows = []
    for metric in dict.fromkeys(metric for e in entries for metric in e.values):
        found = _metric_row(metric, samples.get(metric, []), aggregates.get(metric, {}))
        if found is not None:
            rows.append({**base, **found, **_direction(metric, instance)})
    if rows and rows[0]["metric"] == "real_time":
        rows[0]["extra"] = {**rows[0].get("extra", {}), **_instance_info(instance)}
    return rows


def _metric_row(
    metric: str, samples: list[float], aggregates: dict[str, float]
) -> dict[str, Any] | None:
    """The value (median aggregate, else median of repetitions), samples and aggregates."""
    if "median" in aggregates:
        value = aggregates["median"]
    elif samples:
        value = statistics.median(samples)
    elif "mean" in aggregates:
        value = aggregates["mean"]
    else:
        return None
    row: dict[str, Any] = {"metric": metric, "value": value}
    if len(samples) > 1:
        row["samples"] = samples
    if aggregates:
        row["extra"] = {"aggregates": aggregates}
    return row


def _direction(metric: str, instance: _Instance) -> dict[str, Any]:
    """Unit, and for user counters (unit ``""``) whether higher is better."""
    if metric in ("real_time", "cpu_time"):
        entries = instance.repetitions or instance.aggregates
        return {"unit": entries[0].time_unit}
    if metric in KNOWN_UNITS:
        return {"unit": KNOWN_UNITS[metric]}
    return {"unit": "", "higher_is_better": RATE_NAME.search(metric) is not None}


def _instance_info(instance: _Instance) -> dict[str, Any]:
    """Iterations, threads, label and the number of repetitions, for the real_time row."""
    first = (instance.repetitions or instance.aggregates)[0]
    info = dict(first.info)
    if instance.repetitions:
        info["repetitions"] = len(instance.repetitions)
    return info


def _failure_rows(base: dict[str, Any], failed: list[_Entry]) -> list[dict[str, Any]]:
    """``failed`` (or ``skipped``) real_time and cpu_time rows with the first message."""
    failures = [e.failure for e in failed if e.failure is not None]
    status, reason = next((f for f in failures if f[0] == "failed"), failures[0])
    return [
        {**base, "metric": metric, "unit": failed[0].time_unit, "status": status, "reason": reason}
        for metric in ("real_time", "cpu_time")
    ]


def _reject_duplicates(file: UploadFile, instances: list[_Instance]) -> None:
    """Two instances with one identity (a family registered twice, say) are refused."""
    first: dict[tuple[str, str], int] = {}
    for instance in instances:
        model, params = split_run_name(instance.run_name)
        key = (model, json.dumps(params, sort_keys=True))
        if (seen := first.setdefault(key, instance.first)) != instance.first:
            raise UploadError(
                file.name,
                f"benchmark {instance.run_name!r} is the same benchmark as benchmarks[{seen}]",
                record=instance.first,
                field=at(instance.first, "run_name"),
            )


def _complexity(entry: dict[str, Any]) -> dict[str, Any]:
    """The fit of a BigO or RMS aggregate, as written."""
    keys = ("big_o", "real_coefficient", "cpu_coefficient", "time_unit", "rms")
    return {k: json_safe(entry[k]) for k in keys if k in entry}


def _executable_name(executable: Any) -> str | None:
    """``/build/bin/bench_io`` -> ``bench_io`` (the suite when no hint gives one)."""
    if not isinstance(executable, str):
        return None
    name = re.split(r"[\\/]", executable.strip())[-1]
    return name[:128] or None


def _machine(file: UploadFile, context: dict[str, Any], hints: Hints) -> dict[str, Any]:
    """MachineIn fields from the context (name is the uploader's to give)."""
    machine: dict[str, Any] = {"device": hints.device or "cpu"}
    if isinstance(host := context.get("host_name"), str) and host:
        machine["hostname"] = host[:256]
    if isinstance(cpus := context.get("num_cpus"), int) and not isinstance(cpus, bool):
        machine["cpu_count"] = limits.check_int32(file.name, max(cpus, 0), field="context.num_cpus")
    extra = {k: json_safe(context[k]) for k in CONTEXT_MACHINE_KEYS if k in context}
    if extra:
        machine["extra"] = extra
    return machine


def _environment(context: dict[str, Any]) -> dict[str, Any]:
    """EnvironmentIn fields: the library's version and build type."""
    environment: dict[str, Any] = {}
    if isinstance(version := context.get("library_version"), str) and version:
        environment["packages"] = {"google-benchmark": version[:256]}
    if isinstance(build := context.get("library_build_type"), str) and build:
        environment["extra"] = {"library_build_type": build}
    return environment


def _run(file: UploadFile, context: dict[str, Any]) -> dict[str, Any]:
    """Run fields: the start time, and in extra the executable, load and custom context."""
    run: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    date = context.get("date")
    if (started_at := _timestamp(file, date)) is not None:
        run["started_at"] = started_at
    elif isinstance(date, str):
        extra["date"] = date  # local time of an unknown zone (older versions)
    for key in ("executable", "load_avg"):
        if key in context:
            extra[key] = json_safe(context[key])
    # Keys added with AddCustomContext (git revision, build flags, ...).
    if custom := {k: v for k, v in context.items() if k not in STANDARD_CONTEXT_KEYS}:
        extra["context"] = json_safe(custom)
    if extra:
        run["extra"] = extra
    return run


def _timestamp(file: UploadFile, value: Any) -> str | None:
    """An ISO 8601 date with a zone, else None."""
    at = moment(file, value, "context.date")
    return at.isoformat() if at is not None and at.tzinfo else None


def _string(file: UploadFile, index: int, entry: dict[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        message = f"{key} must be a non-empty string, got {value!r:.40}"
        raise UploadError(file.name, message, record=index, field=at(index, key))
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _recognises(_name: str, head: str) -> bool:
    return '"context"' in head and '"benchmarks"' in head


FORMAT = UploadFormat(
    "google-benchmark",
    parse_google_benchmark,
    _recognises,
    "Google Benchmark's --benchmark_format=json output",
)
