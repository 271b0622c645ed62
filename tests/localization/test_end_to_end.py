"""The proof of issue 28's first points: a regression uploaded by CI is detected, localized by
itself on a real Celery worker and named down to its commit.

A local git repository of a tiny pure-Python package has 16 commits: ``c9`` makes ``op`` about
40% slower, ``c7`` does not build. Nightlies are measured for real (the pip provider installs
``c0``, then ``c15``, into scratch virtual environments; the command suite times ``op`` there)
and uploaded as CI runs of the suite ``tinybench``, which BENCHWATCH_LOCALIZE_SUITES maps to
that command suite. A ``benchwatch worker`` of the machine (Redis, Postgres) detects the step
and, with BENCHWATCH_LOCALIZE=confirmed, localizes it: the pre-flight reproduces it, the
component isolation names tinypkg (the one package that changed), and the commit bisection in
its clone names c9 within ceil(log2 15) + 2 = 6 builds, c7 probed and skipped. The probes never
become results: the series holds the nightlies' rows only."""

import math
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.anomalies.models import Regression
from app.core.command_suites import CommandSuite
from app.core.config import Settings
from app.core.db import Database
from app.core.providers import Component, EnvSpec
from app.localization.models import Localization
from app.main import create_app
from app.runs.models import Result, Run
from tests.conftest import PEPPER, make_token
from tests.factories import run_payload
from tests.localization import tinypkg
from tests.localization.tinypkg import MODEL, SUITE, Tiny
from tests.suite_runs.test_workers import benchwatch, environment, wait_for
from workers.localize import Measuring, Oracle
from workers.providers import Environments

MACHINE = "tiny-box"
GOOD, BAD = 12, 6  # nightlies at c0, then at c15
CASE = {
    "suite": SUITE,
    "model": MODEL,
    "category": "",
    "mode": "inference",
    "precision": "fp32",
    "config": "eager",
    "batch_size": None,
    "params": {},
    "metric": "latency",
    "unit": "ms",
}


def measured_nightlies(tiny: Tiny, cache: Path) -> list[list[float]]:
    """Each nightly's samples, measured as the worker measures: c0's, then c15's."""
    suite = CommandSuite.model_validate(tiny.command_suite())
    environments = Environments(root=cache, budget_bytes=2**30)
    oracle = Oracle(Measuring(environments, "pip", suite, MACHINE, "cpu", 120, 2**24, 30), CASE)

    def at(index: int) -> EnvSpec:
        commit = Component(commit=tiny.commits[index], source=str(tiny.repo))
        return EnvSpec(components={"tinypkg": commit})

    measure = oracle.strategy(at)
    nightlies = []
    for index in [0] * GOOD + [tinypkg.COMMITS - 1] * BAD:
        samples = measure(index, 10)
        assert isinstance(samples, list), samples
        nightlies.append(samples)
    return nightlies


def upload(
    client: TestClient, database: Database, tiny: Tiny, nightlies: list[list[float]]
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}  # CI's token
    for index, samples in enumerate(nightlies):
        commit = 0 if index < GOOD else tinypkg.COMMITS - 1
        row = {
            **{k: v for k, v in CASE.items() if k not in ("category", "batch_size")},
            "value": statistics.median(samples),
            "samples": samples,
        }
        payload = run_payload(f"nightly-{index}", [row], machine=MACHINE, device="cpu", index=index)
        payload["environment"] = {
            "channel": "nightly",
            "packages": {"tinypkg": tiny.version(commit)},
        }
        answer = client.post("/api/v1/runs", json=payload, headers=headers)
        assert answer.status_code == 201, answer.text


def settled(database: Database) -> bool:
    """Every nightly detected, and no localization left to run."""
    with database.session_scope() as session:
        undetected = select(func.count()).where(Run.detected_at.is_(None))
        unfinished = select(func.count()).where(Localization.state.in_(("queued", "running")))
        runs = session.scalar(select(func.count()).select_from(Run))
        return (
            runs == GOOD + BAD and not session.scalar(undetected) and not session.scalar(unfinished)
        )


