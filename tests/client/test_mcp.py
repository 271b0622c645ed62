"""`benchwatch mcp` (issue 32, point 5): the API's reads as MCP tools, driven over stdio by the
MCP SDK's own client against the real app served by uvicorn.

One server and one MCP session serve the module: a private server (reads need a token) on a
database seeded once, through the API and, for the steps, as detection would store them.
Every request the MCP server makes is recorded where the app receives it.
"""

import json
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TextIO, get_args

import anyio
import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from benchwatch_client import mcp_api, mcp_server
from fastapi.testclient import TestClient
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, Tool
from sqlalchemy import select
from starlette.types import ASGIApp, Receive, Scope, Send

from app.anomalies import schemas
from app.anomalies.detectors import SHAPES
from app.anomalies.models import AlertGroup, Regression
from app.benchmarks.models import Series
from app.core.config import Settings
from app.core.db import Database
from app.core.migrate import upgrade_database
from app.main import create_app
from app.runs.models import Run
from tests.conftest import PEPPER, make_token, serving
from tests.factories import result, run_payload

ROOT = Path(__file__).resolve().parents[2]
MODELS = [f"m{i:03d}" for i in range(150)]  # 150 steps: one group too big for one answer


@dataclass
class Seeded:
    """The live server, what it holds, and the requests it received."""

    url: str
    token: str
    settings: Settings
    runs: list[int]  # mi300x-1: before the step, after it, a branch's run
    group_id: int
    requests: list[str] = field(default_factory=list)


def recording(application: ASGIApp, requests: list[str]) -> ASGIApp:
    """``application``, each HTTP request's method and path noted in ``requests``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            requests.append(f"{scope['method']} {scope['path']}")
        await application(scope, receive, send)

    return app


def seed(settings: Settings) -> tuple[list[int], int]:
    """Runs on mi300x-1 (a 20% step between the first two) and h100-8; the step's group."""
    database = Database(settings.DATABASE_URL)
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    now = datetime.now(UTC)
    payloads = []
    for index, level in enumerate((10.0, 12.0)):
        rows = [result(model, value=level) for model in MODELS]
        arch = {"arch": "AMD Instinct MI300X"}
        payloads.append(run_payload(f"mi-{index}", rows, machine="mi300x-1", device="rocm"))
        payloads[-1]["machine"] |= arch
        payloads.append(run_payload(f"h100-{index}", rows[:3], machine="h100-8"))
    branch = run_payload("mi-pr", [result(m, value=12.0) for m in MODELS[:5]], machine="mi300x-1")
    branch |= {"branch": "faster-attn", "default_branch": "main", "commit": "b" * 40}
    branch["machine"] = payloads[0]["machine"]
    ids = []
    application = create_app(settings)
    with TestClient(application) as client:
        for index, payload in enumerate([*payloads, branch]):
            payload["started_at"] = (now - timedelta(days=3, hours=-index)).isoformat()
            answer = client.post("/api/v1/runs", json=payload, headers=headers)
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
    application.state.database.dispose()
    runs = [ids[0], ids[2], ids[4]]
    with database.session_scope() as session:
        group_id = record_step(session, runs[0], runs[1])
    database.dispose()
    return runs, group_id


