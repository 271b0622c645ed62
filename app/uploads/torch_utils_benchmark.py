"""``torch.utils.benchmark`` measurements (``Timer(...).blocked_autorange()``, ``timeit``) as rows.

People keep a list of ``Measurement`` objects with ``pickle``; torch offers no file format of
its own. Two forms are read:

* the pickle, through an unpickler that resolves exactly two names,
  ``torch.utils.benchmark.utils.common.Measurement`` and ``TaskSpec``, to inert local classes
  that only record the state they are given; any other class or function the pickle names
  refuses the file (nothing of it is imported or called), and so does one over
  ``limits.MAX_PICKLE_BYTES``;
* JSON: a list of measurements as ``dataclasses.asdict`` writes them (``number_per_run``,
  ``raw_times``, ``task_spec``: ``{stmt, setup, global_setup, label, sub_label, description,
  env, num_threads}``, ``metadata``), or one such object.

Each measurement is one ``latency`` row (ms, lower is better): every raw time divided by
``number_per_run`` is a sample, the value is their median (torch's ``Measurement.median``).
``model`` is torch's title, the label and ``: sub_label`` (the statement when there is no
label); ``params`` hold the ``description``, ``num_threads`` and ``env``. Measurements of one
task (the same title and params) are merged into one row, as ``Measurement.merge`` does.
The files do not say the device: ``device=`` is required.
"""

import io
import pickle
import statistics
from collections.abc import Iterator
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.core.bounds import MAX_JSON_DEPTH
from app.uploads import limits, reading
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile, UploadFormat

SUITE = "torch.utils.benchmark"
MODULE = "torch.utils.benchmark.utils.common"
METRIC = "latency"
TO_MS = vocab.unit_factor("s", vocab.WELL_KNOWN_METRICS[METRIC].unit) or 1000.0
TASK_TEXT = ("stmt", "setup", "global_setup")
TASK_NAMES = ("label", "sub_label", "description", "env")
MAX_TITLE = 256  # a row's model
MAX_METADATA_NODES = 10_000  # values of one measurement's user metadata


class _Recorded:
    """An inert stand-in for a pickled class: it keeps the state it is given, nothing else."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _Measurement(_Recorded):
    __slots__ = ()


class _TaskSpec(_Recorded):
    __slots__ = ()


ALLOWED = {(MODULE, "Measurement"): _Measurement, (MODULE, "TaskSpec"): _TaskSpec}


class _Unpickler(pickle.Unpickler):
    """Resolves the two allowed names to inert classes; every other name is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (found := ALLOWED.get((module, name))) is None:
            shown = f"{module[:80]}.{name[:80]}"
            raise pickle.UnpicklingError(f"the pickle refers to {shown}, which is not read")
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("the pickle holds a persistent id, which is not read")


def parse_torch_utils_benchmark(file: UploadFile, hints: Hints) -> Parsed:
    """One latency row per measured task of a pickle or JSON file of measurements."""
    device = reading.required_device(file, hints, "torch.utils.benchmark")
    measurements = _pickled(file) if _is_pickle(file.content) else _from_json(file)
    limits.check_results(file.name, len(measurements), what="measurements")
    tasks: dict[tuple[str, str], dict[str, Any]] = {}
    for index, raw in enumerate(measurements):
        limits.check_deadline(file.name, record=index)
        row = _read(file.name, index, raw, hints)
        key = (row["model"], repr(sorted(row["params"].items())))
        if (seen := tasks.get(key)) is None:
            tasks[key] = row
            continue
        seen["samples"] += row["samples"]  # one task measured twice: merged, as torch does
        seen["extra"]["measurements"] += 1
        limits.check_samples(file.name, len(seen["samples"]), field="raw_times", record=index)
    for row in tasks.values():
        row["value"] = statistics.median(row["samples"])
    return Parsed(results=list(tasks.values()), machine={"device": device})


def _is_pickle(content: bytes) -> bool:
    """Not JSON: a pickle (protocol 2+ starts with 0x80; 0 and 1 with an opcode, never [ or {)."""
    return content.lstrip()[:1] not in (b"[", b"{")


def _pickled(file: UploadFile) -> list[Any]:
    """The measurements of a pickle, as dicts of their recorded state."""
    if len(file.content) > limits.MAX_PICKLE_BYTES:
        message = f"a pickle of {len(file.content)} bytes; at most {limits.MAX_PICKLE_BYTES}"
        raise OverLimit(file.name, message)
    try:
        loaded = _Unpickler(io.BytesIO(file.content)).load()
    except Exception as error:  # any malformed pickle: refused with what the unpickler said
        message = f"not a pickle of torch.utils.benchmark measurements: {str(error)[:200]}"
        raise UploadError(file.name, message) from None
    items = loaded if isinstance(loaded, list | tuple) else [loaded]
    return [_unwrap(item) for item in items]


def _unwrap(item: Any) -> Any:
    """A recorded Measurement as the dict asdict would give; anything else as it is."""
    if not isinstance(item, _Measurement) or not isinstance(item.state, dict):
        return item
    state = dict(item.state)
    task = state.get("task_spec")
    if isinstance(task, _TaskSpec):
        state["task_spec"] = task.state
    return state


def _from_json(file: UploadFile) -> list[Any]:
    document = reading.load_json(file)
    if isinstance(document, dict):
        return [document]
    if not isinstance(document, list):
        raise UploadError(file.name, "expected a list of measurements")
    return document


