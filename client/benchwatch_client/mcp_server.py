"""``benchwatch mcp`` (``benchwatch-mcp``): the API's reads as tools for an AI assistant.

An MCP server on stdio that a person's assistant (Claude Desktop, an IDE) starts on their
laptop, pointed at the team's benchwatch server (``--server``, ``--token``). It is a client of
the server's JSON API, never of its database, and it only ever sends ``GET``: every request
goes through ``Api.get``, and the HTTP client refuses any other method. So each tool is
bounded as the API's reads are; on top of that each tool bounds its arguments (pages, limits
and lengths no larger than the API's own, only the values an enumeration knows) and the text
it hands the assistant (``ANSWER_BYTES`` of JSON, the cut said in the answer). An API error,
a refused argument or an unreachable server is a tool error that says what and where, never
a traceback. docs/mcp.md has the set-up and the security model.
"""

import argparse
import asyncio
import inspect
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from benchwatch_client.mcp_api import (
    COMPARE_OFFSET,
    CURSOR_LENGTH,
    INT32_MAX,
    MAX_PAGE,
    MAX_POINTS,
    PAGE_LIMIT,
    RESULTS_PAGE,
    TIMEOUT_S,
    Api,
    api_client,
    fit,
    query_params,
)
from benchwatch_client.text import is_http_url

# The values the API's enumerations take (app/anomalies/schemas.py, models.py).
Status = Literal[
    "new", "acknowledged", "infra", "fixed", "downstream", "duplicate", "expected", "invalid"
]
StepState = Literal["suspected", "confirmed", "withdrawn"]
Direction = Literal["regression", "improvement", "change", "noise", "bimodal"]
FailureKind = Literal["failed", "accuracy", "removed", "added"]
Severity = Literal["high", "low"]
AggregateStat = Literal[
    "pass_rate", "geomean_speedup", "mean_compile_time_s", "mean_compression_ratio"
]
AggregateRule = Literal["step", "pass_rate_below", "speedup_below_base", "compression_below_base"]

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
INSTRUCTIONS = (
    "benchwatch keeps benchmark results per machine and finds steps (regressions, improvements),"
    " failing cases and worse aggregates, in alert groups. Machine filters take exact names: "
    "list_machines(search='MI300X') finds them. 'What regressed on X this week': "
    "list_regressions(machine=NAME, direction='regression', last_days=7). rel_change is a "
    "fraction (0.12 = 12%). Lists are newest first and paged. Every tool only reads."
)


def _field(description: str, **bounds: Any) -> Any:
    return Field(description=description, **bounds)


def _name(what: str, length: int = 128) -> Any:
    return _field(f"{what} (exact match)", min_length=1, max_length=length)


RowId = Annotated[int, _field("an id as the list tools give it", ge=1, le=INT32_MAX)]
GroupId = Annotated[int | None, _field("an alert group's id", ge=1, le=INT32_MAX)]
Machine = Annotated[str | None, _name("a machine's name, e.g. mi300x-1; list_machines finds it")]
Search = Annotated[
    str | None,
    _field("case-insensitive text of the name, device, arch or CPU, e.g. MI300X", max_length=128),
]
Channel = Annotated[str | None, _name("a release line, e.g. nightly; a branch's: nightly@b", 64)]
Project = Annotated[
    str | None, _field("only this project's (absent: all projects)", min_length=1, max_length=64)
]
Suite = Annotated[str | None, _name("a benchmark suite, e.g. torchbench")]
Config = Annotated[str | None, _name("a compiler config, e.g. eager, inductor")]
Metric = Annotated[str | None, _name("a metric, e.g. latency, speedup, peak_memory")]
Mode = Annotated[str | None, _name("inference or training", 16)]
Precision = Annotated[str | None, _name("e.g. bf16, fp16, amp", 16)]
TriageStatus = Annotated[Status | None, _field("triage status; new: nobody looked yet")]
Page = Annotated[int, _field("page from 1", ge=1, le=MAX_PAGE)]
Limit = Annotated[int, _field(f"items a page, at most {PAGE_LIMIT}", ge=1, le=PAGE_LIMIT)]
Cursor = Annotated[
    str | None, _field("the next cursor the previous answer gave", max_length=CURSOR_LENGTH)
]
Time = Annotated[
    str | None,
    _field("ISO 8601 date or date-time, e.g. 2026-11-30 or 2026-11-30T08:00:00Z", max_length=40),
]
LastDays = Annotated[int | None, _field("the last N days to now (not with since)", ge=1, le=366)]
Open = Annotated[bool | None, _field("true: still open; false: recovered; absent: both")]
REVISION = r"^[A-Za-z0-9][A-Za-z0-9_.:+\-]*$"
Revision = Annotated[
    str, _field("a commit, torch build or git sha", min_length=1, max_length=128, pattern=REVISION)
]


