"""An upload: files of one format (or sniffed), plus run metadata, made into one native run.

The run goes through the same ingestion as ``POST /runs``: idempotent on its key (given, or a
hash of the files and metadata, so a retried upload is recognised), all-or-nothing. A file
that cannot be read, or a row that does not validate, rejects the whole upload with the file,
the line or record, and the field.
"""

import hashlib
import json
from typing import Any

from benchwatch_client.fields import (
    ENVIRONMENT_FIELDS,
    HINT_FIELDS,
    MACHINE_FIELDS,
    RUN_FIELDS,
    UPLOAD_FIELDS,
)
from pydantic import ValidationError

from app.core.errors import InvalidInput, describe
from app.runs.schemas import RunIn
from app.uploads import limits, provenance, reading
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile
from app.uploads.formats import AUTO, BY_NAME, NATIVE, REGISTERED

FORMATS = (*BY_NAME, NATIVE, AUTO)
# Native field path -> the upload field that sets it: the fields whose source a run records.
TRACKED = (
    {f"machine.{target}": source for source, target in MACHINE_FIELDS.items()}
    | {f"environment.{name}": name for name in ENVIRONMENT_FIELDS}
    | {name: name for name in RUN_FIELDS}
)


class BadUpload(InvalidInput):
    """An upload that cannot become a run: every problem with its file and place.

    ``count``: how many problems there are, when ``errors`` lists only the first of them.
    """

    def __init__(self, errors: list[dict[str, Any]], count: int | None = None) -> None:
        first = errors[0]
        where = first.get("file") or first.get("loc") or "upload"
        total = len(errors) if count is None else count
        listed = "" if total == len(errors) else f" ({len(errors)} listed)"
        super().__init__(
            f"{total} problem(s){listed}; first in {where}: {first['message']}",
            errors=errors,
        )


class UploadTooLarge(BadUpload):
    """An upload over a cap of ``app.uploads.limits`` or the parse deadline (docs/limits.md)."""

    status_code = 413


def sniff(file: UploadFile) -> str:
    """The format of a file, from its name and its first bytes (the registry's order)."""
    name = file.name.lower()
    head = file.content[:65536].decode("utf-8", errors="replace").lstrip()
    for known in REGISTERED:
        if known.recognises is not None and known.recognises(name, head):
            return known.name
    if '"results"' in head and '"key"' in head:
        return NATIVE
    if head[:1] in ("[", "{"):
        _check_json(file)
    named = ", ".join(BY_NAME)
    raise UploadError(file.name, f"cannot tell the format; give format= ({named} or {NATIVE})")


def _check_json(file: UploadFile) -> None:
    """A JSON file whose format cannot be told may just be broken: say where."""
    try:
        limits.parse_json(file.name, file.content)
    except json.JSONDecodeError as error:
        raise UploadError(file.name, f"invalid JSON: {error.msg}", line=error.lineno) from error
    except UnicodeDecodeError as error:
        raise UploadError(file.name, f"not UTF-8 text: {error.reason}") from error


def build_run(
    files: list[UploadFile], fmt: str, fields: dict[str, str], *, timeout_s: float | None = None
) -> RunIn:
    """The native run of these files and metadata; BadUpload says what is wrong, and where.

    ``timeout_s``: the parse deadline (None: none), past which the upload is UploadTooLarge.
    """
    if not files:
        raise BadUpload([{"file": None, "message": "no file in the upload"}])
    if fmt not in FORMATS:
        known = ", ".join(FORMATS)
        raise BadUpload([{"field": "format", "message": f"unknown format; one of {known}"}])
    try:
        with limits.parse_deadline(timeout_s):
            _check_metadata(files, fields)
            formats = [sniff(f) if fmt == AUTO else fmt for f in files]
            if NATIVE in formats:
                return _native(files, fields)
            hints = Hints(**{k: fields[k] for k in HINT_FIELDS if fields.get(k)})
            parsed = [BY_NAME[f].parse(file, hints) for f, file in zip(formats, files, strict=True)]
            payload = _payload(files, formats, parsed, fields)
            limits.check_deadline(files[-1].name)
    except OverLimit as error:
        raise UploadTooLarge([error.as_dict()]) from error
    except (UploadError, provenance.MetadataError) as error:
        raise BadUpload([error.as_dict()]) from error
    return _validated(payload, files, parsed)


def _check_metadata(files: list[UploadFile], fields: dict[str, str]) -> None:
    """File names within the name cap; no NUL character in a name or a field."""
    for file in files:
        limits.check_name(file.name[:64], file.name, field="filename")
        if "\x00" in file.name:
            raise UploadError(file.name.replace("\x00", "?"), "a NUL character in the file name")
    for name, value in fields.items():
        if "\x00" in value:
            raise UploadError(files[0].name, "a NUL character: it cannot be stored", field=name)


