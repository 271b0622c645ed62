"""An upload's machine name when the uploader gives none, and where each metadata field came from.

The machine's name is the upload's ``machine`` (a flag), else the name the files give it (a
host name: v3 ``runners``, Google Benchmark ``context.host_name``, pytest-benchmark
``machine_info.node``), else ``default_machine`` (the uploader's environment: the CI runner's
name, else the host's). An inferred name gets the device as a suffix (``gpu-runner-1-cuda``)
unless it already names it: a benchwatch machine is one device of a host and never changes
device, while one CI runner often times both its CPU and its GPU. A file's host name that a
container made up (12 hex digits, new in every job) yields to ``default_machine``, so that a
series does not start over at every job.

An inferred name has its spaces and slashes made dashes ("GitHub Actions 2"); if it is still
no machine name, the upload is refused with where the name came from (the file, record and
field, or the variable): a file never names a machine it cannot hold.

``run.extra["provenance"]`` maps each metadata field (``machine.name``, ``commit``...) to its
source; the uploader may say where the fields it sends came from (``provenance``, a JSON
object: ``{"machine": "flag --machine", "commit": "GITHUB_SHA"}``).
"""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from benchwatch_client.fields import DEFAULT_MACHINE, PROVENANCE

from app.benchmarks import vocabulary as vocab
from app.uploads.base import Origin, Parsed, UploadError, UploadFile

MAX_NAME_CHARS = 128  # MachineIn.name
MAX_PROVENANCE_CHARS = 8192
MAX_SOURCE_CHARS = 200
DEVICES = frozenset(get_args(vocab.Device))
_SEPARATORS = re.compile(r"[ /]+")
_CONTAINER_ID = re.compile(r"[0-9a-f]{12}")  # Docker's default host name
_WORDS = re.compile(r"[-_.:+]")


class MetadataError(ValueError):
    """A metadata field (not a file) that cannot be used: its name, and what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")

    def as_dict(self) -> dict[str, Any]:
        """The error for a 422 body."""
        return {"file": None, "field": self.field, "message": self.message}


@dataclass(frozen=True)
class _Candidate:
    """A machine name as written, where it came from, and where to point if it is bad."""

    value: str
    source: str
    file: str | None = None
    origin: Origin | None = None


def claims(fields: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    """The uploader's word on where its fields came from, checked: ``{field: source}``."""
    raw = fields.get(PROVENANCE)
    if not raw:
        return {}
    if len(raw) > MAX_PROVENANCE_CHARS:
        raise MetadataError(PROVENANCE, f"longer than {MAX_PROVENANCE_CHARS} characters")
    try:
        found = json.loads(raw)
    except json.JSONDecodeError as error:
        raise MetadataError(PROVENANCE, f"not JSON: {error.msg}") from error
    if not isinstance(found, dict):
        raise MetadataError(PROVENANCE, "must be a JSON object of field: source")
    for name, source in found.items():
        if name not in names:
            raise MetadataError(PROVENANCE, f"{name[:64]!r} is no upload field")
        if not isinstance(source, str) or not 0 < len(source) <= MAX_SOURCE_CHARS:
            message = f"the source of {name} must be text of 1 to {MAX_SOURCE_CHARS} characters"
            raise MetadataError(PROVENANCE, message)
    return found


def machine_name(
    files: Sequence[UploadFile],
    parsed: Sequence[Parsed],
    fields: Mapping[str, str],
    device: str | None,
    said: Mapping[str, str],
) -> tuple[str, str] | None:
    """The run's machine name and its source; None when nothing names the machine."""
    if fields.get("machine"):
        return fields["machine"], said.get("machine", "upload field machine")
    named = _named_by_files(files, parsed)
    made_up = [c for c in named if _CONTAINER_ID.fullmatch(c.value.strip())]
    stable = [c for c in named if c not in made_up]
    note = ""
    if stable:
        chosen = stable[0]
    elif default := fields.get(DEFAULT_MACHINE):
        chosen = _Candidate(default, said.get(DEFAULT_MACHINE, f"upload field {DEFAULT_MACHINE}"))
        if made_up:
            first = made_up[0]
            note = f"; not {first.source} {first.value!r}, a container's id (new every job)"
    elif made_up:
        chosen = made_up[0]
    else:
        return None
    name, suffixed = _checked(chosen, device)
    said_as = f" {chosen.value.strip()!r}" if name != chosen.value else ""
    return name, chosen.source + said_as + (" and the device" if suffixed else "") + note


