"""Render FastAPI's request validation errors as benchwatch errors: what, and where."""

import json
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.core.errors import error_body


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


def _json_position(exc: RequestValidationError) -> str:
    error = exc.errors()[0]
    position = error["loc"][-1]
    document = exc.body if isinstance(exc.body, str) else ""
    line = document.count("\n", 0, position) + 1
    column = position - (document.rfind("\n", 0, position) + 1) + 1
    return f"{error.get('ctx', {}).get('error', 'invalid JSON')} at line {line} column {column}"


async def handle_validation_error(request: Request, exc: Exception) -> JSONResponse:
    """400 for a body that is not JSON, 422 with every problem located otherwise."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if errors and errors[0]["type"] == "json_invalid":
        body = error_body("MalformedJSON", f"request body is not valid JSON: {_json_position(exc)}")
        return JSONResponse(body, status_code=400)
    described = [describe(dict(e)) for e in errors]
    first = described[0]
    detail = f"{len(described)} problem(s); first at {first['loc']}: {first['message']}"
    return JSONResponse(
        json.loads(json.dumps(error_body("ValidationError", detail, described), default=str)),
        status_code=422,
    )
