"""Shape changes through the API: recorded as findings of their own kind, grouped, told."""

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies.models import Regression
from app.core.db import Database
from app.notifications.matching import compile_subscription
from app.notifications.render import Renderer
from app.notifications.service import finding_of
from app.runs.models import Result
from tests.anomalies.test_service import BAD, post_history, regressions
from tests.dashboard.test_pages import figures
from tests.factories import case_rows, nightly
from tests.posting import drain


def bert_noisier(model: str, config: str, index: int) -> dict[str, float]:
    """bert eager's latency scatters four times as far from run BAD on, its level unmoved."""
    if model != "bert" or config != "eager":
        return {}
    sigma = 0.02 if index >= BAD else 0.005
    return {"latency": 10.0 * (1 + np.random.default_rng([7, index]).normal(0, sigma))}


def stored_again(session: Any) -> Regression:
    (regression,) = session.scalars(select(Regression))
    return regression


def test_a_series_that_gets_noisier_is_a_noise_finding(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    ids = post_history(client, ingest_headers, bert_noisier, runs=range(55))
    (found,) = regressions(client)
    assert found["direction"] == "noise"
    assert found["series"]["benchmark"]["model"] == "bert"
    assert found["series"]["metric"]["name"] == "latency"
    assert abs(ids.index(found["first_bad_run_id"]) - BAD) <= 5
    assert found["after_spread"] > 2 * found["before_spread"]
    assert found["detector"]["name"] == "shape"
    assert found["before"] == pytest.approx(10.0, rel=0.01)
    (group,) = client.get("/api/v1/alert-groups").json()["items"]
    assert group["counts"] == {"noise": 1}
    assert client.get("/api/v1/regressions", params={"direction": "noise"}).json()["total"] == 1

    with database.session_scope() as session:
        stored = session.get_one(Regression, found["id"])
        assert stored.is_shape
        assert stored.kind == "noise"
        told = finding_of(stored)
    assert (told.kind, told.direction) == ("noise", "regression")
    assert compile_subscription({"kind": "noise"}).matches(told)
    assert not compile_subscription({"kind": "regression"}).matches(told)
    with database.session_scope() as session:  # a receiver's payload says the same
        payload = Renderer(session, "https://bw.example").finding(stored_again(session), None)
    assert (payload["kind"], payload["direction"]) == ("noise", "regression")
    assert payload["rel_change"] == pytest.approx(found["rel_change"])

    page = client.get("/alerts")  # its chart: the series beside its distributions
    charts = figures(page.text)
    chart = charts[f"step-{found['id']}"]
    assert [t.get("type", "scatter") for t in chart["data"]][-2:] == ["histogram", "histogram"]
    assert f">noise x{found['rel_change'] + 1:.1f}</td>" in page.text  # its change, in words


def test_samples_that_scatter_more_within_runs_are_a_noise_finding(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    # bert eager's runs keep their level and run-to-run noise; from run 25 on, the ten samples
    # within each run scatter four times as far (a noisy neighbour during the runs).
    ids = []
    for index in range(50):
        rng = np.random.default_rng([11, index])
        value = 10.0 * (1 + rng.normal(0, 0.002))
        within = 0.02 if index >= 25 else 0.005
        samples = [value * (1 + x) for x in rng.normal(0, within, 10)]
        row = case_rows("bert", "eager", value)[0] | {"samples": samples}
        answer = client.post("/api/v1/runs", json=nightly(index, [row]), headers=ingest_headers)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    drain(client)
    (found,) = regressions(client)
    assert found["direction"] == "noise"
    assert abs(ids.index(found["first_bad_run_id"]) - 25) <= 5
    assert found["after_spread"] > 2 * found["before_spread"]  # the runs' own spreads
    with database.session_scope() as session:
        (stored,) = session.scalars(select(Result.spread).where(Result.run_id == ids[0]))
        assert stored == pytest.approx(0.005, rel=0.6)  # kept at ingest, beside the value
