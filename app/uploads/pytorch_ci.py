"""What PyTorch's CI says about a run, shared by the ``torchbench-csv`` and ``pytorch-v3`` readers.

Two kinds of it: the vocabulary of ``benchmarks/dynamo`` (suites, CI config names, its file
names' grammar, the metrics it writes as 0 for a failed model), and the metadata of a v3
record file (runner, dependencies, CI job), read into native machine, environment and run
fields. A run-wide value must be the same in every record that carries it.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from operator import methodcaller
from pathlib import PurePosixPath
from typing import Any, get_args

from app.benchmarks import vocabulary as vocab
from app.core import bounds
from app.uploads import limits
from app.uploads.base import Hints, Origin, UploadError

# --- benchmarks/dynamo's vocabulary ----------------------------------------------------------

SUITES = {
    "torchbench": "torchbench",
    "huggingface": "huggingface",
    "timm_models": "timm_models",
    "timm": "timm_models",  # ci_expected_accuracy spells the suite "timm"
}
KINDS = frozenset({"performance", "accuracy"})
DEVICES: frozenset[str] = frozenset(get_args(vocab.Device))
MODES: frozenset[str] = frozenset(get_args(vocab.Mode))

# ci_expected_accuracy config prefixes (TEST_CONFIG of .ci/pytorch/test.sh) that
# vocabulary.CONFIG_ALIASES does not know; anything else goes through canonical_config.
CI_CONFIGS = {
    "dynamic_inductor": "dynamic",
    "inductor_freezing": "freezing",
    "max_autotune_inductor": "max_autotune",
}
# Written as 0 by write_csv_when_exception when a model fails to run.
FAILURE_METRICS = ("speedup", "abs_latency")
FOLDER_DEVICE = re.compile(r"^(?:(rocm|cpu|cuda|xpu|mps)|cu\d+)$")


@dataclass(frozen=True)
class FileNameFacts:
    """What a file name says about its run; None where it says nothing."""

    suite: str | None = None
    backend: str | None = None  # PyTorch's spelling (inductor_no_cudagraphs), before aliasing
    precision: str | None = None
    mode: str | None = None
    device: str | None = None
    arch: str | None = None  # the device suffix of CI names: cuda_h100 -> h100


def read_file_name(name: str) -> FileNameFacts:
    """Suite, backend, precision, mode and device from a ``benchmarks/dynamo`` file name.

    Two grammars, both on the lower-cased stem split at ``_``:

    * results, read from the right:
      ``{backend}_{suite}_{dtype}_{mode}_{device}_{performance|accuracy}.csv``, where the
      device may carry a suffix (``cpu_x86``, ``cuda_h100``) and the backend underscores;
    * ``ci_expected_accuracy`` names (``[rocm/|rocm__]{tokens}.csv``): suite, mode, ``cpu``
      and dtype tokens are picked out wherever they stand; the other tokens, in order, are
      the config. A ``rocm``/``cu124`` folder or ``rocm__`` prefix gives the device.
    """
    path = PurePosixPath(name.replace("\\", "/").lower())
    *prefixes, stem = path.stem.split("__")
    tokens = stem.split("_")
    if tokens[-1] in KINDS:
        facts = _read_results_name(tokens) or FileNameFacts()
    elif KINDS.isdisjoint(tokens):
        facts = _read_expected_name(tokens)
    else:
        facts = FileNameFacts()
    if facts.device is None:
        facts = replace(facts, device=_folder_device([*path.parent.parts, *prefixes]))
    return facts


def _read_results_name(tokens: list[str]) -> FileNameFacts | None:
    """``{backend}_{suite}_{dtype}_{mode}_{device}_{kind}``; None when a part does not fit."""
    at = max((i for i, token in enumerate(tokens[:-1]) if token in MODES), default=0)
    if at < 3 or tokens[at + 1] not in DEVICES:
        return None
    precision = vocab.canonical_precision(tokens[at - 1])
    suite, backend = _split_suite(tokens[: at - 1])
    if suite is None or precision is None or not vocab.NAME_PATTERN.match(backend):
        return None
    arch = "_".join(tokens[at + 2 : -1]) or None
    return FileNameFacts(suite, backend, precision, tokens[at], tokens[at + 1], arch)


def _split_suite(tokens: list[str]) -> tuple[str | None, str]:
    """The suite at the end of ``tokens`` and the backend before it."""
    if tokens[-2:] == ["timm", "models"]:
        return "timm_models", "_".join(tokens[:-2])
    if tokens and tokens[-1] in SUITES:
        return SUITES[tokens[-1]], "_".join(tokens[:-1])
    return None, ""


def _read_expected_name(tokens: list[str]) -> FileNameFacts:
    """``ci_expected_accuracy`` names: ``dynamic_cpu_inductor_amp_freezing_timm_inference``."""
    found: dict[str, str] = {}
    config: list[str] = []
    for index, token in enumerate(tokens):
        if token == "models" and tokens[index - 1 : index] == ["timm"]:
            continue
        if token in SUITES:
            found["suite"] = SUITES[token]
        elif token in MODES:
            found["mode"] = token
        elif token in DEVICES:
            found["device"] = token
        elif (precision := vocab.canonical_precision(token)) is not None:
            found["precision"] = precision
        else:
            config.append(token)
    backend = "_".join(config)
    if "suite" in found and vocab.NAME_PATTERN.match(backend):
        found["backend"] = backend
    elif "suite" not in found:
        return FileNameFacts()  # not a benchmarks/dynamo name: leave it all to the hints
    return FileNameFacts(**found)


def _folder_device(folders: list[str]) -> str | None:
    """The device a folder (``rocm/``, ``cu124/``) or flattened prefix (``rocm__``) names."""
    for folder in reversed(folders):
        if match := FOLDER_DEVICE.match(folder):
            return match.group(1) or "cuda"
    return None


def backend_config(backend: str, device: str | None) -> str:
    """The canonical config of a CI backend name; plain inductor on CPU has no CUDA graphs."""
    if backend == "inductor" and device == "cpu":
        return "default"
    return vocab.canonical_config(CI_CONFIGS.get(backend, backend))


# --- a v3 record file's metadata: machine, environment, run ----------------------------------

_DEVICES = {"cuda": "cuda", "rocm": "rocm", "hip": "rocm", "xpu": "xpu", "cpu": "cpu", "mps": "mps"}
_VENDORS = (("nvidia", "cuda"), ("amd instinct", "rocm"), ("radeon", "rocm"))
GIB_IN_GB = 2**30 / 1e9  # runners report GiB (bytes / 1024**3); benchwatch stores GB
# dependency name -> environment field; other dependencies go to environment.packages
_DEPENDENCY_NAMES = (
    ("torch", "torch pytorch"),
    ("triton", "triton pytorch-triton pytorch-triton-rocm"),
    ("hip", "hip rocm"),
    ("python", "python"),
    ("cuda", "cuda"),
    ("driver", "driver"),
)
# Where the fields this format gives come from, for the run's provenance.
SOURCES = {
    "machine.arch": "runners[0].type",
    "machine.hostname": "runners[0].extra_info.hostname",
    "commit": "head_sha",
    "branch": "head_branch",
    "started_at": "the earliest timestamp",
    "url": "repo, workflow_id and job_id",
}
_ENVIRONMENT_FIELDS = {name: field for field, names in _DEPENDENCY_NAMES for name in names.split()}
_SHA_KEYS = ("sha", "commit", "git_sha")
RUN_EXTRA_KEYS = ("repo", "name", "workflow_id", "job_id", "run_attempt", "schema_version")
RUN_KEYS = ("head_sha", "head_branch", *RUN_EXTRA_KEYS)
# Seconds past which a timestamp is refused: also keeps timedelta() from overflowing.
_LATEST_S = (bounds.LATEST - bounds.EARLIEST).total_seconds()


@dataclass(frozen=True)
class Located:
    """One record and where it is in the file."""

    file: str
    index: int
    line: int | None
    record: Any

    def error(self, message: str, field: str | None = None) -> UploadError:
        """An ``UploadError`` at this record, naming a dotted field path."""
        return UploadError(self.file, message, record=self.index, line=self.line, field=field)


def json_object(located: Located, value: Any, field: str) -> dict[str, Any]:
    """``value`` as a JSON object (None: an empty one), else an error at ``field``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise located.error("must be a JSON object", field)
    return value


