"""What every format parser takes and gives.

A parser reads one file (its name and bytes) and returns result rows in the native payload's
shape (``app.runs.schemas.ResultIn`` fields), plus what the file says about the machine, the
environment and the run, if anything. A bad row is an ``UploadError`` that names the file, the
line (or record index) and the field: the whole upload is rejected, nothing is stored.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class UploadFile:
    """One uploaded file."""

    name: str
    content: bytes


@dataclass(frozen=True)
class Hints:
    """What the uploader says explicitly; it wins over what a parser infers (file names...)."""

    suite: str | None = None
    config: str | None = None
    precision: str | None = None
    mode: str | None = None
    device: str | None = None


@dataclass(frozen=True)
class Origin:
    """Where in a file a value was read: a dotted field, and the record or line if any."""

    field: str
    record: int | None = None
    line: int | None = None

    def __str__(self) -> str:
        return f"record {self.record} {self.field}" if self.record is not None else self.field


@dataclass
class Parsed:
    """A parser's output for one file."""

    results: list[dict[str, Any]]
    # Native ``machine`` / ``environment`` fields the file carries (e.g. v3 ``runners``);
    # merged with the upload's own, which win.
    machine: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    # Native run fields the file carries (``started_at``, ``commit``, ``extra``...).
    run: dict[str, Any] = field(default_factory=dict)
    # The name the file gives its machine (a host name), as written: it is checked only when
    # it becomes the run's machine (app.uploads.provenance), so an upload that names its
    # machine itself is never refused for it.
    machine_name: tuple[str, Origin] | None = None
    # Where in the file a metadata field was read, when not where the format always has it
    # (``{"machine.device": "runners[0].name"}``): the run's provenance says so.
    sources: dict[str, str] = field(default_factory=dict)


class UploadError(ValueError):
    """A file that cannot be read as its format: where, and what is wrong."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        line: int | None = None,
        record: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file, self.line, self.record, self.field = file, line, record, field
        where = "".join(
            f", {name} {value}"
            for name, value in (("line", line), ("record", record), ("field", field))
            if value is not None
        )
        self.message = message
        super().__init__(f"{file}{where}: {message}")

    def as_dict(self) -> dict[str, Any]:
        """The error for a 422 body."""
        return {
            "file": self.file,
            "line": self.line,
            "record": self.record,
            "field": self.field,
            "message": self.message,
        }


class OverLimit(UploadError):
    """A file over one of the caps of ``app.uploads.limits``, or past the parse deadline: 413."""


@dataclass(frozen=True)
class UploadFormat:
    """One upload format, declared once by its module (``FORMAT``) and found by the registry.

    ``recognises(name, head)``: whether a file is of this format, from its lower-cased name
    and its first 64 KiB as text (None: never told by content, only named).
    """

    name: str
    parse: Callable[[UploadFile, Hints], Parsed]
    recognises: Callable[[str, str], bool] | None
    summary: str  # one line of what it reads, for the API's description and errors
