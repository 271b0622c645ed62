"""The benchwatch API's reads for the MCP server: one ``GET`` helper, its caps and its errors.

Everything the MCP server asks of the server goes through :class:`Api`; the HTTP client
(:func:`api_client`) refuses any method but ``GET`` before it is sent. An answer is read up to
``READ_BYTES`` and handed to the assistant up to ``ANSWER_BYTES`` (:func:`fit`, the cut said in
the answer); an API error, a timeout or an unreachable server is a ``ToolError`` that says what
and where.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from mcp.server.mcpserver.exceptions import ToolError

ANSWER_BYTES = 64 * 1024  # the JSON text one tool call hands the assistant, at most
READ_BYTES = 8 * 2**20  # an API answer read, at most (its pages end near 2 MiB)
TIMEOUT_S = 30.0
INT32_MAX = 2**31 - 1  # ids are INTEGER columns
# The API's own caps (app/core/pagination.py, app/runs/router.py, app/summaries/router.py).
PAGE_LIMIT = 500
MAX_PAGE = 1_000_000
CURSOR_LENGTH = 200
MAX_POINTS = 10_000
RESULTS_PAGE = 5_000
COMPARE_OFFSET = 200_000
# Lists of an answer cut from their start rather than their end: points are oldest first.
KEEP_NEWEST = frozenset({"points"})
Query = str | int | float | bool | None


@dataclass(frozen=True)
class Api:
    """The benchwatch API's reads: one ``GET`` helper, the only request this server sends."""

    client: httpx.AsyncClient

    async def get(self, path: str, params: Mapping[str, Query] | None = None) -> Any:
        """The JSON answer of ``GET /api/v1{path}``; any failure is a ToolError that says why."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        where = f"GET /api/v1{path}"
        server = str(self.client.base_url).removesuffix("/api/v1/")
        try:
            async with self.client.stream("GET", path, params=query) as answer:
                body = await _read_capped(answer, where)
        except httpx.TimeoutException as exc:
            raise ToolError(
                f"{where}: {server} did not answer in time; ask for less "
                "(a smaller limit, a narrower time range)"
            ) from exc
        except httpx.HTTPError as exc:
            raise ToolError(
                f"{where}: cannot reach the benchwatch server at {server} "
                f"({type(exc).__name__}: {exc}); is --server right and the server up?"
            ) from exc
        if answer.status_code != 200:
            raise ToolError(_api_error(where, answer, body))
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ToolError(f"{where}: the answer is not JSON: is {server} benchwatch?") from exc


async def _read_capped(answer: httpx.Response, where: str) -> bytes:
    body = bytearray()
    async for chunk in answer.aiter_bytes():
        body += chunk
        if len(body) > READ_BYTES:
            raise ToolError(f"{where}: the answer passed {READ_BYTES // 2**20} MiB; ask for less")
    return bytes(body)


HINTS = {  # what the assistant can tell the person, by status
    401: "reads need a token: give the MCP server --token (or BENCHWATCH_TOKEN), e.g. one of "
    "`benchwatch token create --name assistant --scope read`",
    403: "the token may not read this",
    404: "no such thing: take ids from the list tools",
    429: "too many reads: wait and ask again",
    503: "the server is busy or its database unavailable: wait and ask again",
}


def _api_error(where: str, answer: httpx.Response, body: bytes) -> str:
    """The API's error answer in a sentence: status, kind, detail, each location, a hint."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        data = {"detail": body[:300].decode("utf-8", "replace")}
    kind = f" {data['error']}" if isinstance(data.get("error"), str) else ""
    lines = [f"{where} answered {answer.status_code}{kind}: {data.get('detail', '')}"]
    errors = data.get("errors")
    for error in errors[:10] if isinstance(errors, list) else []:
        if isinstance(error, dict):
            lines.append(f"- {error.get('loc', '?')}: {error.get('message', '')}")
    if answer.status_code in HINTS:
        lines.append(HINTS[answer.status_code])
    if retry := answer.headers.get("Retry-After"):
        lines.append(f"Retry-After: {retry[:20]} s")
    return "\n".join(lines)[:4000]