def _shared(records: list[Located], field: str, get: Callable[[dict[str, Any]], Any]) -> Any:
    """A run-wide value: the records that carry it must agree (None when none does)."""
    found: tuple[Any, int] | None = None
    for located in records:
        value = get(located.record)
        if value is None or value in ("", {}, []):
            continue
        if found is None:
            found = (value, located.index)
        elif value != found[0]:
            message = f"differs from record {found[1]}'s; one upload is one run on one machine"
            raise located.error(message, field)
    return found[0] if found else None


def _first_runner(record: dict[str, Any]) -> Any:
    runners = record.get("runners")
    return runners[0] if isinstance(runners, list) and runners else None


def machine_fields(records: list[Located], hints: Hints) -> dict[str, Any]:
    """Native machine fields of ``runners[0]``; the device from hints, runner or records."""
    for located in records:
        runners = located.record.get("runners")
        if runners is not None and not isinstance(runners, list):
            raise located.error("must be a list of runners", "runners")
    runner = _shared(records, "runners[0]", _first_runner)
    machine: dict[str, Any] = {}
    if runner is not None:
        machine = _runner_machine(next(r for r in records if _first_runner(r.record)), runner)
    device = hints.device or machine.get("device") or _record_device(records)
    return machine | ({"device": device} if device else {})


