"""Anonymous reads of heavy runs cost what their answer is worth, not what the runs weigh.

Posts two runs of 100 results x 50,000 raw samples each (about 34 MB of JSON a run) to the app
in process (FastAPI's test client: middleware, routing, validation; no network), on a fresh
SQLite file, or on a fresh Postgres database with ``--postgres ADMIN_URL`` (dropped at the
end), with an ingest token. Then, anonymously, each read a public server answers:

- ``GET /api/v1/compare`` (the two runs), its first page and its default;
- the compare page (``/compare?kind=runs``) and its CSV;
- the run page (``/runs/{id}``) and ``GET /api/v1/runs/{id}``;
- ``GET /api/v1/series/{id}/points`` (without and with samples) and ``/series?days=all``;
- ``GET /api/v1/alert-groups?limit=500``, with ``GROUPS`` groups of a step on every series
  (each of a small run of its own).

Each read is sent once to warm up, once timed, and once under ``tracemalloc``: the peak of
Python memory allocated while it is served (the app's and the database driver's Python
objects; the figure the request adds to the process). Prints one line per read: status,
milliseconds, peak MiB and the answer's size, beside the bound (``BOUND_MS``, ``BOUND_MIB``);
exits 1 when a read is over it.

    .venv/bin/python bench/reads.py [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
"""

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The reads come from one address, many times: the anonymous rate limit would answer 429.
os.environ.setdefault("BENCHWATCH_ANON_RATE_LIMIT", "0")

from app.core.config import Settings
from app.core.migrate import upgrade_database
from app.main import create_app
from bench.hostile import PEPPER, ingest_token
from bench.ingest import postgres_database

RESULTS = 100
SAMPLES = 50_000
MACHINE = "reads-h100"
BOUND_MS = 1_000.0  # per read, on the 2-core VM this was measured on
BOUND_MIB = 32.0  # peak Python memory per read
GROUPS = 20


@dataclass(frozen=True)
class Read:
    """One anonymous request."""

    name: str
    path: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Measured:
    """What one read cost."""

    status: int
    ms: float
    peak_mib: float
    answer_bytes: int


def run_body(key: str, started_at: datetime, rng: random.Random, count: int = SAMPLES) -> bytes:
    """A native run of ``RESULTS`` latency results of ``count`` samples each, as JSON."""
    results = []
    for i in range(RESULTS):
        level = 1.0 + i % 17
        samples = [round(level * (1 + rng.uniform(-0.02, 0.02)), 3) for _ in range(count)]
        results.append(
            {
                "suite": "torchbench",
                "model": f"model_{i}",
                "mode": "inference",
                "precision": "fp32",
                "config": "default",
                "metric": "latency",
                "samples": samples,
                "extra": {"note": "x" * 1_000},
            }
        )
    run = {
        "key": key,
        "machine": {"name": MACHINE, "device": "cuda", "arch": "NVIDIA H100 80GB HBM3"},
        "environment": {"channel": "nightly", "torch": "2.6.0"},
        "started_at": started_at.isoformat(),
        "results": results,
    }
    return json.dumps(run).encode()


def reads(base: int, new: int, series_id: int) -> list[Read]:
    """Every read measured, on the two runs and one of their series."""
    runs = {"base_run_id": base, "new_run_id": new}
    page = {"kind": "runs", "machine": MACHINE, "base_run": base, "new_run": new}
    series = {"machine": MACHINE, "model": "model_0", "metric": "latency", "days": "all"}
    return [
        Read("compare API", "/api/v1/compare", runs),
        Read("compare API, 20 rows", "/api/v1/compare", runs | {"limit": 20}),
        Read("compare page", "/compare", page),
        Read("compare page CSV", "/compare", page | {"format": "csv"}),
        Read("run page", f"/runs/{new}", {}),
        Read("run API", f"/api/v1/runs/{new}", {}),
        Read("run API, samples=false", f"/api/v1/runs/{new}", {"samples": "false"}),
        Read("series points API", f"/api/v1/series/{series_id}/points", {}),
        Read(
            "series points API, samples",
            f"/api/v1/series/{series_id}/points",
            {"include_samples": "true"},
        ),
        Read("series page, days=all", "/series", series),
        Read("alert groups, limit=500", "/api/v1/alert-groups", {"limit": 500}),
    ]