async def _only_reads(request: httpx.Request) -> None:
    """A request hook: this server reads; any other method is refused before it is sent."""
    if request.method != "GET":
        raise ToolError(f"refused {request.method} {request.url.path}: this server only reads")


def fit(answer: Any, budget: int = ANSWER_BYTES) -> str:
    """``answer`` as compact JSON of at most ``budget`` bytes, its longest lists cut to fit.

    A cut list keeps its first items (``KEEP_NEWEST``: its last) and the answer gains
    ``truncated``: what was kept of how many, and how to ask for the rest.
    """
    text = _dumps(answer)
    if len(text.encode()) <= budget:
        return text
    if not isinstance(answer, dict):
        return _cut(text, budget)
    note = f"the answer passed {budget // 1024} KiB: ask for less (limit, filters) or page on"
    shown: dict[str, Any] = {**answer, "truncated": {"note": note}}
    lists = [k for k, v in answer.items() if isinstance(v, list) and v]
    for key in sorted(lists, key=lambda k: -len(_dumps(answer[k]))):
        items: list[Any] = answer[key]
        low, high = 0, len(items) - 1  # the most items that fit: low fits, high + 1 does not
        while low < high:
            middle = (low + high + 1) // 2
            if _bytes(_cut_list(shown, key, items, middle)) <= budget:
                low = middle
            else:
                high = middle - 1
        shown = _cut_list(shown, key, items, low)
        if _bytes(shown) <= budget:
            return _dumps(shown)
    return _cut(_dumps(shown), budget)


def _cut_list(shown: dict[str, Any], key: str, items: list[Any], count: int) -> dict[str, Any]:
    """``shown`` with its list ``key`` (all of it: ``items``) cut to ``count``, the cut noted."""
    kept = items[-count:] if key in KEEP_NEWEST and count else items[:count]
    cut = {"kept": count, "of": len(items)}
    return {**shown, key: kept, "truncated": {**shown["truncated"], key: cut}}


def _bytes(value: Any) -> int:
    return len(_dumps(value).encode())


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _cut(text: str, budget: int) -> str:
    """The last resort for an answer no list cut can shrink: its start, said to be cut."""
    tail = f"\n[truncated: the answer passed {budget // 1024} KiB; ask for less]"
    head = text.encode()[: budget - len(tail.encode())].decode("utf-8", "ignore")
    return head + tail


def query_params(values: dict[str, Any], path: Sequence[str] = ()) -> dict[str, Query]:
    """A tool's arguments as its route's query: ``last_days`` as ``since``, times checked."""
    query = {k: v for k, v in values.items() if k not in ("self", *path)}
    last_days = query.pop("last_days", None)
    if last_days is not None:
        if query.get("since") is not None:
            raise ToolError("give since or last_days, not both")
        since = datetime.now(UTC) - timedelta(days=last_days)
        query["since"] = since.isoformat(timespec="seconds")
    elif "since" in query:
        query["since"] = iso_time("since", query["since"])
    if "until" in query:
        query["until"] = iso_time("until", query["until"])
    return query


def iso_time(name: str, value: str | None) -> str | None:
    """An ISO 8601 date or date-time as the API takes it (a naive one is UTC)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ToolError(
            f"{name}: {value!r} is not an ISO 8601 date or date-time, "
            "e.g. 2026-11-30 or 2026-11-30T08:00:00Z"
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()


def api_client(server: str, token: str | None, timeout: float = TIMEOUT_S) -> httpx.AsyncClient:
    """An HTTP client of ``server``'s API that sends the token and refuses every write."""
    headers = {"Accept": "application/json", "User-Agent": "benchwatch-mcp"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(
        base_url=f"{server.rstrip('/').removesuffix('/api/v1')}/api/v1",
        headers=headers,
        timeout=timeout,
        follow_redirects=False,
        event_hooks={"request": [_only_reads]},
    )