def _read(file: str, index: int, raw: Any, hints: Hints) -> dict[str, Any]:
    """One measurement's row: identity, per-run samples (ms), what else it says in extra."""
    if not isinstance(raw, dict):
        raise UploadError(
            file,
            "a measurement must be a Measurement or an object",
            record=index,
            field=f"[{index}]",
        )
    task = raw.get("task_spec")
    if not isinstance(task, dict):
        raise UploadError(
            file, "task_spec must be an object", record=index, field=f"[{index}].task_spec"
        )
    number = raw.get("number_per_run")
    where = f"[{index}].number_per_run"
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 2**62:
        raise UploadError(file, "expected a whole number >= 1", record=index, field=where)
    samples = [time / number * TO_MS for time in _raw_times(file, index, raw.get("raw_times"))]
    names = {key: _optional_text(file, index, task, key) for key in TASK_NAMES}
    texts = {key: _optional_text(file, index, task, key, reading.MAX_TEXT) for key in TASK_TEXT}
    threads = task.get("num_threads", 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 2**31:
        field = f"[{index}].task_spec.num_threads"
        raise UploadError(file, "expected a whole number >= 1", record=index, field=field)
    params: dict[str, Any] = {"num_threads": threads}
    params |= {key: names[key] for key in ("description", "env") if names[key]}
    extra: dict[str, Any] = {"number_per_run": number, "measurements": 1}
    extra |= {key: value for key, value in texts.items() if value}
    if (metadata := raw.get("metadata")) is not None:
        extra["metadata"] = _metadata(file, index, metadata)
    return {
        "suite": hints.suite or SUITE,
        "model": _title(file, index, names, texts["stmt"]),
        "mode": hints.mode or "inference",
        "precision": hints.precision or "fp32",
        "config": hints.config or "eager",
        "params": params,
        "metric": METRIC,
        "unit": vocab.WELL_KNOWN_METRICS[METRIC].unit,
        "samples": samples,
        "extra": extra,
    }


def _raw_times(file: str, index: int, times: Any) -> list[float]:
    field = f"[{index}].raw_times"
    if not isinstance(times, list | tuple) or not times:
        raise UploadError(file, "expected a non-empty list of times", record=index, field=field)
    limits.check_samples(file, len(times), field=field, record=index)
    return [
        reading.finite(file, time, field=f"{field}[{at}]", record=index)
        for at, time in enumerate(times)
    ]


def _optional_text(
    file: str, index: int, task: dict[str, Any], key: str, limit: int = 256
) -> str | None:
    value = task.get(key)
    if value is None or value == "":
        return None
    field = f"[{index}].task_spec.{key}"
    return reading.text(file, value, field=field, record=index, limit=limit)


def _title(file: str, index: int, names: dict[str, str | None], stmt: str | None) -> str:
    """The title torch gives a task: ``label: sub_label``, or the statement when unlabelled."""
    label = names["label"] or (" ".join(stmt.split()) if stmt else None)
    title = f"{label}: {names['sub_label']}" if label and names["sub_label"] else label
    if not title or len(title) > MAX_TITLE:
        field = f"[{index}].task_spec.label"
        message = f"give the Timer a label (title of at most {MAX_TITLE} characters) to name it"
        raise UploadError(file, message, record=index, field=field)
    return title


def _metadata(file: str, index: int, metadata: Any) -> Any:
    """User metadata as JSON: plain values only, at most MAX_METADATA_NODES of them."""
    field = f"[{index}].metadata"
    for count, (value, depth) in enumerate(_walk(metadata), start=1):
        if count > MAX_METADATA_NODES or depth > MAX_JSON_DEPTH:
            message = f"metadata over {MAX_METADATA_NODES} values or {MAX_JSON_DEPTH} levels"
            raise OverLimit(file, message, record=index, field=field)
        if isinstance(value, float | int) and not isinstance(value, bool):
            reading.finite(file, value, field=field, record=index, minimum=None)
        elif not isinstance(value, str | bool | dict | list | tuple) and value is not None:
            message = f"metadata holds a {type(value).__name__}; only JSON values are read"
            raise UploadError(file, message, record=index, field=field)
        elif isinstance(value, dict) and not all(isinstance(key, str) for key in value):
            raise UploadError(file, "metadata keys must be strings", record=index, field=field)
    return _plain(metadata)


def _walk(value: Any) -> Iterator[tuple[Any, int]]:
    """Every value with its depth, without recursion (a pickle may nest or share deeply)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        if isinstance(node, dict):
            stack.extend((member, depth + 1) for member in node.values())
        elif isinstance(node, list | tuple):
            stack.extend((member, depth + 1) for member in node)


def _plain(value: Any) -> Any:
    """A checked metadata value as JSON (tuples as lists)."""
    if isinstance(value, dict):
        return {key: _plain(member) for key, member in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(member) for member in value]
    return value


def _recognises(name: str, head: str) -> bool:
    if MODULE in head and "Measurement" in head:
        return True
    return '"raw_times"' in head and '"number_per_run"' in head and '"task_spec"' in head


FORMAT = UploadFormat(
    "torch-utils-benchmark",
    parse_torch_utils_benchmark,
    _recognises,
    "torch.utils.benchmark Measurements: a pickled list (read by a restricted unpickler) or JSON",
)