def record_step(session: Any, good: int, bad: int) -> int:
    """A 20% regression of every series of the bad run's machine, one group, as detected."""
    run = session.get(Run, bad)
    group = AlertGroup(
        machine_id=run.machine_id, channel=run.channel, first_bad_run_id=bad, last_good_run_id=good
    )
    session.add(group)
    session.flush()
    series = session.scalars(
        select(Series).where(Series.machine_id == run.machine_id, Series.channel == run.channel)
    ).all()
    session.add_all(
        Regression(
            series_id=one.id,
            group_id=group.id,
            last_good_run_id=good,
            first_bad_run_id=bad,
            direction="regression",
            before=10.0,
            after=12.0,
            before_spread=0.1,
            after_spread=0.1,
            rel_change=0.2,
            p_value=1e-6,
            detector={"name": "change_point"},
        )
        for one in series
    )
    session.flush()
    group_id: int = group.id
    return group_id


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    url = f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'benchwatch.db'}"
    upgrade_database(url)
    settings = Settings(DATABASE_URL=url, TOKEN_PEPPER=PEPPER, BROKER_URL=None, PUBLIC_READ=False)
    runs, group_id = seed(settings)
    database = Database(url)
    token = make_token(database, "read", name="assistant")
    database.dispose()
    application = create_app(settings)
    requests: list[str] = []
    try:
        with serving(recording(application, requests)) as base_url:
            yield Seeded(base_url, token, settings, runs, group_id, requests)
    finally:
        application.state.database.dispose()


class Assistant:
    """An MCP client session with `benchwatch mcp`, driven from a synchronous test."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def tools(self) -> list[Tool]:
        return self.portal.call(self.session.list_tools).tools

    def call(self, tool: str, **arguments: Any) -> CallToolResult:
        return self.portal.call(partial(self.session.call_tool, tool, arguments))

    def read(self, tool: str, **arguments: Any) -> Any:
        """The JSON a tool answers; fails on a tool error."""
        answer = self.call(tool, **arguments)
        assert not answer.is_error, text_of(answer)
        return json.loads(text_of(answer))

    def refused(self, tool: str, **arguments: Any) -> str:
        """The message of a tool error; fails on an answer."""
        answer = self.call(tool, **arguments)
        assert answer.is_error, text_of(answer)
        return text_of(answer)


def text_of(answer: CallToolResult) -> str:
    (content,) = answer.content
    text: str = getattr(content, "text")  # noqa: B009 (content is a union; text is its kind's)
    return text


@asynccontextmanager
async def connected(url: str, token: str | None, errlog: TextIO) -> AsyncIterator[ClientSession]:
    """`python -m workers.cli mcp --server URL` as a subprocess, its session initialized."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli", "mcp", "--server", url],
        env={"BENCHWATCH_TOKEN": token} if token else {},
        cwd=ROOT,
    )
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as running:
        yield running


@contextmanager
def assistant_of(
    portal: BlockingPortal, url: str, token: str | None, errlog: TextIO
) -> Iterator[Assistant]:
    with portal.wrap_async_context_manager(connected(url, token, errlog)) as session:
        yield Assistant(portal, session)


@pytest.fixture(scope="module")
def assistant(
    portal: BlockingPortal, seeded: Seeded, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Assistant]:
    """The module's session, with the read token; the server's stderr holds no traceback."""
    stderr = tmp_path_factory.mktemp("mcp-stderr") / "stderr.txt"
    with stderr.open("w") as errlog, assistant_of(portal, seeded.url, seeded.token, errlog) as one:
        yield one
    assert "Traceback" not in stderr.read_text()


def test_the_tools_are_listed_read_only_with_bounded_arguments(assistant: Assistant) -> None:
    tools = {tool.name: tool for tool in assistant.tools()}

    assert set(tools) == set(mcp_server.TOOLS)
    assert len(tools) >= 14
    for tool in tools.values():
        assert tool.description, tool.name
        assert tool.input_schema["type"] == "object", tool.name
        assert tool.annotations is not None, tool.name
        assert tool.annotations.read_only_hint, tool.name
        assert tool.annotations.destructive_hint is False, tool.name
    regressions = tools["list_regressions"].input_schema["properties"]
    assert regressions["limit"]["maximum"] == 500
    directions = next(s for s in regressions["direction"]["anyOf"] if "enum" in s)["enum"]
    assert "regression" in directions
    assert {"since", "last_days"} <= set(tools["list_alert_groups"].input_schema["properties"])
    assert tools["get_run"].input_schema["required"] == ["run_id"]