@dataclass(frozen=True)
class Tools:
    """The tools, one a method; its docstring is what the assistant reads about it.

    Parameters are named as the route's query parameters: a tool sends them as they come.
    """

    api: Api

    async def list_machines(self, search: Search = None, project: Project = None) -> str:
        """Machines results came from: name, device, arch (GPU model), GPU count and memory.

        Returns {"items": [machine, ...], "total": n}. The other tools filter by a machine's
        exact `name`; `search` finds it from a GPU model such as "MI300X" or "H100".
        """
        machines = await self.api.get("/machines", {"project": project})
        if search is not None and isinstance(machines, list):
            fields = ("name", "device", "arch", "arch_short", "cpu")
            said = [" ".join(str(m.get(f, "")) for f in fields).lower() for m in machines]
            machines = [m for m, text in zip(machines, said, strict=True) if search.lower() in text]
        return fit({"items": machines, "total": len(machines)})

    async def search_series(
        self,
        suite: Suite = None,
        model: Annotated[str | None, _name("a model or benchmark, e.g. resnet50", 256)] = None,
        category: Annotated[str | None, _name("a benchmark category", 64)] = None,
        mode: Mode = None,
        precision: Precision = None,
        config: Config = None,
        metric: Metric = None,
        machine: Machine = None,
        channel: Channel = None,
        project: Project = None,
        page: Page = 1,
        limit: Limit = 50,
    ) -> str:
        """Series (one benchmark x metric x machine x channel) matching every filter given.

        Returns {"items": [{id, benchmark, metric {name, unit, higher_is_better}, machine,
        channel, project}], "total", "page", "limit"}; get_series_points gives the values.
        """
        return fit(await self.api.get("/series", query_params(locals())))

    async def get_series_points(
        self,
        series_id: RowId,
        since: Time = None,
        until: Time = None,
        last_days: LastDays = None,
        max_points: Annotated[
            int, _field("downsample to about this many points", ge=10, le=MAX_POINTS)
        ] = 200,
    ) -> str:
        """A series' values over time, oldest first, each with its run, commit and status.

        Returns {"series", "total", "downsampled", "points": [{run_id, measured_at, status,
        value, commit, samples_min, samples_max}]}, values in series.metric.unit; past
        `max_points` it is downsampled. About 300 points fit: a cut answer keeps the newest.
        """
        query = query_params(locals(), path=("series_id",))
        return fit(await self.api.get(f"/series/{series_id}/points", query))

    async def list_regressions(
        self,
        machine: Machine = None,
        direction: Annotated[
            Direction | None,
            _field("regression (worse), improvement, change (no better way), noise, bimodal"),
        ] = None,
        state: Annotated[
            StepState | None, _field("confirmed by the test, suspected early, withdrawn")
        ] = None,
        status: Annotated[Status | None, _field("triage status; new: nobody looked yet")] = None,
        since: Time = None,
        last_days: LastDays = None,
        channel: Channel = None,
        suite: Suite = None,
        config: Config = None,
        metric: Metric = None,
        group_id: GroupId = None,
        first_bad_run_id: Annotated[int | None, _field("a run's id", ge=1, le=INT32_MAX)] = None,
        project: Project = None,
        page: Page = 1,
        limit: Limit = 50,
    ) -> str:
        """Steps found in series (regressions and improvements), newest found first.

        `since` / `last_days`: those found from then on ("this week": last_days=7). Each has
        its series (benchmark, metric and unit, machine), before and after (the levels'
        medians, in the unit), rel_change (a fraction: 0.12 = 12%), p_value, its runs
        (last_good_run_id, first_bad_run_id: see compare_runs), group_id and triage status.
        """
        return fit(await self.api.get("/regressions", query_params(locals())))

    async def get_regression(self, regression_id: RowId) -> str:
        """One step found in a series, with its levels, runs, explanation hints and triage."""
        return fit(await self.api.get(f"/regressions/{regression_id}"))

    async def list_failures(
        self,
        machine: Machine = None,
        open: Open = None,
        failure: Annotated[
            FailureKind | None,
            _field("failed (error, OOM, timeout), accuracy; removed, added: coverage changes"),
        ] = None,
        severity: Annotated[
            Severity | None, _field("high: failing cases; low: coverage changes")
        ] = None,
        flaky: Annotated[bool | None, _field("only flaky (true) or steady (false) ones")] = None,
        status: TriageStatus = None,
        channel: Channel = None,
        suite: Suite = None,
        group_id: GroupId = None,
        project: Project = None,
        page: Page = 1,
        limit: Limit = 50,
    ) -> str:
        """Cases that passed and now fail, and coverage changes, newest first.

        No time filter in the API: each has created_at (when found); for "this week" read
        pages until it is older. Returns {"items", "total", "page", "limit"}.
        """
        return fit(await self.api.get("/failures", query_params(locals())))

    async def list_aggregate_findings(
        self,
        machine: Machine = None,
        open: Open = None,
        stat: Annotated[AggregateStat | None, _field("the dashboard aggregate")] = None,
        rule: Annotated[AggregateRule | None, _field("the rule that fired")] = None,
        status: TriageStatus = None,
        channel: Channel = None,
        suite: Suite = None,
        config: Config = None,
        group_id: GroupId = None,
        project: Project = None,
        page: Page = 1,
        limit: Limit = 50,
    ) -> str:
        """Dashboard aggregates (pass rate, geomean speedup, ...) that got worse, newest first.

        No time filter in the API: each has created_at; read pages until it is older than
        the time asked about. Returns {"items", "total", "page", "limit"}.
        """
        return fit(await self.api.get("/aggregate-findings", query_params(locals())))

    async def list_alert_groups(
        self,
        machine: Machine = None,
        since: Time = None,
        last_days: LastDays = None,
        status: Annotated[Status | None, _field("the group's most pressing member's")] = None,
        overdue: Annotated[bool, _field("only those past a triage or bug deadline")] = False,
        channel: Channel = None,
        project: Project = None,
        page: Page = 1,
        limit: Limit = 50,
    ) -> str:
        """Alert groups (the findings of one machine between two runs), newest first.

        `since` / `last_days`: those created from then on. Each has counts per kind, what it
        spans (suites, configs, metrics), what changed between its runs (torch, triton,
        driver) and triage deadlines; get_alert_group lists its members.
        """
        return fit(await self.api.get("/alert-groups", query_params(locals())))

    async def get_alert_group(self, group_id: RowId) -> str:
        """One alert group with its regressions, failures, aggregate findings and silences."""
        return fit(await self.api.get(f"/alert-groups/{group_id}"))

    async def get_revision(self, revision: Revision) -> str:
        """Everything one change moved: the alert groups whose first bad run carries it.

        Across machines and projects: the groups, their steps counted by device, suite,
        config and precision, and the 20 worst steps. None is a 404.
        """
        return fit(await self.api.get(f"/revisions/{quote(revision, safe='')}"))

    async def compare_runs(
        self,
        base_run_id: RowId,
        new_run_id: RowId,
        stats: Annotated[
            bool, _field("how sure each change is, from samples (one metric, <= 300 cases)")
        ] = False,
        suite: Suite = None,
        config: Config = None,
        precision: Precision = None,
        mode: Mode = None,
        metric: Metric = None,
        threshold: Annotated[
            float, _field("relative change counted as a move (0.05 = 5%)", ge=0, lt=1)
        ] = 0.05,
        base_config: Annotated[str | None, _name("config against config: the base's")] = None,
        new_config: Annotated[str | None, _name("... against this config of the new run")] = None,
        offset: Annotated[int, _field("rows to skip", ge=0, le=COMPARE_OFFSET)] = 0,
        limit: Limit = 100,
    ) -> str:
        """Two runs case by case: base value, new value, relative change and a verdict each.

        Rows in case order; `total` counts them and `next_offset` is the next page's offset
        (null after the last). With stats, each row says how sure the change is (interval,
        p-value, effect size). `geomean` summarises the ratio over common cases.
        """
        return fit(await self.api.get("/compare", query_params(locals())))

    async def get_run_verdicts(self, run_id: RowId) -> str:
        """A run's results judged against the default branch at its fork point, worst first.

        For a branch's (a pull request's) run: pass, regression, improvement, no_baseline or
        error per result, with the baseline used and the counts of each verdict.
        """
        return fit(await self.api.get(f"/runs/{run_id}/verdicts"))

    async def list_runs(
        self,
        machine: Machine = None,
        since: Time = None,
        until: Time = None,
        last_days: LastDays = None,
        channel: Channel = None,
        branch: Annotated[str | None, _name("a git branch", 256)] = None,
        commit: Annotated[str | None, _name("a commit sha", 64)] = None,
        trigger: Annotated[str | None, _name("what started it: nightly, ci, manual", 16)] = None,
        tier: Annotated[str | None, _name("a run tier", 32)] = None,
        project: Project = None,
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> str:
        """Runs (one machine x commit x suite execution), newest started first.

        `since` / `until` / `last_days` select by start time. Returns {"items": [run with
        machine, environment (torch, triton, cuda/hip, driver), commit, branch, started_at,
        result_count], "next_cursor"}: pass next_cursor as cursor for older runs.
        """
        return fit(await self.api.get("/runs", query_params(locals())))

    async def get_run(
        self,
        run_id: RowId,
        results_limit: Annotated[int, _field("results, at most 5000", ge=1, le=RESULTS_PAGE)] = 100,
        results_cursor: Cursor = None,
    ) -> str:
        """One run with its results in case order (values, never raw samples).

        Each result: series_id, benchmark, metric, value, status, samples count/min/max.
        `result_count` says how many in all; results_next_cursor gives the next ones.
        """
        query = query_params(locals(), path=("run_id",))
        return fit(await self.api.get(f"/runs/{run_id}", {**query, "samples": False}))


TOOLS = tuple(name for name in vars(Tools) if not name.startswith("_"))


def build_server(api: Api) -> MCPServer:
    """The MCP server: every tool of ``TOOLS``, read-only, each answering JSON text."""
    server: MCPServer = MCPServer("benchwatch", instructions=INSTRUCTIONS, log_level="WARNING")
    tools = Tools(api)
    for name in TOOLS:
        tool = getattr(tools, name)
        described = inspect.getdoc(tool)  # the docstring without its indentation
        server.add_tool(tool, description=described, annotations=READ_ONLY, structured_output=False)
    return server


OPTIONS = {  # the token's help names its variable, never shows the secret
    "--server": "the benchwatch server's URL, e.g. https://bench.example (default: "
    "$BENCHWATCH_SERVER)",
    "--token": "a token to read with, needed when the server's reads are private; scope read "
    "is enough (default: $BENCHWATCH_TOKEN, else none)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the MCP server: the benchwatch server, its token, the timeout."""
    for flag, text in OPTIONS.items():
        variable = f"BENCHWATCH_{flag.removeprefix('--').upper()}"
        parser.add_argument(flag, default=os.environ.get(variable), help=text)
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        help="seconds to wait for each API answer (default: %(default)s)",
    )


def serve(args: argparse.Namespace, prog: str = "benchwatch-mcp") -> int:
    """Serve the tools on stdin/stdout until the client closes them; 2 on a bad --server."""
    if not args.server or not is_http_url(args.server) or not args.timeout > 0:
        sys.stderr.write(f"{prog}: give --server as an http(s) URL, and --timeout over 0\n")
        return 2

    async def run() -> None:
        async with api_client(args.server, args.token, args.timeout) as client:
            await build_server(Api(client)).run_stdio_async()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``benchwatch-mcp``."""
    parser = argparse.ArgumentParser(
        prog="benchwatch-mcp",
        description="An MCP server (stdio) that reads a benchwatch server's API for an assistant.",
    )
    add_arguments(parser)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
