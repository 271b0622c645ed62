"""Verdicts of a branch's run against the default branch at its fork point."""

import threading
import time
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.anomalies.detectors import DetectorConfig
from app.verdicts import cache
from app.verdicts.judge import judge
from tests.anomalies.test_service import history_rows, post_history
from tests.factories import nightly, result, run_payload

STEADY = list(10.0 * (1 + 0.005 * np.random.default_rng(1).standard_normal(20)))


def test_within_the_noise_is_a_pass() -> None:
    assert judge(10.03, STEADY, higher_is_better=False).verdict == "pass"


def test_twenty_percent_slower_is_a_regression_and_faster_an_improvement() -> None:
    slower = judge(12.0, STEADY, higher_is_better=False)
    assert slower.verdict == "regression"
    assert slower.rel_change == pytest.approx(0.2, abs=0.01)
    assert slower.z is not None
    assert slower.z > 6
    assert "z = " in slower.reason
    assert judge(12.0, STEADY, higher_is_better=True).verdict == "improvement"
    assert judge(12.0, STEADY, higher_is_better=None).verdict == "pass"  # no better way


def test_a_change_must_clear_both_the_noise_and_the_minimum_effect() -> None:
    noisy = list(10.0 * (1 + 0.05 * np.random.default_rng(2).standard_normal(20)))
    assert judge(11.0, noisy, higher_is_better=False).verdict == "pass"  # 10% at 5% noise
    quiet = list(10.0 * (1 + 0.0002 * np.random.default_rng(3).standard_normal(20)))
    # 30 sigmas, but under a timing's 0.5% floor
    assert judge(10.03, quiet, higher_is_better=False).verdict == "pass"
    assert judge(10.03, quiet, False, DetectorConfig(min_rel_floor=0.001)).verdict == "regression"


def test_a_noiseless_metric_has_an_expected_value_and_a_margin() -> None:
    memory = DetectorConfig(min_rel_floor=0.002)  # the memory kind's floor
    assert judge(8.01, [8.0] * 10, False, memory).verdict == "pass"  # +0.125%
    over = judge(8.02, [8.0] * 10, False, memory)
    assert over.verdict == "regression"
    assert "expected exactly" in over.reason


def test_samples_that_overlap_hold_a_verdict_back() -> None:
    baseline = [9.9, 10.0, 10.1] * 5
    apart = judge(12.0, STEADY, False, DetectorConfig(), [11.9, 12.0, 12.1], baseline)
    assert apart.verdict == "regression"
    assert apart.p_value is not None
    overlapping = judge(12.0, STEADY, False, DetectorConfig(), [9.0, 10.0, 15.0], baseline)
    assert overlapping.verdict == "pass"
    too_few = judge(12.0, STEADY, False, DetectorConfig(), [9.0, 10.0, 15.0], baseline[:3])
    assert too_few.verdict == "regression"  # 3 against 3 samples: the test has no say


def test_from_an_expected_zero_any_value_counts() -> None:
    assert judge(0.0, [0.0] * 10, higher_is_better=False).verdict == "pass"
    appeared = judge(2.0, [0.0] * 10, higher_is_better=False)
    assert (appeared.verdict, appeared.reason) == ("regression", "2 where the baseline is 0")
    assert judge(2.0, [0.0] * 10, higher_is_better=True).verdict == "improvement"
    assert judge(-2.0, [0.0] * 10, higher_is_better=True).verdict == "regression"


def test_a_zero_base_has_no_relative_change_as_in_a_comparison() -> None:
    """comparison.relative_change's rule: 0 -> 0 is unchanged, with no relative change."""
    assert judge(0.0, [0.0] * 10, higher_is_better=False).rel_change is None
    assert judge(2.0, [0.0] * 10, higher_is_better=False).rel_change is None
    assert judge(2.0, [0.0, 1.0, 0.0, -1.0, 0.0], False).verdict == "no_baseline"


def test_too_few_points_or_no_value() -> None:
    assert judge(10.0, [10.0, 10.1], False).verdict == "no_baseline"
    assert judge(None, STEADY, False).verdict == "error"


def pr_run(index: int, **fields: Any) -> dict[str, Any]:
    """A pull request's run: bert eager 20% slower, the rest as on main."""

    def bert_eager_slower(model: str, config: str, _: int) -> dict[str, float]:
        return {"latency": 12.0} if (model, config) == ("bert", "eager") else {}

    rows = history_rows(index, np.random.default_rng(99), bert_eager_slower)
    payload = nightly(index, rows)
    payload.update(key=f"pr-{index}", branch="feature-x", commit="feedface", **fields)
    return payload


