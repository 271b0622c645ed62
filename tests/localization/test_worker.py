"""The localization task on the machine's worker (issue 28 points 1, 2, 5), run here eagerly on
both databases: the pip provider builds commits of a local clone, the command suite measures
the case in each, the pre-flight and the component isolation come first, then the commit
bisection names the slow commit, skipping the one that does not build. A range whose ends
measure the same is not reproduced. Probes never enter the history."""

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.command_suites import CommandSuite
from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.runs.models import Result, Run
from tests.conftest import PEPPER, make_token
from tests.factories import result, run_payload
from tests.localization import tinypkg
from tests.localization.tinypkg import COMMAND, MODEL, SUITE, Tiny
from tests.posting import post_detected
from workers.tasks import localize as task

MACHINE = "tiny-box"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    return tinypkg.make(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: a spec built for one database is reused for the other."""
    return tmp_path_factory.mktemp("envs")


@pytest.fixture
def worker(
    database: Database, tiny: Tiny, env_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> Database:
    """The task runs here, on the test database, with a worker's settings for the clone."""
    monkeypatch.setattr(task, "worker_database", lambda: database)
    suite = CommandSuite.model_validate(tiny.command_suite())
    monkeypatch.setattr(task.settings, "COMMAND_SUITES", {COMMAND: suite})
    monkeypatch.setattr(task.settings, "LOCALIZE_SOURCES", {"tinypkg": str(tiny.repo)})
    monkeypatch.setattr(task.settings, "ENV_CACHE", str(env_cache))
    return database


@pytest.fixture
def client(database: Database, tiny: Tiny) -> Iterator[TestClient]:
    """The server, mapping the uploaded suite to the command suite that measures it."""
    config = Settings(
        DATABASE_URL=database.url,
        TOKEN_PEPPER=PEPPER,
        BROKER_URL=None,
        COMMAND_SUITES={COMMAND: tiny.command_suite()},
        LOCALIZE_SUITES={SUITE: COMMAND},
    )
    application = create_app(config)
    with TestClient(application) as test_client:
        yield test_client
    application.state.database.dispose()


def nightlies(client: TestClient, database: Database, tiny: Tiny, good: int, bad: int) -> int:
    """CI's nightlies of the case, 30% slower from the 13th on (commit ``good`` before,
    ``bad`` from then); the regression's id."""
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    noise = np.random.default_rng(28).standard_normal(18)
    for index, x in enumerate(noise):
        level = (1.0 if index < 12 else 1.3) * (1 + 0.01 * x)
        row = result(
            model=MODEL,
            suite=SUITE,
            precision="fp32",
            config="eager",
            unit="ms",
            value=level,
            samples=[level * (1 + 0.002 * (i % 5)) for i in range(10)],
        )
        version = tiny.version(good if index < 12 else bad)
        environment = {"channel": "nightly", "packages": {"tinypkg": version}}
        payload = run_payload(
            f"tiny-{index}", [row], machine=MACHINE, device="cpu", index=index
        ) | {"environment": environment}
        post_detected(client, headers, payload)
    (step,) = client.get("/api/v1/regressions").raise_for_status().json()["items"]
    found: int = step["id"]
    return found


def asked(client: TestClient, database: Database, regression_id: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {make_token(database, 'triage', name='on-call')}"}
    body = {"kind": "regression", "id": regression_id}
    made = client.post("/api/v1/localizations", json=body, headers=headers)
    assert made.status_code == 201, made.text
    found: dict[str, Any] = made.json()
    return found


def history(database: Database) -> tuple[int, int]:
    with database.session_scope() as session:
        runs = session.scalar(select(func.count()).select_from(Run)) or 0
        return runs, session.scalar(select(func.count()).select_from(Result)) or 0


def test_the_worker_bisects_to_the_slow_commit_and_skips_the_broken_one(
    client: TestClient, worker: Database, tiny: Tiny
) -> None:
    regression = nightlies(client, worker, tiny, 0, tinypkg.COMMITS - 1)
    made = asked(client, worker, regression)
    assert made["answer"]["environment_diff"] == {"tinypkg": [tiny.version(0), tiny.version(15)]}
    before = history(worker)
    outcome = task.localize.apply(kwargs={"localization_id": made["id"], "machine": MACHINE})
    assert outcome.get() == "culprit_found"
    found = client.get(f"/api/v1/localizations/{made['id']}").json()
    answer, culprit = found["answer"], found["answer"]["culprit"]
    assert found["state"] == "culprit_found"
    assert found["worker"]
    assert (culprit["kind"], culprit["component"]) == ("commit", "tinypkg")
    assert culprit["commit"] == tiny.commits[tinypkg.SLOW], found["probes"]
    assert culprit["title"] == f"Do more work in op (revision {tinypkg.SLOW})"
    assert culprit["author"] == "A Developer <dev@example.com>"
    assert (culprit["good_commit"], culprit["bad_commit"]) == (tiny.commits[0], tiny.commits[15])
    assert answer["strategy"] == "commit_bisection"
    assert [s["strategy"] for s in answer["strategies"]] == [
        "component_isolation",
        "commit_bisection",
    ]
    assert answer["preflight"]["reproduced"]
    assert answer["preflight"]["rel_change"] > 0.2
    # ceil(log2 15) + 2 builds: the references, and one probe a halving, the broken one too.
    n = answer["commits"]
    assert n == 15
    assert found["builds"] <= math.ceil(math.log2(n)) + 2, found["probes"]
    probes = {p["label"]: p for p in found["probes"]}
    references = [p for p in found["probes"] if p["outcome"] == "reference"]
    assert {p["label"] for p in references} == {"last good (reference)", "first bad (reference)"}
    broken = next(p for p in found["probes"] if p["outcome"] == "build_failed")
    assert broken["label"].startswith(tiny.commits[tinypkg.BROKEN][:12]), probes
    assert "this commit does not build" in broken["reason"]
    judged = [p for p in found["probes"] if p["outcome"] not in ("reference", "build_failed")]
    assert all(len(p["samples"]) >= 10 and p["p_good"] is not None for p in judged)
    assert found["probe_count"] == len(found["probes"]) - 2
    assert found["samples"] >= sum(len(p["samples"]) for p in found["probes"])
    suite_run = client.get(f"/api/v1/suite-runs/{made['suite_run_id']}").json()
    assert (suite_run["status"], suite_run["run_id"]) == ("finished", None)
    assert history(worker) == before  # the probes are no runs, no results
    again = task.localize.apply(kwargs={"localization_id": made["id"], "machine": MACHINE})
    assert again.get() == "finished"  # delivered again: nothing more


def test_a_step_the_worker_does_not_see_is_not_reproduced(
    client: TestClient, worker: Database, tiny: Tiny
) -> None:
    made = asked(client, worker, nightlies(client, worker, tiny, 0, 5))  # both before c9
    outcome = task.localize.apply(kwargs={"localization_id": made["id"], "machine": MACHINE})
    assert outcome.get() == "not_reproduced"
    found = client.get(f"/api/v1/localizations/{made['id']}").json()
    assert found["reason"].startswith("not reproduced: good ")
    assert found["answer"]["preflight"]["reproduced"] is False
    assert found["builds"] == 2
    assert [p["outcome"] for p in found["probes"]] == ["reference", "reference"]


def test_a_worker_without_the_command_suite_fails_it_saying_why(
    client: TestClient, worker: Database, tiny: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = asked(client, worker, nightlies(client, worker, tiny, 0, 15))
    monkeypatch.setattr(task.settings, "COMMAND_SUITES", {})
    outcome = task.localize.apply(kwargs={"localization_id": made["id"], "machine": MACHINE})
    assert outcome.get() == "failed"
    found = client.get(f"/api/v1/localizations/{made['id']}").json()
    assert "no command suite 'tiny' in this worker's BENCHWATCH_COMMAND_SUITES" in found["reason"]
    suite_run = client.get(f"/api/v1/suite-runs/{made['suite_run_id']}").json()
    assert suite_run["status"] == "failed"


def test_the_settings_refuse_an_unknown_provider_or_a_clone_that_is_no_path() -> None:
    with pytest.raises(ValueError, match="LOCALIZE_PROVIDER 'nix': one of pip"):
        Settings(LOCALIZE_PROVIDER="nix")
    with pytest.raises(ValueError, match="is not an absolute path"):
        Settings(LOCALIZE_SOURCES={"torch": "pytorch"})
    with pytest.raises(ValueError, match="component name 'to rch' is not valid"):
        Settings(LOCALIZE_SOURCES={"to rch": "/srv/pytorch"})
    made = Settings(
        PROVIDERS={"torch-src": {"command": ["/opt/build.sh"]}},
        LOCALIZE_PROVIDER="torch-src",
        LOCALIZE_SOURCES={"torch": "/srv/pytorch"},
    )
    assert (made.LOCALIZE_PROVIDER, made.LOCALIZE_SOURCES) == (
        "torch-src",
        {"torch": "/srv/pytorch"},
    )


def test_the_shard_sweep_sends_unfinished_localizations_again(
    client: TestClient, worker: Database, tiny: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.localization import lifecycle
    from workers.tasks import suite

    made = asked(client, worker, nightlies(client, worker, tiny, 0, 15))
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(task.localize, "apply_async", lambda **call: sent.append(call))
    monkeypatch.setattr(suite, "worker_database", lambda: worker)
    kwargs = {"localization_id": made["id"], "machine": MACHINE}
    assert suite.requeue_shards.apply(kwargs={"machine": "other-box"}).get() == 0
    assert suite.requeue_shards.apply(kwargs={"machine": MACHINE}).get() == 1  # a lost message
    assert sent == [{"kwargs": kwargs, "queue": f"bench.{MACHINE}", "countdown": 0}]
    with worker.session_scope() as session:
        lifecycle.start(session, made["id"], "node-a", 60)
    sent.clear()
    assert suite.requeue_shards.apply().get() == 1  # running: for when its lease lapses
    (call,) = sent
    assert 59 < call["countdown"] <= 61