def machine_name(records: list[Located]) -> tuple[str, Origin] | None:
    """The runner's host name, else its name when that is no device kind (a phone's model).

    On servers ``runners[0].name`` is the device kind (``cuda``, ``rocm``): it names no
    machine, and the host name (``extra_info.hostname``) does.
    """
    located = next((r for r in records if _first_runner(r.record)), None)
    if located is None or not isinstance(runner := _first_runner(located.record), dict):
        return None
    info = runner.get("extra_info")
    host = info.get("hostname") if isinstance(info, dict) else None
    if isinstance(host, str) and host.strip():
        return host, Origin("runners[0].extra_info.hostname", located.index, located.line)
    name = runner.get("name")
    if isinstance(name, str) and name.strip() and name.strip().lower() not in _DEVICES:
        return name, Origin("runners[0].name", located.index, located.line)
    return None


def device_source(records: list[Located]) -> str:
    """Where ``machine_fields`` found the device (when no hint gave it)."""
    runner = _shared(records, "runners[0]", _first_runner)
    if isinstance(runner, dict):
        name, arch = runner.get("name"), runner.get("type")
        if isinstance(name, str) and name.strip().lower() in _DEVICES:
            return "runners[0].name"
        if isinstance(arch, str) and _device_of("", arch):
            return "runners[0].type (the GPU's vendor)"
    return "benchmark.extra_info.device"


def _runner_machine(located: Located, runner: Any) -> dict[str, Any]:
    if not isinstance(runner, dict):
        raise located.error("must be a JSON object", "runners[0]")

    def get(key: str, kind: type) -> Any:
        return _runner_value(located, runner, key, kind)

    name, arch = get("name", str) or "", get("type", str) or ""
    device = _device_of(name, arch)
    info = dict(json_object(located, runner.get("extra_info"), "runners[0].extra_info"))
    hostname = info.pop("hostname") if isinstance(info.get("hostname"), str) else None
    gpus = get("gpu_count", int)
    machine = {"cpu": get("cpu_info", str), "cpu_count": get("cpu_count", int), "gpu_count": gpus}
    machine["hostname"] = hostname
    # 0 is what phones (ExecuTorch) report: unknown, not no memory
    if host := get("avail_mem_in_gb", float):
        machine["host_memory_gb"] = round(host * GIB_IN_GB, 1)
    if gpu_total := get("avail_gpu_mem_in_gb", float):  # all GPUs together
        machine["gpu_memory_gb"] = round(gpu_total * GIB_IN_GB / (gpus or 1), 1)
    if device:
        machine |= {"device": device, "arch": arch}
    mapped = {
        "cpu_info",
        "cpu_count",
        "gpu_count",
        "extra_info",
        *(("name", "type") if device else ()),
    }
    extra = {key: value for key, value in runner.items() if key not in mapped}
    if info:
        extra["extra_info"] = info
    found = {key: value for key, value in machine.items() if value not in (None, "")}
    return found | ({"extra": extra} if extra else {})


def _runner_value(located: Located, runner: dict[str, Any], key: str, kind: type) -> Any:
    """A ``runners[0]`` field: a string, a whole number >= 0 or a number >= 0."""
    value = runner.get(key)
    if value is None:
        return None
    if kind is str:
        ok = isinstance(value, str)
    else:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        ok = number and value >= 0 and (kind is float or isinstance(value, int))
        # counts go to INTEGER columns
        ok = ok and (kind is not int or value <= bounds.INT32_MAX)
    if not ok:
        what = {str: "a string", int: f"a whole number from 0 to {bounds.INT32_MAX}"}
        raise located.error(f"must be {what.get(kind, 'a number >= 0')}", f"runners[0].{key}")
    return value


