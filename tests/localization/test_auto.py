"""Localizations that start by themselves (issue 28 point 1): with
BENCHWATCH_LOCALIZE=confirmed a step confirmed on a measurable series is queued once, a second
one past the machine's budget is skipped and logged, an unmeasurable one passed over; with
``suspected`` the first suspected point starts it; ``off`` starts none."""

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.localization import auto
from app.main import create_app
from tests.conftest import PEPPER, make_token
from tests.factories import result, run_payload
from tests.posting import post_detected

MAPPED = {"tb": {"command": ["python", "bench.py"], "format": "pytest-benchmark"}}
STEP, POINTS = 20, 28  # 15 points before the newest ones, at least, for a step to be suspected
NOISE = np.random.default_rng(28).standard_normal(POINTS)


@pytest.fixture(autouse=True)
def _policy_reset() -> Iterator[None]:
    """The policy is the process's: each test's server sets its own; none is left behind."""
    yield
    auto.install(auto.Policy())


def server(database: Database, mode: str, budget: int = 3) -> TestClient:
    config = Settings(
        DATABASE_URL=database.url,
        TOKEN_PEPPER=PEPPER,
        BROKER_URL=None,
        COMMAND_SUITES=MAPPED,
        LOCALIZE_SUITES={"torchbench": "tb"},
        LOCALIZE=mode,
        LOCALIZE_BUDGET=budget,
    )
    return TestClient(create_app(config))


def post(
    client: TestClient, database: Database, models: list[str], points: range, suite: str = ""
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    for index in points:
        level = (10.0 if index < STEP else 13.0) * (1 + 0.01 * NOISE[index])
        rows = [
            result(model=model, value=level, samples=[level * (1 + 0.002 * i) for i in range(5)])
            | ({"suite": suite} if suite else {})
            for model in models
        ]
        torch = "2.6.0.dev20260101" if index < STEP else "2.6.0.dev20260105"
        payload = run_payload(f"{suite}-{index}", rows, index=index)
        post_detected(client, headers, payload | {"environment": {"torch": torch}})


def localizations(client: TestClient) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get("/api/v1/localizations").json()["items"]
    return items


def states(client: TestClient) -> dict[str, str]:
    return {
        r["series"]["benchmark"]["model"]: r["state"]
        for r in client.get("/api/v1/regressions").json()["items"]
    }


def test_a_confirmed_step_is_localized_once_and_the_budget_holds(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    with server(database, "confirmed", budget=1) as client:
        post(client, database, ["resnet50"], range(STEP + 2))  # suspected only: not yet
        assert states(client) == {"resnet50": "suspected"}
        assert localizations(client) == []
        post(client, database, ["resnet50"], range(STEP + 2, POINTS))
        assert states(client) == {"resnet50": "confirmed"}
        (made,) = localizations(client)
        assert (made["state"], made["started_by"], made["finding_kind"]) == (
            "queued",
            "auto",
            "regression",
        )
        assert made["case"]["tier"] == "command:tb"
        suite_run = client.get(f"/api/v1/suite-runs/{made['suite_run_id']}").json()
        assert (suite_run["trigger"], suite_run["status"]) == ("localize", "queued")
        # Another series of the machine: over the budget, skipped and said so.
        with caplog.at_level(logging.WARNING, logger="app.localization.auto"):
            post(client, database, ["bert"], range(POINTS), suite="torchbench")
        assert states(client)["bert"] == "confirmed"
        assert [one["id"] for one in localizations(client)] == [made["id"]]
        assert "not localized: machine h100-8 has run 1 localizations in 24 h" in caplog.text
        # A series no worker measures: passed over, nothing said past debug.
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="app.localization.auto"):
            post(client, database, ["vit"], range(POINTS), suite="huggingface")
        assert states(client)["vit"] == "confirmed"
        assert len(localizations(client)) == 1
        assert caplog.text == ""


def test_a_suspected_step_starts_it_with_suspected_and_none_with_off(database: Database) -> None:
    with server(database, "suspected") as client:
        post(client, database, ["resnet50"], range(STEP + 2))
        assert states(client) == {"resnet50": "suspected"}
        (made,) = localizations(client)
        post(client, database, ["resnet50"], range(STEP + 2, POINTS))  # confirmed: not a second one
        assert states(client) == {"resnet50": "confirmed"}
        assert [one["id"] for one in localizations(client)] == [made["id"]]
    with server(database, "off") as client:
        post(client, database, ["bert"], range(POINTS), suite="torchbench")
        assert states(client)["bert"] == "confirmed"
        assert len(localizations(client)) == 1
