"""History at scale: 50 million results, partitioned and unpartitioned, side by side.

A year of a large platform: 5 machines x 3 channels x 2 runs a day x ~4,600 results (50M
by default; ``--results N`` for a smaller one). For each layout of ``result`` (monthly
partitions, the migrations' own; one plain table, as before them) in a database of its own:

1. **Catalog.** One run per machine and channel is posted through the HTTP API of a real
   server (``benchwatch serve`` on 127.0.0.1, production mode: detection tasks queue in a
   Redis database no worker reads), creating every benchmark and series.
2. **Bulk fill.** The rest of the year is written server-side, month by month: runs from
   ``generate_series`` copied from each machine and channel's first run, and their results
   from its results with the value jittered by +/-2% (so the same metrics, statuses, samples
   and value distributions), about 6% of the series 15% slower from day 300 on. The result
   indexes are dropped for the fill and built again after it (as a restore does), then
   ``ANALYZE``.
3. **Detection** of the run at the step, on each channel of the first machine, in this
   process: the alert page has groups to show.
4. **Ingest at size.** ``--ingest-runs`` further runs of the same shape posted through the
   HTTP API by 4 client threads into the full table, after a few untimed ones: results/s.
5. **Reads at size**, one request at a time over HTTP: series points of one year (the API a
   chart reads) for many series, and the series, overview, compare and alert pages: p50/p95.
6. **Disk:** ``result`` with every partition and index, per million results.

The two layouts' figures are printed side by side with their ratio, beside the targets
(ingest >= 50,000 results/s, series p95 <= 50 ms, every page p95 <= 500 ms). The databases
are dropped at the end (``--keep`` keeps them).

    .venv/bin/python bench/scale.py [--results 50000000] [--layouts partitioned,plain]
"""

import argparse
import hashlib
import json
import os
import random
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.anomalies.jobs import detect_run
from app.core.db import Database
from app.core.migrate import upgrade_database
from app.runs.partitions import add_months, ensure_months, month_of
from bench.ingest import (
    API,
    CONFIGS,
    MODES,
    PRECISIONS,
    SUITES,
    WARM_UP_RUNS,
    Case,
    _case,
    case_results,
    percentile,
    post_runs,
    postgres_database,
    queued_tasks_dropped,
    running_server,
    timed_gets,
)

MACHINES = tuple(f"scale-h100-{i}" for i in range(5))
CHANNELS = ("nightly", "release", "main")
RUNS_PER_DAY = 2
DAYS = 365
STEP_DAY = 300  # the day some series get slower (the alert page has groups to show)
STEP_EVERY = 17  # one series in this many steps
TARGET_INGEST = 50_000
TARGET_SERIES_MS = 50.0
TARGET_PAGE_MS = 500.0
RESULT_COLUMNS = "run_id, series_id, measured_at, status, value, samples, text_value, reason, extra"


@dataclass
class Figures:
    """One layout's measurements."""

    layout: str
    results: int = 0
    fill_s: float = 0.0
    ingest_rate: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    bytes_per_million: float = 0.0
    notes: list[str] = field(default_factory=list)


def say(message: str) -> None:
    """A progress line, with the time."""
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


# --- payloads -------------------------------------------------------------------------------


