"""Pools (issue 17, point 5): several nodes serving one machine share a suite run; each result
records its node; a node whose timings drift from the rest of its pool is flagged (the rule,
the run's API answer and its page)."""

import math
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from app.suite_runs import pools, service
from app.suite_runs.pools import Measured, judge
from tests.factories import result, run_payload
from tests.suite_runs.test_service import DESCRIPTION, ident, measured
from workers import cli
from workers.tasks.suite import node_name

NODES = ("node-a", "node-b", "node-c")
SERIES = 12


def pool_run(
    slow: dict[str, float], *, series: int = SERIES, noise: float = 0.01, seed: int = 0
) -> tuple[list[Measured], dict[int, float]]:
    """Each node measures ``series`` series (history: 1 ms to ``series`` ms), off by ``noise``
    at random and slower by its factor in ``slow``."""
    rng = random.Random(seed)
    history, found = {}, []
    for n, node in enumerate(sorted(slow)):
        for i in range(series):
            series_id = n * series + i
            history[series_id] = 1.0 + i
            value = history[series_id] * slow[node] * math.exp(rng.gauss(0, noise))
            found.append(Measured(series_id, node, value))
    return found, history


def by_node(verdicts: list[pools.NodeVerdict]) -> dict[str, pools.NodeVerdict]:
    return {v.node: v for v in verdicts}


def test_a_node_ten_percent_slower_on_every_series_is_flagged_and_only_it() -> None:
    verdicts = by_node(judge(*pool_run({"node-a": 1.0, "node-b": 1.0, "node-c": 1.1}), 0.05))
    assert [v.node for v in verdicts.values() if v.flagged] == ["node-c"]
    slow = verdicts["node-c"]
    assert slow.ratio == pytest.approx(1.1, abs=0.01)
    assert slow.series == SERIES
    assert slow.note.startswith("10.")
    assert "slower than the pool over 12 series" in slow.note
    assert verdicts["node-a"].ratio == pytest.approx(1.0, abs=0.01)


def test_a_change_of_the_build_moves_every_node_and_flags_none() -> None:
    # Every node 20 % slower than the series' history: a regression, not drift.
    verdicts = judge(*pool_run({"node-a": 1.2, "node-b": 1.2, "node-c": 1.2}), 0.05)
    assert not any(v.flagged for v in verdicts)
    assert all(v.moved == pytest.approx(1.2, abs=0.02) for v in verdicts)


def test_noise_is_not_drift() -> None:
    # 10 % scatter on few series: a node's median can be off by more than the threshold by
    # chance; its standard error says so.
    for seed in range(20):
        found, history = pool_run(dict.fromkeys(NODES, 1.0), series=6, noise=0.1, seed=seed)
        assert not any(v.flagged for v in judge(found, history, 0.05)), seed
    # The same slowdown as above, drowned in noise of 30 %: not flagged either.
    found, history = pool_run({"node-a": 1.0, "node-b": 1.0, "node-c": 1.1}, noise=0.3, seed=1)
    assert not by_node(judge(found, history, 0.05))["node-c"].flagged


def test_a_node_needs_enough_series_to_be_judged() -> None:
    found, history = pool_run({"node-a": 1.0, "node-b": 1.0, "node-c": 1.5}, series=5)
    verdicts = by_node(judge(found, history, 0.05))
    assert not any(v.flagged for v in verdicts.values())
    assert verdicts["node-c"].ratio is None
    assert verdicts["node-c"].note == "5 time-like series with a history; 6 needed"
    # Series without a history count for nothing.
    assert by_node(judge(found, {}, 0.05))["node-c"].series == 0


def test_in_a_pool_of_two_both_disagree_and_their_moves_say_which_changed() -> None:
    verdicts = by_node(judge(*pool_run({"node-a": 1.0, "node-c": 1.1}), 0.05))
    assert verdicts["node-a"].flagged
    assert verdicts["node-c"].flagged
    assert verdicts["node-a"].moved == pytest.approx(1.0, abs=0.01)
    assert verdicts["node-c"].moved == pytest.approx(1.1, abs=0.01)
    assert "a pool of two" in verdicts["node-c"].note


def test_a_workers_node_is_the_end_of_its_celery_name() -> None:
    assert node_name("h100-a@rack3-n7") == "rack3-n7"
    assert node_name("plainhost") == "plainhost"
    assert node_name(None)  # outside a worker: this host (or BENCHWATCH_NODE)


