"""Domain errors and the one handler that renders them as JSON."""

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field


class DomainError(Exception):
    """Base of every error a service raises; the status code travels with the class."""

    status_code = 400
    headers: dict[str, str] = {}  # noqa: RUF012  (sent with the answer: Retry-After, ...)

    def __init__(self, detail: str, *, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []


class Forbidden(DomainError):
    """The caller is known but may not do this."""

    status_code = 403


class NotFound(DomainError):
    """A named thing does not exist."""

    status_code = 404


class Conflict(DomainError):
    """The request contradicts what is stored."""

    status_code = 409


class InvalidInput(DomainError):
    """The request is well-formed JSON but says something that cannot be stored."""

    status_code = 422


class ErrorItem(BaseModel):
    """One problem of a rejected request, and where it is."""

    model_config = ConfigDict(extra="allow")

    loc: str | None = Field(
        default=None,
        description="Where: `results[3].value`, `query.limit`, `path.run_id`, ...; an upload's "
        "problems name their `file`, `line` and `record` instead",
    )
    message: str
    field: str | None = Field(default=None, description="The name of the field at `loc`")
    result_index: int | None = Field(
        default=None, description="For a result of a run: its index in `results`"
    )


class ErrorBody(BaseModel):
    """The body of every error answer of the API."""

    error: str = Field(description="The kind: `ValidationError`, `RunNotFound`, ...")
    detail: str = Field(description="One sentence for a person")
    errors: list[ErrorItem] | None = Field(
        default=None, description="Each problem with its location, when there are several"
    )


def _where(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def describe(error: dict[str, Any]) -> dict[str, Any]:
    """One pydantic error as ``{loc, field, result_index?, message}``."""
    loc = tuple(error["loc"])
    if loc and loc[0] == "body":
        loc = loc[1:]
    location = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
    described: dict[str, Any] = {"loc": _where(location), "message": error["msg"]}
    names = [p for p in location if isinstance(p, str)]
    if names:
        described["field"] = names[-1]
    if len(location) >= 2 and location[0] == "results" and isinstance(location[1], int):
        described["result_index"] = location[1]
    return described


def error_body(
    name: str, detail: str, errors: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The JSON shape of every error answer: ``{"error", "detail", "errors"?}``."""
    body: dict[str, Any] = {"error": name, "detail": detail}
    if errors:
        body["errors"] = errors
    return body


async def handle_domain_error(request: Request, exc: Exception) -> JSONResponse:
    """Render a DomainError (registered for the class on the app)."""
    assert isinstance(exc, DomainError)
    return JSONResponse(
        error_body(type(exc).__name__, exc.detail, exc.errors),
        status_code=exc.status_code,
        headers=exc.headers or None,
    )