def localized(database: Database) -> dict[str, Any] | None:
    """The finished localization of the step at the first bad nightly, once there is one."""
    with database.session_scope() as session:
        first_bad = select(Run.id).where(Run.key == f"nightly-{GOOD}").scalar_subquery()
        done = session.scalars(
            select(Localization).where(
                Localization.bad_run_id == first_bad,
                Localization.state.not_in(("queued", "running")),
            )
        ).first()
        return {"id": done.id, "suite_run_id": done.suite_run_id} if done else None


@pytest.mark.slow
def test_a_ci_regression_is_localized_to_its_commit_by_a_real_worker(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    database, began = postgres_database, time.monotonic()
    tiny = tinypkg.make(tmp_path)
    cache = tmp_path / "envs"
    settings = tiny.settings_json() | {
        "BENCHWATCH_LOCALIZE": "confirmed",
        "BENCHWATCH_ENV_CACHE": str(cache),
    }
    log = tmp_path / "worker.log"
    worker = ["worker", "--machine", MACHINE, "--queues", "default,notify"]
    with benchwatch(worker, environment(database, redis_url, **settings), log):
        nightlies = measured_nightlies(tiny, cache)  # while the worker starts
        server = Settings(
            DATABASE_URL=database.url,
            TOKEN_PEPPER=PEPPER,
            BROKER_URL=redis_url,
            COMMAND_SUITES={tinypkg.COMMAND: tiny.command_suite()},
            LOCALIZE_SUITES={SUITE: tinypkg.COMMAND},
        )
        application = create_app(server)
        with TestClient(application) as client:
            upload(client, database, tiny, nightlies)
            wait_for("the localization", lambda: settled(database), 300, log)
            steps = client.get("/api/v1/regressions").json()["items"]
            medians = [round(statistics.median(n), 3) for n in nightlies]
            found = localized(database)
            assert found is not None, (medians, steps)
            detail = client.get(f"/api/v1/localizations/{found['id']}").json()
            suite_run = client.get(f"/api/v1/suite-runs/{found['suite_run_id']}").json()
        application.state.database.dispose()
    took = time.monotonic() - began

    assert detail["state"] == "culprit_found", (detail["reason"], detail["answer"])
    culprit = detail["answer"]["culprit"]
    assert (culprit["kind"], culprit["component"]) == ("commit", "tinypkg")
    assert culprit["commit"] == tiny.commits[tinypkg.SLOW], detail["probes"]
    assert culprit["title"] == f"Do more work in op (revision {tinypkg.SLOW})"
    assert detail["started_by"] == "auto"
    assert detail["worker"]
    with database.session_scope() as session:
        regression = session.get_one(Regression, detail["regression_id"])
        first_bad = session.get_one(Run, regression.first_bad_run_id)
        assert first_bad.key == f"nightly-{GOOD}"  # the detected step, the one localized
        assert regression.state == "confirmed"
        # Probes are never results: the series holds the 18 nightlies, nothing more.
        held = select(func.count()).where(Result.series_id == regression.series_id)
        assert session.scalar(held) == GOOD + BAD
        assert session.scalar(select(func.count()).select_from(Run)) == GOOD + BAD
    # Within ceil(log2 n) + 2 builds, the commit that does not build probed and skipped.
    n = detail["answer"]["commits"]
    assert n == tinypkg.COMMITS - 1
    assert detail["builds"] <= math.ceil(math.log2(n)) + 2, detail["probes"]
    (broken,) = [p for p in detail["probes"] if p["outcome"] == "build_failed"]
    assert broken["label"].startswith(tiny.commits[tinypkg.BROKEN][:12])
    built = [p for p in cache.iterdir() if p.is_symlink()]  # the cache's entries: each a build
    assert len(built) == detail["builds"]
    assert (suite_run["trigger"], suite_run["status"], suite_run["run_id"]) == (
        "localize",
        "finished",
        None,
    )
    print(  # noqa: T201 (the figures the report quotes)
        f"\nend to end {took:.0f} s; builds {detail['builds']}, probes {detail['probe_count']}, "
        f"repeats {detail['repeats']}, samples {detail['samples']}; "
        f"pre-flight {detail['answer']['preflight']['reason']}; "
        f"nightlies {medians}; "
        f"steps {[(s['first_bad_run_id'], s['rel_change']) for s in steps]}"
    )
