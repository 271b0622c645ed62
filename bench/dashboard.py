"""Dashboard pages on the demo history: server-side time (p50/p95) and chart data per page.

Loads ``benchwatch demo`` (90 days, 1,080 runs, about 1.4 million results) into a fresh
Postgres database, or reuses one given with ``--database-url``, then requests every page
``--repeats`` times in process (FastAPI's test client: routing, queries, figures, templates;
no network) and prints p50 / p95 against the 500 ms target, the HTML size and the size of the
chart data embedded in it against the 1 MB target. The JSON summary endpoint is timed in the
same process as a baseline.

    .venv/bin/python bench/dashboard.py [--database-url URL] [--repeats 20]
"""

import argparse
import re
import secrets
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import demo
from app.anomalies.models import AlertGroup, Regression
from app.core.config import Settings
from app.core.db import Database
from app.core.migrate import upgrade_database
from app.main import create_app
from app.runs.models import Result, Run

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
TARGET_MS = 500.0
TARGET_CHART_BYTES = 1_000_000
CHART_DATA = re.compile(r'<script type="application/json" id="[^"]+">(.*?)</script>', re.S)


def fresh_database() -> str:
    """A new Postgres database with the demo history loaded."""
    name = f"benchwatch_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    upgrade_database(url)
    began = time.perf_counter()
    demo.load(Database(url))
    print(f"demo loaded into {name} in {time.perf_counter() - began:.0f} s")
    return url


def pages(database: Database) -> dict[str, str]:
    """The pages to time, with ids taken from the data."""
    with database.session_scope() as session:
        latest = session.scalar(select(func.max(Run.id)))
        biggest = session.scalar(
            select(AlertGroup.id)
            .join(Regression)
            .group_by(AlertGroup.id)
            .order_by(func.count(Regression.id).desc())
            .limit(1)
        )
        results = session.scalar(select(func.count()).select_from(Result))
    print(f"{results:,} results in the database")
    return {
        "overview": "/?machine=demo-h100&channel=nightly",
        "series by config": "/series?machine=demo-h100&channel=nightly&model=gpt&metric=latency",
        "series by channel, all": "/series?machine=demo-h100&model=bert&by=channel&days=all",
        "compare configs": "/compare?kind=configs&machine=demo-h100",
        "compare runs": "/compare?kind=runs&machine=demo-h100",
        "compare machines": "/compare?kind=machines&machine=demo-h100&new_machine=demo-mi300x",
        "compare channels": "/compare?kind=channels&machine=demo-h100",
        "alerts": "/alerts",
        "alert group (largest)": f"/alerts?group={biggest}",
        "run": f"/runs/{latest}",
        "baseline: JSON summary": "/api/v1/summary?machine=demo-h100&channel=nightly",
    }


def main() -> None:
    """Time every page and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    url = args.database_url or fresh_database()
    application = create_app(Settings(DATABASE_URL=url, TOKEN_PEPPER=secrets.token_hex(16)))
    with TestClient(application) as client:
        print(f"\n{'page':<26}{'p50 ms':>8}{'p95 ms':>8}{'HTML KB':>9}{'chart KB':>10}  target")
        for name, path in pages(application.state.database).items():
            timings, body = [], ""
            for _ in range(args.repeats + 1):  # the first request warms caches: not counted
                began = time.perf_counter()
                response = client.get(path)
                timings.append((time.perf_counter() - began) * 1000)
                assert response.status_code == 200, (path, response.status_code)
                body = response.text
            timings = timings[1:]
            p95 = statistics.quantiles(timings, n=20)[-1]
            chart = sum(len(m.encode()) for m in CHART_DATA.findall(body))
            verdict = "met" if p95 <= TARGET_MS and chart <= TARGET_CHART_BYTES else "MISSED"
            print(
                f"{name:<26}{statistics.median(timings):>8.0f}{p95:>8.0f}"
                f"{len(body.encode()) / 1024:>9.0f}{chart / 1024:>10.0f}  {verdict}"
            )
    application.state.database.dispose()


if __name__ == "__main__":
    main()