def test_what_regressed_on_mi300x_this_week(assistant: Assistant, seeded: Seeded) -> None:
    machines = assistant.read("list_machines", search="mi300x")
    assert [m["name"] for m in machines["items"]] == ["mi300x-1"]
    assert machines["items"][0]["arch"] == "AMD Instinct MI300X"

    found = assistant.read(
        "list_regressions", machine="mi300x-1", direction="regression", last_days=7, limit=5
    )
    assert found["total"] == len(MODELS)
    step = found["items"][0]
    assert (step["before"], step["after"], step["rel_change"]) == (10.0, 12.0, 0.2)
    assert step["series"]["machine"] == "mi300x-1"
    assert (step["last_good_run_id"], step["first_bad_run_id"]) == tuple(seeded.runs[:2])
    assert step["group_id"] == seeded.group_id
    assert assistant.read("list_regressions", machine="h100-8")["total"] == 0
    since = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert assistant.read("list_regressions", since=since)["total"] == 0  # found before then

    groups = assistant.read("list_alert_groups", machine="mi300x-1", last_days=7)
    assert [g["id"] for g in groups["items"]] == [seeded.group_id]
    assert groups["items"][0]["counts"]["regression"] == len(MODELS)
    one = assistant.read("get_regression", regression_id=step["id"])
    assert one["id"] == step["id"]


def test_series_points_runs_comparison_and_verdicts(assistant: Assistant, seeded: Seeded) -> None:
    series = assistant.read("search_series", machine="mi300x-1", model="m007", channel="nightly")
    (one,) = series["items"]
    points = assistant.read("get_series_points", series_id=one["id"], last_days=30)
    assert [p["value"] for p in points["points"]] == [10.0, 12.0]

    runs = assistant.read("list_runs", machine="mi300x-1", last_days=7, limit=2)
    assert len(runs["items"]) == 2
    assert runs["next_cursor"]
    older = assistant.read("list_runs", machine="mi300x-1", cursor=runs["next_cursor"])
    assert [r["id"] for r in older["items"]] == [seeded.runs[0]]
    run = assistant.read("get_run", run_id=seeded.runs[1], results_limit=3)
    assert run["result_count"] == len(MODELS)
    assert len(run["results"]) == 3
    assert run["results"][0]["samples"] is None  # values only, never raw samples

    compared = assistant.read(
        "compare_runs", base_run_id=seeded.runs[0], new_run_id=seeded.runs[1], limit=2
    )
    assert compared["total"] == len(MODELS)
    assert compared["next_offset"] == 2
    row = compared["rows"][0]
    assert (row["base_value"], row["new_value"]) == (10.0, 12.0)

    verdicts = assistant.read("get_run_verdicts", run_id=seeded.runs[2])
    assert verdicts["is_branch"]
    assert verdicts["branch"] == "faster-attn"
    assert len(verdicts["items"]) == 5


def test_findings_lists_answer_pages(assistant: Assistant, seeded: Seeded) -> None:
    failures = assistant.read("list_failures", machine="mi300x-1", open=True, failure="failed")
    assert failures["total"] == 0
    assert failures["items"] == []
    aggregates = assistant.read("list_aggregate_findings", stat="pass_rate", limit=500)
    assert aggregates["limit"] == 500


