"""Request bodies: validated in one pass, and their errors rendered as what, and where."""

import json
import re
import sys
from collections.abc import Callable, Coroutine
from functools import cached_property
from http import HTTPStatus
from typing import Any

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Match, Mount
from starlette.types import Receive, Scope

from app.api.responses import UNAVAILABLE
from app.core.bounds import MAX_JSON_DEPTH, NUL_FREE
from app.core.db import Database
from app.core.errors import InvalidInput, describe, error_body
from app.tokens.auth import bearer, check_caller


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


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> str:
    """The ``Allow`` header of a 405: every method some route of the request's path takes.

    Starlette's names the first route of the path alone (``POST`` for ``/api/v1/runs``, which
    ``GET`` reads too); RFC 9110 asks for all of them. Each method is matched as the router
    would (included routers match through their own routes).
    """
    routes = [r for r in request.app.router.routes if not isinstance(r, Mount)]
    allowed = [
        method
        for method in _METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    ]
    return ", ".join(allowed)


def refuse_nul_in_query(request: Request) -> None:
    """422 for a query parameter holding a NUL character: Postgres cannot compare text with it."""
    errors = [
        {"loc": f"query.{name}", "field": name, "message": "NUL characters are not allowed"}
        for name, value in request.query_params.multi_items()
        if "\x00" in name or "\x00" in value
    ]
    if errors:
        raise InvalidInput(
            f"{len(errors)} problem(s); first at {errors[0]['loc']}: {errors[0]['message']}",
            errors=errors,
        )


# A query string with no pattern of its own is declared NUL_FREE. A pattern, an enum or a
# format given already says more (none of them takes a NUL).
def _nul_free(schema: dict[str, Any]) -> None:
    for part in schema.get("anyOf", []) + schema.get("oneOf", []):
        _nul_free(part)
    if isinstance(items := schema.get("items"), dict):
        _nul_free(items)
    if schema.get("type") == "string" and not {"pattern", "enum", "format"} & schema.keys():
        schema["pattern"] = NUL_FREE