def test_a_pull_request_twenty_percent_slower_on_one_model(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    main = post_history(client, ingest_headers, runs=range(30))
    response = client.post("/api/v1/runs", json=pr_run(30), headers=ingest_headers)
    assert response.status_code == 201, response.text
    run = response.json()
    verdicts = client.get(f"/api/v1/runs/{run['id']}/verdicts").json()
    assert verdicts["is_branch"] is True
    assert verdicts["baseline"] == {"how": "nearest-earlier", "commit": "", "run_ids": [main[-1]]}
    (regression,) = [i for i in verdicts["items"] if i["verdict"] == "regression"]
    assert (regression["model"], regression["config"], regression["metric"]) == (
        "bert",
        "eager",
        "latency",
    )
    assert regression["rel_change"] == pytest.approx(0.2, abs=0.02)
    assert verdicts["items"][0] == regression  # worst first
    main_series = client.get(f"/api/v1/series/{regression['default_branch_series_id']}").json()
    assert main_series["channel"] == "nightly"
    assert regression["series_id"] != regression["default_branch_series_id"]
    assert verdicts["counts"]["regression"] == 1
    assert verdicts["counts"]["pass"] == len(verdicts["items"]) - 1


def test_the_fork_point_is_the_merge_base_when_it_has_a_run(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    ids = []
    for index in range(12):
        payload = run_payload(
            f"main-{index}", [result(value=4.0 + 0.001 * index)], index=index, commit=f"c{index}"
        )
        ids.append(client.post("/api/v1/runs", json=payload, headers=ingest_headers).json()["id"])
    pr = run_payload("pr", [result(value=4.0)], index=20, branch="x", base_commit="c8")
    run_id = client.post("/api/v1/runs", json=pr, headers=ingest_headers).json()["id"]
    verdicts = client.get(f"/api/v1/runs/{run_id}/verdicts").json()
    assert verdicts["baseline"] == {"how": "merge-base", "commit": "c8", "run_ids": [ids[8]]}
    (item,) = verdicts["items"]
    assert item["base"] == pytest.approx(4.0045, abs=0.0006)  # the points up to c8's run

    alone = run_payload("new-model", [result(model="brand_new", value=1.0)], index=21, branch="x")
    run_id = client.post("/api/v1/runs", json=alone, headers=ingest_headers).json()["id"]
    (item,) = client.get(f"/api/v1/runs/{run_id}/verdicts").json()["items"]
    assert item["verdict"] == "no_baseline"


def test_verdicts_of_a_missing_run(client: TestClient) -> None:
    assert client.get("/api/v1/runs/999999/verdicts").status_code == 404


@pytest.mark.both_dialects
def test_verdicts_are_kept_for_the_run_as_it_stands_and_computed_a_few_at_a_time(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for index in range(12):
        payload = run_payload(f"main-{index}", [result(value=4.0)], index=index, commit=f"c{index}")
        client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    shard = {"name": "a", "expected": 2}
    pr = run_payload("pr", [result(value=4.0)], index=20, branch="x", shard=shard)
    run_id = client.post("/api/v1/runs", json=pr, headers=ingest_headers).json()["id"]
    url = f"/api/v1/runs/{run_id}/verdicts"
    statements: list[str] = []

    def count(*args: Any) -> None:
        # The requests' own statements: the detection the uploads queued runs meanwhile on
        # the in-process jobs' threads, on the same engine (a clean-clone run counted it).
        if not threading.current_thread().name.startswith(("benchwatch-job", "sweep-")):
            statements.append(str(args[2]))

    engine = client.app.state.database.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", count)
    try:
        first = client.get(url).json()
        computing = len(statements)
        assert client.get(url).json() == first
        again = len(statements) - computing
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert again < computing  # the second read did not judge the run again
    # A further shard changes the run: judged again, its new result included.
    more = run_payload("pr", [result(model="other", value=2.0)], index=20, branch="x")
    more["shard"] = {"name": "b", "expected": 2}
    added = client.post("/api/v1/runs", json=more, headers=ingest_headers)
    assert added.status_code in (200, 201), added.text
    assert len(client.get(url).json()["items"]) == 2
    # Every turn taken: a request is refused at once, before it opens a database connection
    # (before: it waited 10 s for a turn, having read the run, connection held).
    other = client.post("/api/v1/runs", json=pr_run(40), headers=ingest_headers).json()["id"]
    checkouts: list[object] = []

    def checkout(*args: Any) -> None:
        # The request's own checkouts: the in-process jobs the uploads queued (detection,
        # notices) and the sweepers use the same engine on their own threads meanwhile.
        if not threading.current_thread().name.startswith(("benchwatch-job", "sweep-")):
            checkouts.append(args)

    taken = [cache._turns.acquire(timeout=1) for _ in range(cache.AT_ONCE)]
    assert all(taken)
    event.listen(engine, "checkout", checkout)
    try:
        for path in (f"/api/v1/runs/{other}/verdicts", f"/runs/{other}/verdicts"):
            started = time.monotonic()
            busy = client.get(path)
            assert time.monotonic() - started < 5  # at once (the old wait was 10 s)
            assert busy.status_code == 503, busy.text
            assert busy.headers["Retry-After"] == str(cache.RETRY_AFTER_S)
            if path.startswith("/api/"):
                assert busy.json()["error"] == "Busy"
                assert checkouts == []  # the API read nothing (the page reads its nav after)
    finally:
        event.remove(engine, "checkout", checkout)
        for _ in taken:
            cache._turns.release()