def measure(client: TestClient, read: Read) -> Measured:
    """Warm once, time once, trace once."""
    client.get(read.path, params=read.params)
    began = time.perf_counter()
    response = client.get(read.path, params=read.params)
    ms = (time.perf_counter() - began) * 1000
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        client.get(read.path, params=read.params)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return Measured(response.status_code, ms, (peak - before) / 2**20, len(response.content))


def alert_groups(database: Any, base: int, bad_runs: list[int]) -> None:
    """An alert group per run of ``bad_runs``, of a step on every series (one step a series
    and first bad run: the groups need runs of their own)."""
    from sqlalchemy import select

    from app.anomalies.models import AlertGroup, Regression
    from app.benchmarks.models import Series
    from app.runs.models import Run

    with database.session_scope() as session:
        series = session.scalars(select(Series.id)).all()
        for run_id in bad_runs:
            bad = session.get(Run, run_id)
            assert bad is not None
            group = AlertGroup(
                machine_id=bad.machine_id,
                channel=bad.channel,
                first_bad_run_id=run_id,
                last_good_run_id=base,
            )
            session.add(group)
            session.flush()
            session.add_all(
                Regression(
                    series_id=series_id,
                    group_id=group.id,
                    last_good_run_id=base,
                    first_bad_run_id=run_id,
                    direction="regression",
                    before=1.0,
                    after=1.2,
                    before_spread=0.01,
                    after_spread=0.01,
                    rel_change=0.2,
                    p_value=0.001,
                    detector={"name": "change_point"},
                )
                for series_id in series
            )


def small_run(key: str, started_at: datetime) -> dict[str, Any]:
    """A run of the same ``RESULTS`` cases, one value each: a first bad run for a group."""
    run = json.loads(run_body(key, started_at, random.Random(0), count=1))
    return dict(run)


@contextmanager
def scratch_database(postgres_admin: str | None) -> Iterator[str]:
    """A fresh database: a SQLite file, or a Postgres database dropped at the end."""
    if postgres_admin:
        with postgres_database(postgres_admin) as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as folder:
        yield f"sqlite:///{Path(folder) / 'reads.db'}"


def bench(url: str) -> int:
    """Post the two runs, measure every read, print the table; the number over the bound."""
    upgrade_database(url)
    settings = Settings(DATABASE_URL=url, TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    headers = {"Authorization": f"Bearer {ingest_token(url)}", "Content-Type": "application/json"}
    application = create_app(settings)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request otherwise
    rng = random.Random(26)
    now = datetime.now(UTC).replace(microsecond=0)
    over = 0
    with TestClient(application, raise_server_exceptions=False) as client:
        ids = []
        for index in range(2):
            body = run_body(f"reads-{index}", now - timedelta(hours=24 - 12 * index), rng)
            began = time.perf_counter()
            posted = client.post("/api/v1/runs", content=body, headers=headers)
            posted.raise_for_status()
            ids.append(posted.json()["id"])
            seconds = time.perf_counter() - began
            print(f"posted run {ids[-1]}: {len(body) / 2**20:.1f} MiB in {seconds:.1f} s")
        bad = []
        for index in range(GROUPS):
            at = now - timedelta(minutes=GROUPS - index)
            small = client.post(
                "/api/v1/runs", json=small_run(f"small-{index}", at), headers=headers
            )
            bad.append(small.raise_for_status().json()["id"])
        alert_groups(application.state.database, ids[0], bad)
        found = client.get("/api/v1/series", params={"model": "model_0", "machine": MACHINE})
        series_id = found.json()["items"][0]["id"]
        print(f"\n{'read (anonymous)':<30}{'status':>7}{'ms':>8}{'peak MiB':>10}{'answer KiB':>12}")
        for read in reads(ids[0], ids[1], series_id):
            got = measure(client, read)
            bad = got.status >= 400 or got.ms > BOUND_MS or got.peak_mib > BOUND_MIB
            over += bad
            print(
                f"{read.name:<30}{got.status:>7}{got.ms:>8.0f}{got.peak_mib:>10.1f}"
                f"{got.answer_bytes / 1024:>12.1f}{'  <-- over' if bad else ''}"
            )
    application.state.database.dispose()
    print(f"\nbound per read: {BOUND_MS:.0f} ms and {BOUND_MIB:.0f} MiB; {over} over it")
    return over


def main() -> int:
    """Bench on a scratch database; exit 1 when a read is over the bound."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--postgres", help="a Postgres admin URL: bench on a scratch database")
    args = parser.parse_args()
    with scratch_database(args.postgres) as url:
        return 1 if bench(url) else 0


if __name__ == "__main__":
    sys.exit(main())