def declare_nul_free_queries(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (an OpenAPI schema) with what ``refuse_nul_in_query`` refuses declared.

    Without it the schema calls a query string with a NUL valid, and the API answers 422.
    """
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query":
                    _nul_free(parameter.get("schema", {}))
    return document


def nul_free_openapi(application: FastAPI) -> Callable[[], dict[str, Any]]:
    """The application's ``openapi`` method, its query strings declared free of NUL."""
    generate = application.openapi

    def openapi() -> dict[str, Any]:
        if application.openapi_schema is None:
            application.openapi_schema = declare_nul_free_queries(generate())
        return application.openapi_schema

    return openapi


# Strings (escapes included), brackets and runs of digits: enough to find, in one pass over a
# body that json.loads refused for its depth or a number's length, where that happened.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]|\d+')
# How deep a body json.loads is given may nest: past any payload the models accept (their own
# few levels, and MAX_JSON_DEPTH within a free-form object), well short of json.loads's limit.
MAX_BODY_DEPTH = 4 * MAX_JSON_DEPTH


def _unreadable_at(body: bytes, exc: Exception) -> json.JSONDecodeError:
    """``exc``, raised by ``json.loads`` without a position, as a JSON error at its place.

    ``json.loads`` raises UnicodeDecodeError for bytes that are not text, RecursionError for
    nesting about a thousand deep and ValueError for an integer of more than
    ``sys.get_int_max_str_digits()`` digits; FastAPI answers each with a bare 400. The answer
    names the line and column instead.
    """
    if isinstance(exc, UnicodeDecodeError):
        text = body[: exc.start].decode("utf-8", errors="replace")
        return json.JSONDecodeError(f"bytes that are not UTF-8 ({exc.reason})", text, len(text))
    text = body.decode("utf-8", errors="replace")
    depth = deepest = deepest_at = 0
    longest = sys.get_int_max_str_digits()
    for token in _JSON_TOKENS.finditer(text):
        first = token.group()[0]
        if first in "[{":
            depth += 1
            if depth > deepest:
                deepest, deepest_at = depth, token.start()
        elif first in "]}":
            depth -= 1
        elif first.isdigit() and len(token.group()) > longest and isinstance(exc, ValueError):
            message = f"a number of {len(token.group())} digits; at most {longest}"
            return json.JSONDecodeError(message, text, token.start())
    return json.JSONDecodeError(f"nesting {deepest} levels deep", text, deepest_at)


_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def _deepest(body: bytes) -> int:
    """How deep the objects and arrays of a JSON text nest, found at C speed.

    Escaped backslashes and quotes go first; what is left between quotes is a string, and the
    brackets outside them count up and down.
    """
    plain = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(plain.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    return int(np.cumsum(np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)).max())


def _check_depth(body: bytes) -> None:
    """JSONDecodeError where objects and arrays first nest deeper than ``MAX_BODY_DEPTH``.

    Checked before json.loads, whose own limit (a RecursionError near a thousand levels)
    depends on how deep the stack already is: the same body would pass one request and fail
    the next.
    """
    if _deepest(body) <= MAX_BODY_DEPTH:
        return
    text = body.decode("utf-8", errors="replace")
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        first = token.group()[0]
        if first in "[{":
            depth += 1
            if depth > MAX_BODY_DEPTH:
                message = f"nesting deeper than {MAX_BODY_DEPTH} levels"
                raise json.JSONDecodeError(message, text, token.start())
        elif first in "]}":
            depth -= 1


class _LocatedJSONRequest(Request):
    """A request whose ``json()`` says where a body json.loads cannot read fails."""

    async def json(self) -> Any:
        body = await self.body()
        if body.count(b"[") + body.count(b"{") > MAX_BODY_DEPTH:  # else it cannot nest that deep
            _check_depth(body)
        try:
            return await super().json()
        except json.JSONDecodeError:
            raise
        except (RecursionError, ValueError) as exc:
            raise _unreadable_at(body, exc) from exc


async def _known_caller(request: Request) -> None:
    """401 for a caller without a live token or session, before the body is read."""
    credentials = await bearer(request)
    database: Database = request.app.state.database

    def check() -> None:
        with database.sessionmaker() as session:
            check_caller(request, session, credentials)

    await run_in_threadpool(check)


class ApiRoute(APIRoute):
    """A route of the JSON API: its HTTP errors answer in the API's one error body.

    The auth dependencies (401, 403) and FastAPI's body parsing (400 for a body that is not
    text) raise ``HTTPException``, which FastAPI would answer as ``{"detail"}`` alone. A route
    with a body checks its caller before FastAPI reads the body (``check_caller``).
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        # Every route reads the database: its 503s are declared here, once for all of them.
        kwargs["responses"] = {**UNAVAILABLE, **(kwargs.get("responses") or {})}
        super().__init__(path, endpoint, **kwargs)

    def wrap_request(self, request: Request) -> Request:
        """The request the handler is given: one whose JSON errors are located."""
        return _LocatedJSONRequest(request.scope, request.receive)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, with ``HTTPException`` rendered as the API's errors are."""
        handler = super().get_route_handler()

        reads_body = self.body_field is not None

        async def handle(request: Request) -> Response:
            try:
                if reads_body:
                    await _known_caller(request)
                return await handler(self.wrap_request(request))
            except HTTPException as exc:
                kind = HTTPStatus(exc.status_code).phrase.replace(" ", "")
                return JSONResponse(
                    error_body(kind, str(exc.detail)),
                    status_code=exc.status_code,
                    headers=exc.headers,
                )

        return handle


class OneStepJSONRoute(ApiRoute):
    """A route whose body model pydantic parses and validates straight from the JSON bytes.

    FastAPI decodes a JSON body with ``json.loads`` and then validates the Python objects:
    two passes over every result, where ``model_validate_json`` makes one. A body
    that fails this pass takes FastAPI's own path, which rejects it exactly as before (400
    for malformed JSON, 422 with every problem located); pydantic's JSON parser accepts
    nothing that ``json.loads`` refuses, and a model instance passes FastAPI's validation as is.
    """

    @cached_property
    def body_model(self) -> type[BaseModel] | None:
        """The route's body model, if it is a pydantic model (looked up once, not per request)."""
        model = self.body_field.field_info.annotation if self.body_field else None
        return model if isinstance(model, type) and issubclass(model, BaseModel) else None

    def wrap_request(self, request: Request) -> Request:
        """A request whose ``json()`` is the validated model, when the body model is one."""
        if self.body_model is None:
            return super().wrap_request(request)
        return _ModelJSONRequest(request.scope, request.receive, self.body_model)


class _ModelJSONRequest(_LocatedJSONRequest):
    def __init__(self, scope: Scope, receive: Receive, model: type[BaseModel]) -> None:
        super().__init__(scope, receive)
        self.model = model

    async def json(self) -> Any:
        try:
            return self.model.model_validate_json(await self.body())
        except ValidationError:
            return await super().json()  # FastAPI validates the plain JSON and says where