def _named_by_files(files: Sequence[UploadFile], parsed: Sequence[Parsed]) -> list[_Candidate]:
    """The names the files give, which must agree: one upload is one run on one machine."""
    named: list[_Candidate] = []
    for file, part in zip(files, parsed, strict=True):
        if part.machine_name is None or not part.machine_name[0].strip():
            continue
        value, origin = part.machine_name
        named.append(_Candidate(value, f"file {file.name}: {origin}", file.name, origin))
    for candidate in named[1:]:
        if _normalized(candidate.value) != _normalized(named[0].value):
            message = (
                f"names machine {candidate.value[:64]!r}, but {named[0].source} names "
                f"{named[0].value[:64]!r}; one upload is one run on one machine: give machine="
            )
            raise _error(candidate, message)
    return named


def _normalized(value: str) -> str:
    return _SEPARATORS.sub("-", value.strip())


def _checked(candidate: _Candidate, device: str | None) -> tuple[str, bool]:
    """The name with the device as a suffix (and whether it was added), or where it is bad."""
    if len(candidate.value) > 4 * MAX_NAME_CHARS:  # before any pattern scans it
        message = f"a name of {len(candidate.value)} characters is no machine name: give machine="
        raise _error(candidate, message)
    name = _normalized(candidate.value)
    suffixed = device in DEVICES and device not in _WORDS.split(name.lower())
    if suffixed:
        name = f"{name}-{device}"
    if len(name) > MAX_NAME_CHARS:
        problem = f"is {len(name)} characters long; a machine name has at most {MAX_NAME_CHARS}"
    elif not vocab.NAME_PATTERN.match(name):
        problem = (
            "is no machine name (letters, digits, '.', '_', ':', '+' and '-', "
            "starting with a letter or digit)"
        )
    else:
        return name, suffixed
    raise _error(candidate, f"{candidate.value[:64]!r} {problem}: give machine=")


def _error(candidate: _Candidate, message: str) -> UploadError | MetadataError:
    origin = candidate.origin
    if candidate.file is None or origin is None:
        return MetadataError(DEFAULT_MACHINE, f"{message} (from {candidate.source})")
    return UploadError(
        candidate.file, message, record=origin.record, line=origin.line, field=origin.field
    )


def sources(
    files: Sequence[UploadFile],
    parsed: Sequence[Parsed],
    fields: Mapping[str, str],
    said: Mapping[str, str],
    tracked: Mapping[str, str],
) -> dict[str, str]:
    """Where each metadata field of the run came from: ``{"commit": "GITHUB_SHA", ...}``.

    Args:
        files: the uploaded files.
        parsed: what each file gave.
        fields: the upload's fields.
        said: the uploader's word on where its fields came from.
        tracked: native field path -> the upload field that sets it (``machine.device``:
            ``device``): the fields whose source is recorded.
    """
    found: dict[str, str] = {}
    for path, name in tracked.items():
        if fields.get(name):
            found[path] = said.get(name, f"upload field {name}")
    # The files' fields are merged in order, a later file's winning: so are their sources.
    for file, part in zip(files, parsed, strict=True):
        paths = [
            *(f"machine.{key}" for key in part.machine),
            *(f"environment.{key}" for key in part.environment),
            *part.run,
        ]
        for path in paths:
            if path in tracked and not fields.get(tracked[path]):
                where = part.sources.get(path, "")
                if where.startswith("default"):  # the format's, not something the file says
                    found[path] = where
                else:
                    found[path] = f"file {file.name}" + (f": {where}" if where else "")
    return found