def _device_of(name: str, arch: str) -> str | None:
    """The device (cuda, rocm...) of the runner's name, else of the GPU vendor in its type."""
    if device := _DEVICES.get(name.strip().lower()):
        return device
    return next((device for vendor, device in _VENDORS if vendor in arch.lower()), None)


def _record_device(records: list[Located]) -> str | None:
    """The records' benchmark.extra_info.device: an accelerator if any says one, else cpu."""
    devices = set()
    for located in records:
        info = located.record["benchmark"].get("extra_info") or {}
        if (device := _DEVICES.get(str(info.get("device", "")).lower())) is not None:
            devices.add(device)
    return min(devices, key=lambda d: (d == "cpu", d), default=None)


def environment_fields(records: list[Located]) -> dict[str, Any]:
    """Native environment fields of ``dependencies``: torch, triton... then packages."""
    dependencies = _shared(records, "dependencies", lambda record: record.get("dependencies"))
    if dependencies is None:
        return {}
    located = next(r for r in records if r.record.get("dependencies"))
    if not isinstance(dependencies, dict):
        raise located.error("must be a JSON object", "dependencies")
    environment: dict[str, Any] = {}
    packages: dict[str, str] = {}
    extra: dict[str, Any] = {}
    for name, spec in dependencies.items():
        version, sha = _dependency(spec)
        target = _ENVIRONMENT_FIELDS.get(name.lower())
        if len(version) > 256:
            raise located.error("longer than 256 characters", f"dependencies.{name}")
        # the environment's own fields hold up to 64 characters; longer goes to packages
        if version and target and target not in environment and len(version) <= 64:
            environment[target] = version
        elif version:
            packages[name] = version
        kept_sha = target == "torch" and bool(sha) and len(sha) <= 64
        if kept_sha:
            environment["torch_git_sha"] = sha
        if not version or (sha and not kept_sha) or _has_more(spec):
            extra[name] = spec
    if packages:
        environment["packages"] = packages
    return environment | ({"extra": {"dependencies": extra}} if extra else {})


def _dependency(spec: Any) -> tuple[str, str]:
    """Version and git sha of one dependency: "2.6.0" or {"version": ..., "sha": ...}."""
    if isinstance(spec, str):
        return spec.strip(), ""
    if not isinstance(spec, dict):
        return "", ""
    version = spec.get("version")
    sha = next((spec[k] for k in _SHA_KEYS if isinstance(spec.get(k), str)), "")
    return (version.strip() if isinstance(version, str) else ""), sha.strip()


def _has_more(spec: Any) -> bool:
    return isinstance(spec, dict) and bool(set(spec) - {"version", *_SHA_KEYS})


def run_fields(records: list[Located]) -> dict[str, Any]:
    """Native run fields of stored-row metadata: commit, branch, started_at, url, extra."""
    meta = {key: _shared(records, key, methodcaller("get", key)) for key in RUN_KEYS}
    run: dict[str, Any] = {}
    for key, target, limit in (("head_sha", "commit", 64), ("head_branch", "branch", 256)):
        if isinstance(meta[key], str) and len(meta[key]) <= limit:
            run[target] = meta[key]
    extra = {key: meta[key] for key in RUN_EXTRA_KEYS if meta[key] is not None}
    if (started := _started_at(records)) is not None:
        run["started_at"], extra["timestamp"] = started
    repo, workflow, job = meta["repo"], meta["workflow_id"], meta["job_id"]
    if isinstance(repo, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and _positive(workflow):
        job_part = f"/job/{job}" if _positive(job) else ""
        run["url"] = f"https://github.com/{repo}/actions/runs/{workflow}{job_part}"
    return run | ({"extra": extra} if extra else {})


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _started_at(records: list[Located]) -> tuple[str, int | float] | None:
    """The earliest record timestamp (epoch seconds, or milliseconds) as ISO 8601 UTC."""
    stamps: list[tuple[datetime, int | float]] = []
    for located in records:
        value = located.record.get("timestamp")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise located.error("must be a positive number of seconds since 1970", "timestamp")
        seconds = value / 1000 if value > 1e11 else value  # the DynamoDB path wrote milliseconds
        at = bounds.EARLIEST + timedelta(seconds=min(seconds, _LATEST_S))
        if not limits.in_time_range(at):
            message = f"{value:.6g} is not a time from 1970 to {bounds.LATEST.year - 1}"
            raise located.error(message, "timestamp")
        stamps.append((at, value))
    if not stamps:
        return None
    at, raw = min(stamps, key=lambda stamp: stamp[0])
    return at.isoformat().replace("+00:00", "Z"), raw