def test_an_answer_over_the_cap_is_cut_and_says_so(assistant: Assistant, seeded: Seeded) -> None:
    answer = assistant.call("get_alert_group", group_id=seeded.group_id)
    text = text_of(answer)
    assert not answer.is_error
    assert len(text.encode()) <= mcp_api.ANSWER_BYTES
    group = json.loads(text)
    cut = group["truncated"]["regressions"]
    assert cut["of"] == len(MODELS)
    assert 0 < cut["kept"] == len(group["regressions"]) < len(MODELS)
    assert "64 KiB" in group["truncated"]["note"]


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("list_regressions", {"limit": 501}, "less than or equal to 500"),
        ("list_regressions", {"direction": "sideways"}, "'regression'"),
        ("list_failures", {"failure": "crashed"}, "'accuracy'"),
        ("get_run", {"run_id": 2**31}, "less than or equal to 2147483647"),
        ("list_runs", {"since": "last tuesday"}, "not an ISO 8601 date"),
        ("list_runs", {"since": "2026-11-30", "last_days": 7}, "since or last_days, not both"),
        ("search_series", {"model": "x" * 257}, "at most 256 characters"),
        ("get_revision", {"revision": "../runs"}, "should match pattern"),
    ],
)
def test_a_bad_argument_is_a_tool_error_that_says_which(
    assistant: Assistant, tool: str, arguments: dict[str, Any], said: str
) -> None:
    message = assistant.refused(tool, **arguments)
    assert said in message
    assert "Traceback" not in message


def test_an_api_error_is_a_tool_error_with_its_message_and_location(
    assistant: Assistant, seeded: Seeded
) -> None:
    missing = assistant.refused("get_run", run_id=999_999)
    assert "GET /api/v1/runs/999999 answered 404 RunNotFound: run 999999 does not exist" in missing
    group = assistant.refused("get_alert_group", group_id=999_999)
    assert "404" in group
    both = assistant.refused(
        "compare_runs", base_run_id=seeded.runs[0], new_run_id=seeded.runs[1], base_config="x"
    )
    assert "answered 422" in both
    assert "query.new_config" in both
    # The session still answers after its errors.
    assert assistant.read("list_machines")["total"] == 2


def test_the_server_only_ever_sent_get(assistant: Assistant, seeded: Seeded) -> None:
    before = len(seeded.requests)
    for tool, arguments in [
        ("list_alert_groups", {}),
        ("get_alert_group", {"group_id": seeded.group_id}),
        ("list_regressions", {"status": "new"}),
        ("get_run", {"run_id": seeded.runs[0]}),
        ("get_revision", {"revision": "b" * 40}),  # a 404: no group's run carries it
    ]:
        assistant.call(tool, **arguments)
    assert len(seeded.requests) - before == 5
    # Every request of the module's session so far, whatever the tests before this one did.
    api = [r for r in seeded.requests if " /api/" in r]
    assert all(r.startswith("GET /api/v1/") for r in api), api


def test_without_the_token_a_private_server_is_a_tool_error(
    portal: BlockingPortal, seeded: Seeded, tmp_path: Path
) -> None:
    with (
        (tmp_path / "stderr").open("w") as errlog,
        assistant_of(portal, seeded.url, None, errlog) as anonymous,
    ):
        message = anonymous.refused("list_machines")
    assert "answered 401" in message
    assert "--token" in message
    assert "Traceback" not in (tmp_path / "stderr").read_text()


# In process: every tool and every argument, against a recording transport.


def values_for(schema: dict[str, Any]) -> dict[str, Any]:
    """A valid value for each argument of a tool (``last_days`` aside: it excludes ``since``)."""
    chosen: dict[str, Any] = {}
    for name, spec in schema["properties"].items():
        kind = next((s for s in spec.get("anyOf", [spec]) if s.get("type") != "null"), spec)
        if name == "last_days":
            continue
        if "enum" in kind:
            chosen[name] = kind["enum"][0]
        elif name in ("since", "until"):
            chosen[name] = "2026-11-30"
        elif kind.get("type") == "integer":
            chosen[name] = kind.get("minimum", 1) or 1
        elif kind.get("type") == "number":
            chosen[name] = 0.1
        elif kind.get("type") == "boolean":
            chosen[name] = True
        else:
            chosen[name] = "abc1234"
    return chosen