def test_a_stored_verdict_that_does_not_read_as_one_is_ignored() -> None:
    assert pools.read_pool({"pool": {"nodes": "many"}}) is None
    assert pools.read_pool({"pool": 3}) is None
    assert pools.read_pool(None) is None


@pytest.mark.parametrize("node", ["a@b", "", "x" * 65, "with space"])
def test_the_worker_refuses_a_node_name_that_would_break_its_celery_name(
    node: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["worker", "--machine", "m", "--node", node])
    assert exited.value.code == 2
    assert "1 to 64 letters, digits or _ . - characters" in capsys.readouterr().err


def suite_run(database: Database, key: str, slow: dict[str, float], rotate: int) -> int:
    """A suite run of three shards of six cases, each shard run by one node: its run's id."""
    models = [f"op{i}" for i in range(18)]
    plans = [
        service.ShardPlan(f"part {s}", [ident(m) for m in models[s * 6 : s * 6 + 6]])
        for s in range(3)
    ]
    with database.session_scope() as session:
        opened = service.open_suite_run(
            session,
            key=key,
            machine="pool-box",
            tier="test",
            trigger="manual",
            description=DESCRIPTION,
            shards=plans,
        )
        shards = [(shard.id, shard.cases) for shard in opened.shards]
        suite_run_id = opened.id
    for position, (shard_id, cases) in enumerate(shards):
        node = NODES[(position + rotate) % 3]
        rows = [
            row for case in cases for row in measured(case["model"], float(case["model"][2:]) + 1.0)
        ]
        for row in rows:
            if row["metric"] == "latency":
                row["value"] = row["value"] * slow.get(node, 1.0)
                row["samples"] = [row["value"]]
                row["extra"] = {"top": "kept"}
        with database.session_scope() as session:
            lease = service.claim_shard(session, shard_id, node, 30).lease
            assert service.finish_shard(session, shard_id, lease, rows, "")
    with database.session_scope() as session:
        run = service.finalize(session, suite_run_id, drift_threshold=0.05)
        assert run is not None
        return run.id


def test_a_pooled_run_records_its_nodes_and_shows_the_drifted_one(
    database: Database, client: TestClient
) -> None:
    first = suite_run(database, "pool-1", {}, rotate=0)
    # The next run: the shards land on other nodes, and node-c has slowed down by 10 %.
    second = suite_run(database, "pool-2", {"node-c": 1.1}, rotate=1)

    answer: dict[str, Any] = client.get(f"/api/v1/runs/{second}").json()
    latency = [r for r in answer["results"] if r["metric"] == "latency"]
    assert {r["extra"]["node"] for r in answer["results"]} == set(NODES)
    assert all(r["extra"]["top"] == "kept" for r in latency)  # a row's own extra is kept
    pool = answer["extra"]["pool"]
    assert pool["flagged"] == ["node-c"]
    assert (pool["threshold"], pool["history_runs"]) == (0.05, 1)
    slow = {n["node"]: n for n in pool["nodes"]}["node-c"]
    assert (slow["series"], slow["flagged"]) == (6, True)
    assert slow["ratio"] == pytest.approx(1.1, abs=0.005)
    page = client.get(f"/runs/{second}").text
    assert 'id="pool-drift"' in page
    assert "Drifted from its pool: node-c." in page
    assert "+10.0 %" in page

    # The first run had no history: its nodes are listed, none judged.
    earlier = client.get(f"/api/v1/runs/{first}").json()["extra"]["pool"]
    assert earlier["flagged"] == []
    assert {n["ratio"] for n in earlier["nodes"]} == {None}
    page = client.get(f"/runs/{first}").text
    assert "Pool: 3 nodes" in page
    assert "pool-drift" not in page


def test_an_uploaded_runs_own_extra_pool_is_not_shown_as_a_verdict(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    verdict = {"threshold": 0.05, "history_runs": 1, "nodes": [], "flagged": ["node-x"]}
    payload = run_payload("up-1", [result()], extra={"pool": verdict})
    answer = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert answer.status_code == 201, answer.text
    page = client.get(f"/runs/{answer.json()['id']}").text
    assert "Drifted from its pool" not in page
    assert "Pool:" not in page