def scale_cases(count: int) -> list[Case]:
    """``count`` distinct cases: every suite's models (numbered again past the first round)."""
    keys = []
    for round_ in range(1 + count // 360):
        for suite, models in SUITES.items():
            for model in models:
                name = model if round_ == 0 else f"{model}_r{round_}"
                keys += [(suite, name, c, p, m) for c in CONFIGS for p in PRECISIONS for m in MODES]
    random.Random(7).shuffle(keys)
    return [_case(*key) for key in keys[:count]]


def body(machine: str, channel: str, slot: int, start: datetime, cases: list[Case]) -> bytes:
    """A run of ``cases`` on ``machine`` and ``channel``, the ``slot``-th 12 hours after start."""
    at = start + timedelta(hours=24 / RUNS_PER_DAY * slot)
    key = f"scale-{machine}-{channel}-{slot}"
    rng = random.Random(key)
    payload = {
        "key": key,
        "machine": {"name": machine, "device": "cuda", "arch": "NVIDIA H100 80GB HBM3"},
        "environment": {"channel": channel, "torch": f"2.6.0.dev{at:%Y%m%d}+cu124"},
        "trigger": "schedule",
        "tier": "daily",
        "commit": hashlib.sha1(key.encode()).hexdigest()[:12],
        "branch": "main",
        "started_at": at.isoformat(),
        "finished_at": (at + timedelta(hours=3)).isoformat(),
        "results": [row for case in cases for row in case_results(case, slot, rng)],
    }
    return json.dumps(payload, separators=(",", ":")).encode()


# --- layouts --------------------------------------------------------------------------------


def unpartition(url: str) -> None:
    """Make ``result`` one plain table, as it was before the partitioning migration."""
    with psycopg.connect(_plain(url), autocommit=False) as conn:
        conn.execute("DROP TABLE result")
        conn.execute(
            "CREATE TABLE result (run_id integer NOT NULL, series_id integer NOT NULL, "
            "measured_at timestamptz NOT NULL, status varchar(16) NOT NULL, value float8, "
            "samples json, text_value varchar(256), reason text NOT NULL, extra json)"
        )
        conn.execute("ALTER TABLE result ADD CONSTRAINT pk_result PRIMARY KEY (run_id, series_id)")
        conn.execute(
            "CREATE INDEX ix_result_series_id_measured_at ON result (series_id, measured_at)"
        )


def index_statements(partitioned: bool) -> list[str]:
    """The statements that build ``result``'s indexes (as the migrations make them)."""
    key = "run_id, series_id, measured_at" if partitioned else "run_id, series_id"
    return [
        f"ALTER TABLE result ADD CONSTRAINT pk_result PRIMARY KEY ({key})",
        "CREATE INDEX ix_result_series_id_measured_at ON result (series_id, measured_at)",
    ]


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


# --- phases ---------------------------------------------------------------------------------


def post_catalog(server: Any, cases: list[Case], start: datetime) -> None:
    """Slot 0 of every machine and channel, through the API: creates the catalog."""
    pairs = [(m, c) for m in MACHINES for c in CHANNELS]
    load = post_runs(server, lambda i: body(*pairs[i], 0, start, cases), len(pairs), 2)
    say(f"catalog: {len(pairs)} runs x {load.results // len(pairs):,} results via the API")


def bulk_fill(url: str, partitioned: bool, last_slot: int, start: datetime) -> float:
    """Slots 1..last_slot of every machine and channel, server-side; returns the seconds."""
    began = time.perf_counter()
    with psycopg.connect(_plain(url), autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("SET synchronous_commit = off")
        columns = [
            name
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'run' AND column_name <> 'id' ORDER BY ordinal_position"
            )
        ]
        made = {
            "key": "s.key || '-' || g",
            "payload_hash": "md5(s.key || g)",
            "commit": "substr(md5(g::text || s.key), 1, 12)",
            "started_at": "s.started_at + g * interval '12 hours'",
            "finished_at": "s.started_at + g * interval '12 hours' + interval '3 hours'",
            "created_at": "s.started_at + g * interval '12 hours' + interval '3 hours'",
            "detected_at": "s.started_at + g * interval '12 hours' + interval '3 hours'",
        }
        selected = ", ".join(made.get(c, f"s.{c}") for c in columns)
        names = ", ".join(f'"{c}"' for c in columns)
        conn.execute(
            f"INSERT INTO run ({names}) SELECT {selected} FROM run s, "
            f"generate_series(1, {last_slot}) g WHERE s.key LIKE 'scale-%-0'"
        )
        conn.execute(
            "CREATE TABLE fill AS SELECT n.id, s.id AS seed, n.started_at FROM run n "
            "JOIN run s ON s.key LIKE 'scale-%-0' AND n.key LIKE s.key || '-%'"
        )
        conn.execute("CREATE INDEX ON fill (started_at)")
        conn.execute("ALTER TABLE result DROP CONSTRAINT pk_result")
        conn.execute("DROP INDEX ix_result_series_id_measured_at")
        step_at = start + timedelta(days=STEP_DAY)
        month = month_of(start)
        end = start + timedelta(hours=12 * (last_slot + 1))
        while month <= month_of(end):
            after = add_months(month, 1)
            inserted = conn.execute(
                f"INSERT INTO result ({RESULT_COLUMNS}) "
                "SELECT f.id, r.series_id, f.started_at, r.status, r.value * "
                "(0.98 + 0.04 * random()) * CASE WHEN r.series_id %% %(every)s = 0 AND "
                "f.started_at >= %(step)s THEN 1.15 ELSE 1 END, r.samples, r.text_value, "
                "r.reason, r.extra FROM fill f JOIN result r ON r.run_id = f.seed "
                "WHERE f.started_at >= %(from)s AND f.started_at < %(to)s",
                {
                    "every": STEP_EVERY,
                    "step": step_at,
                    "from": datetime(month.year, month.month, 1, tzinfo=UTC),
                    "to": datetime(after.year, after.month, 1, tzinfo=UTC),
                },
            ).rowcount
            say(f"  fill {month:%Y-%m}: {inserted:,} results")
            month = after
        say("  building the indexes")
        for statement in index_statements(partitioned):
            conn.execute(statement)
        conn.execute("DROP TABLE fill")
        conn.execute("VACUUM ANALYZE result")
        conn.execute("ANALYZE")  # the catalog's tables too, as autovacuum would have by now
    return time.perf_counter() - began


def detect_step(url: str, start: datetime) -> list[str]:
    """Detect the first machine's runs at the step, in this process: alert groups to show."""
    notes = []
    database = Database(url)
    at = start + timedelta(days=STEP_DAY)
    with psycopg.connect(_plain(url)) as conn:
        ids = [
            run_id
            for (run_id,) in conn.execute(
                "SELECT DISTINCT ON (channel) id FROM run WHERE started_at >= %s "
                "AND machine_id = (SELECT id FROM machine WHERE name = %s) "
                "ORDER BY channel, started_at",
                (at, MACHINES[0]),
            )
        ]
    for run_id in ids:
        began = time.perf_counter()
        detect_run(database, {}, run_id=run_id)
        notes.append(f"detection of run {run_id}: {time.perf_counter() - began:.1f} s")
    database.dispose()
    return notes


def ingest_at_size(server: Any, cases: list[Case], start: datetime, first: int, runs: int) -> float:
    """Post ``runs`` runs after ``first`` into the full table (warm-up first); results/s."""
    pairs = [(m, c) for m in MACHINES for c in CHANNELS]

    def of(index: int) -> bytes:
        machine, channel = pairs[index % len(pairs)]
        return body(machine, channel, first + index // len(pairs), start, cases)

    post_runs(server, of, WARM_UP_RUNS, 4)
    bodies = [of(WARM_UP_RUNS + i) for i in range(runs)]
    load = post_runs(server, bodies.__getitem__, len(bodies), 4)
    say(f"ingest at size: {load.results:,} results in {load.seconds:.1f} s: {load.rate:,.0f}/s")
    return load.rate


def read_paths(server: Any, requests: int, start: datetime) -> dict[str, list[str]]:
    """Each read measured, with ``requests`` paths spread over machines, channels, series."""
    rng = random.Random(5)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        series = []
        for page in (1, 2):
            query: dict[str, str | int] = {"machine": MACHINES[0], "limit": 500, "page": page}
            series += client.get(f"{API}/series", params=query).raise_for_status().json()["items"]
        groups = client.get(f"{API}/alert-groups").raise_for_status().json()["items"]
    since, until = start.isoformat(), (start + timedelta(days=DAYS + 30)).isoformat()
    window = httpx.QueryParams(since=since, until=until)
    picked = [rng.choice(series) for _ in range(requests)]
    pairs = [(rng.choice(MACHINES), rng.choice(CHANNELS)) for _ in range(requests)]
    models = sorted({s["benchmark"]["model"] for s in series if "benchmark" in s} or {"resnet50"})
    paths = {
        "series points (API, 1 year)": [f"{API}/series/{s['id']}/points?{window}" for s in picked],
        "series page": [
            f"/series?machine={m}&channel={c}&model={rng.choice(models)}&metric=abs_latency"
            for m, c in pairs
        ],
        "overview page": [f"/?machine={m}&channel={c}" for m, c in pairs],
        "compare page (runs)": [f"/compare?kind=runs&machine={m}&channel={c}" for m, c in pairs],
        "alert page": ["/alerts"] * requests,
    }
    if groups:
        paths["alert group page"] = [f"/alerts?group={rng.choice(groups)['id']}" for _ in pairs]
    return paths


def measure(layout: str, args: argparse.Namespace, workdir: Path) -> Figures:
    """Fill, ingest and read one layout in a database of its own."""
    figures = Figures(layout)
    runs = len(MACHINES) * len(CHANNELS) * RUNS_PER_DAY * DAYS
    cases = scale_cases(max(1, round(args.results / runs / 8)))
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(days=DAYS)
    last_slot = RUNS_PER_DAY * DAYS - 1
    with ExitStack() as stack:
        url = stack.enter_context(kept_or_dropped(args))
        upgrade_database(url)
        if layout == "plain":
            unpartition(url)
        else:  # the year's months, as the daily upkeep makes them ahead of time
            database = Database(url)
            with database.session_scope() as session:
                months = [add_months(month_of(start), i) for i in range(14)]
                ensure_months(session, months)
            database.dispose()
        say(f"[{layout}] database {url.rsplit('/', 1)[1]}: {len(cases) * 8:,} results a run")
        stack.enter_context(queued_tasks_dropped(args.broker_url))
        server = stack.enter_context(running_server(url, 2, workdir, args.broker_url))
        post_catalog(server, cases, start)
        figures.fill_s = bulk_fill(url, layout == "partitioned", last_slot, start)
        with psycopg.connect(_plain(url)) as conn:
            figures.results = conn.execute("SELECT count(*) FROM result").fetchone()[0]
        say(f"[{layout}] filled: {figures.results:,} results in {figures.fill_s:.0f} s")
        figures.notes += detect_step(url, start)
        figures.ingest_rate = ingest_at_size(server, cases, start, last_slot + 1, args.ingest_runs)
        for name, paths in read_paths(server, args.requests, start).items():
            figures.latencies[name] = timed_gets(server.url, paths)
            p50, p95 = (percentile(figures.latencies[name], q) for q in (50, 95))
            say(f"[{layout}] {name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
        with psycopg.connect(_plain(url)) as conn:
            size = conn.execute(
                "SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM "
                "pg_partition_tree('result')), pg_total_relation_size('result'))"
            ).fetchone()[0]
            count = conn.execute("SELECT count(*) FROM result").fetchone()[0]
        figures.bytes_per_million = float(size) / (count / 1e6)
    return figures


@contextmanager
def kept_or_dropped(args: argparse.Namespace) -> Iterator[str]:
    """A fresh database, dropped at the end unless ``--keep``."""
    if not args.keep:
        with postgres_database(args.pg_admin_url) as url:
            yield url
        return
    name = f"bw_scale_{secrets.token_hex(4)}"
    with psycopg.connect(args.pg_admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{args.pg_admin_url.rsplit('/', 1)[0]}/{name}".replace(
        "postgresql://", "postgresql+psycopg://", 1
    )


# --- report ---------------------------------------------------------------------------------


def report(all_figures: list[Figures]) -> None:
    """The table: each layout's figure, the ratio of the first to the second, the target."""
    rows: list[tuple[str, list[float], str, bool]] = [
        ("ingest, results/s", [f.ingest_rate for f in all_figures], f">= {TARGET_INGEST:,}", True)
    ]
    for name in all_figures[0].latencies:
        target = TARGET_SERIES_MS if name.startswith("series points") else TARGET_PAGE_MS
        values = [percentile(f.latencies.get(name, [0.0]), 95) for f in all_figures]
        rows.append((f"{name} p95 ms", values, f"<= {target:.0f}", False))
    rows.append(
        (
            "disk MiB per million results",
            [f.bytes_per_million / 2**20 for f in all_figures],
            "",
            False,
        )
    )
    rows.append(("bulk fill s", [f.fill_s for f in all_figures], "", False))
    header = f"{'measurement':<34}" + "".join(f"{f.layout:>14}" for f in all_figures)
    ratio = len(all_figures) == 2
    print()
    print(
        f"{all_figures[0].results:,} results"
        + "".join(f"; {f.layout}: {f.results:,}" for f in all_figures)
    )
    print(header + (f"{'ratio':>8}" if ratio else "") + "  target")
    for name, values, target, higher_better in rows:
        cells = "".join(f"{v:>14,.1f}" for v in values)
        cells += (
            f"{values[0] / values[1]:>8.2f}" if ratio and values[1] else (" " * 8 if ratio else "")
        )
        verdicts = ""
        if target:
            bound = float(target.split()[-1].replace(",", ""))
            met = [v >= bound if higher_better else v <= bound for v in values]
            verdicts = " ".join("ok" if m else "MISSED" for m in met)
        print(f"{name:<34}{cells}  {target} {verdicts}".rstrip())
    for f in all_figures:
        for note in f.notes:
            print(f"  [{f.layout}] {note}")


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--results", type=int, default=50_000_000, help="results in the year")
    parser.add_argument("--layouts", default="partitioned,plain", help="comma-separated")
    parser.add_argument("--ingest-runs", type=int, default=60, help="timed runs posted at size")
    parser.add_argument("--requests", type=int, default=60, help="timed requests per read")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument(
        "--broker-url",
        default="redis://127.0.0.1:6379/14",
        help="detection tasks queue here (emptied before and after; no worker reads them)",
    )
    parser.add_argument(
        "--pg-admin-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="a Postgres role that may CREATE and DROP DATABASE",
    )
    return parser.parse_args()


def main() -> int:
    """Measure each layout, then print them side by side."""
    args = parse_args()
    # nohup'd in the background, SIGINT is ignored: SIGTERM stops it, and the blocks that stop
    # the server and drop the databases still run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()]
    say(f"benchwatch scale bench: {args.results:,} results, {layouts}, {os.cpu_count()} CPUs")
    began = time.perf_counter()
    figures = []
    with tempfile.TemporaryDirectory(prefix="bw-scale-") as tmp:
        for layout in layouts:
            figures.append(measure(layout, args, Path(tmp)))
    report(figures)
    print(f"\nelapsed {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