def route_of(openapi: dict[str, Any], path: str) -> dict[str, Any]:
    """The OpenAPI ``get`` operation whose path template matches ``path``."""
    for template, methods in openapi["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path) and "get" in methods:
            operation: dict[str, Any] = methods["get"]
            return operation
    raise AssertionError(f"no GET route matches {path}")


def kind_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The schema of a value, its ``null`` alternative aside."""
    return next((s for s in spec.get("anyOf", [spec]) if s.get("type") != "null"), spec)


def test_every_tool_sends_only_gets_with_the_api_s_own_bounded_parameters(seeded: Seeded) -> None:
    sent: list[tuple[Tool, httpx.Request]] = []
    calling: list[Tool] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((calling[-1], request))
        return httpx.Response(200, json={})

    client = httpx.AsyncClient(
        base_url="http://bench.example/api/v1", transport=httpx.MockTransport(answer)
    )
    server = mcp_server.build_server(mcp_api.Api(client))
    application = create_app(seeded.settings)
    openapi = application.openapi()
    application.state.database.dispose()

    async def call_every_tool() -> None:
        for tool in await server.list_tools():
            calling.append(tool)
            await server.call_tool(tool.name, values_for(tool.input_schema))
            if "last_days" in tool.input_schema["properties"]:
                arguments = {**values_for(tool.input_schema), "since": None, "last_days": 7}
                await server.call_tool(tool.name, arguments)
        await client.aclose()

    anyio.run(call_every_tool)
    assert {tool.name for tool, _ in sent} == set(mcp_server.TOOLS)
    for tool, request in sent:
        assert request.method == "GET"
        declared = {p["name"]: p for p in route_of(openapi, request.url.path)["parameters"]}
        assert set(request.url.params) <= set(declared), request.url
        # Each argument sent is bounded at least as tightly as the API bounds it.
        for name, spec in tool.input_schema["properties"].items():
            ours, theirs = kind_of(spec), kind_of(declared.get(name, {}).get("schema", {}))
            for most in ("maximum", "maxLength", "exclusiveMaximum"):
                if most in theirs:
                    assert ours.get(most, float("inf")) <= theirs[most], (tool.name, name)
            if "enum" in theirs:
                assert set(ours["enum"]) <= set(theirs["enum"]), (tool.name, name)


def test_the_enumerations_are_the_api_s() -> None:
    assert get_args(mcp_server.Status) == get_args(schemas.Status)
    assert get_args(mcp_server.StepState) == get_args(schemas.StepState)
    assert get_args(mcp_server.FailureKind) == get_args(schemas.FailureKind)
    assert get_args(mcp_server.Severity) == get_args(schemas.Severity)
    assert get_args(mcp_server.AggregateStat) == get_args(schemas.AggregateStat)
    assert get_args(mcp_server.AggregateRule) == get_args(schemas.AggregateRule)
    assert set(get_args(mcp_server.Direction)) == {"regression", "improvement", "change", *SHAPES}


def test_an_unreachable_server_and_a_write_are_refused_with_a_reason() -> None:
    async def attempt(call: Callable[[], Any]) -> str:
        with pytest.raises(ToolError) as refused:
            await call()
        return str(refused.value)

    async def both() -> tuple[str, str]:
        async with mcp_api.api_client("http://127.0.0.1:9", None, timeout=2) as client:
            unreachable = await attempt(lambda: mcp_api.Api(client).get("/machines"))
            write = await attempt(lambda: client.post("/runs", json={}))
        return unreachable, write

    unreachable, write = anyio.run(both)
    assert "cannot reach the benchwatch server at http://127.0.0.1:9" in unreachable
    assert "refused POST /api/v1/runs: this server only reads" in write


def test_fit_cuts_the_longest_list_and_keeps_the_newest_points() -> None:
    points = [{"value": i, "pad": "x" * 50} for i in range(1000)]
    cut = json.loads(mcp_api.fit({"total": 1000, "points": points}, budget=4096))
    kept = cut["truncated"]["points"]["kept"]
    assert 0 < kept < 1000
    assert cut["points"][-1]["value"] == 999
    assert mcp_api.fit({"a": 1}) == '{"a":1}'
    assert len(mcp_api.fit("x" * 10_000, budget=1024).encode()) <= 1024