def _native(files: list[UploadFile], fields: dict[str, str]) -> RunIn:
    if len(files) != 1:
        raise UploadError(files[0].name, "a native payload is a whole run: upload it alone")
    try:
        payload = limits.parse_json(files[0].name, files[0].content)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UploadError(files[0].name, f"not JSON: {error}") from error
    if not isinstance(payload, dict):
        raise UploadError(files[0].name, "a native payload is a JSON object (a run)")
    if fields.get("key"):
        payload["key"] = fields["key"]
    # What the CI job says fills in what the payload leaves out: a pull request's branch and
    # commit, and the shard of the workflow's run it is.
    for name in ("project", "commit", "branch", "base_commit", "default_branch", "url"):
        if fields.get(name) and not payload.get(name):
            payload[name] = fields[name]
    if (shard := _shard(fields)) is not None and "shard" not in payload:
        payload["shard"] = shard
    return _validated(payload, files, None)


def _shard(fields: dict[str, str]) -> dict[str, Any] | None:
    """RunIn.shard from the fields ``shard`` and ``shards`` (None without a shard)."""
    if not fields.get("shard"):
        return None
    expected = fields.get("shards") or None
    # a count as a number; anything else is left for validation to name
    return {
        "name": fields["shard"],
        "expected": int(expected) if expected and expected.isdigit() else expected,
    }


def _payload(
    files: list[UploadFile], formats: list[str], parsed: list[Parsed], fields: dict[str, str]
) -> dict[str, Any]:
    machine: dict[str, Any] = {}
    environment: dict[str, Any] = {}
    run: dict[str, Any] = {}
    for part in parsed:
        machine |= part.machine
        environment |= part.environment
        run |= part.run
    machine |= {
        target: fields[source] for source, target in MACHINE_FIELDS.items() if fields.get(source)
    }
    environment |= {name: fields[name] for name in ENVIRONMENT_FIELDS if fields.get(name)}
    run |= {name: fields[name] for name in RUN_FIELDS if fields.get(name)}
    if (shard := _shard(fields)) is not None:
        run["shard"] = shard
    said = provenance.claims(fields, UPLOAD_FIELDS)
    found = provenance.sources(files, parsed, fields, said, TRACKED)
    if named := provenance.machine_name(files, parsed, fields, machine.get("device"), said):
        machine["name"], found["machine.name"] = named
    _check_machine(machine)
    if "key" not in run:
        run["key"], found["key"] = (
            _content_key(files, formats, fields),
            "a hash of the files and the fields",
        )
    if "trigger" not in run:
        run["trigger"], found["trigger"] = "ci", "default (ci)"
    if "channel" not in environment:
        found["environment.channel"] = "default (nightly)"
    return {
        **run,
        "machine": machine,
        "environment": environment,
        "extra": {
            **run.get("extra", {}),
            "upload": {"files": [f.name for f in files], "formats": formats},
            "provenance": {path: found[path] for path in TRACKED if path in found},
        },
        "results": [row for part in parsed for row in part.results],
    }


def _check_machine(machine: dict[str, Any]) -> None:
    """A machine that neither the upload nor the files name, or whose device none says."""
    missing = []
    if not machine.get("name"):
        message = "the files do not name their machine: give machine= (or default_machine=)"
        missing.append(
            {"file": None, "loc": "machine.name", "field": "machine", "message": message}
        )
    if not machine.get("device"):
        message = f"the files do not say the device ({reading.DEVICES}): give device="
        missing.append(
            {"file": None, "loc": "machine.device", "field": "device", "message": message}
        )
    if missing:
        raise BadUpload(missing)


def _content_key(files: list[UploadFile], formats: list[str], fields: dict[str, str]) -> str:
    """A key from what was uploaded: the same files and metadata give the same run."""
    digest = hashlib.sha256()
    for file, fmt in zip(files, formats, strict=True):
        digest.update(f"{file.name}\0{fmt}\0".encode())
        digest.update(hashlib.sha256(file.content).digest())
    digest.update(json.dumps(fields, sort_keys=True).encode())
    return f"upload-{digest.hexdigest()[:24]}"


def _validated(payload: Any, files: list[UploadFile], parsed: list[Parsed] | None) -> RunIn:
    try:
        return RunIn.model_validate(payload)
    except ValidationError as error:
        # A file of bad rows has as many problems as rows: the first ones say what is wrong.
        listed = [_located(dict(e), files, parsed) for e in error.errors()[: limits.MAX_ERRORS]]
        raise BadUpload(listed, error.error_count()) from error


def _located(
    error: dict[str, Any], files: list[UploadFile], parsed: list[Parsed] | None
) -> dict[str, Any]:
    """A validation error with the file its result row came from."""
    described = describe(error)
    index = described.get("result_index")
    if parsed is None or index is None:
        return {"file": files[0].name if parsed is None else None, **described}
    for file, part in zip(files, parsed, strict=True):
        if index < len(part.results):
            return {"file": file.name, "row": index, **described}
        index -= len(part.results)
    return described
