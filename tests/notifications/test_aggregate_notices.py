"""Aggregate findings as notifications: kind ``aggregate``, matched, told, resolved, rendered."""

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies.models import AggregateFinding
from app.core.config import Settings
from app.core.db import Database
from app.notifications.matching import compile_subscription
from app.notifications.message import finding_line
from app.notifications.service import finding_of
from tests.anomalies.test_aggregate_findings import nightly
from tests.anomalies.test_aggregate_triage import BREAKING
from tests.conftest import make_token
from tests.notifications.receiver import receiving
from tests.notifications.test_delivery import (  # noqa: F401  (fixtures)
    app_client,
    deliver_due,
    notify_settings,
    received_events,
    settle,
    subscribe,
    sweep,
)


def test_an_aggregate_is_a_finding_of_its_own_kind(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    for index in range(4):
        nightly(client, ingest_headers, index)
    nightly(client, ingest_headers, 4, BREAKING)
    with database.session_scope() as session:
        found = finding_of(session.scalars(select(AggregateFinding)).one())
    assert (found.kind, found.machine, found.channel, found.metric) == (
        "aggregate",
        "h100-8",
        "nightly",
        "pass_rate",
    )
    assert (found.suite, found.config, found.precision, found.mode) == (
        "torchbench",
        "cudagraphs",
        "bf16",
        "inference",
    )
    assert (found.direction, found.state) == ("regression", "confirmed")
    assert abs(found.rel_change + 0.3) < 1e-9
    assert compile_subscription({"kind": "aggregate"}).matches(found)
    assert (
        compile_subscription({"kind": "aggregate", "metric": "geomean_*"}).matches(found) is False
    )
    assert compile_subscription({"kind": "failure"}).matches(found) is False
    assert compile_subscription({"min_rel_change": 0.25}).matches(found)
    assert compile_subscription({"min_rel_change": 0.35}).matches(found) is False


def test_a_pass_rate_drop_is_told_and_its_recovery_resolves_it(
    app_client: TestClient,  # noqa: F811
    database: Database,
    notify_settings: Settings,  # noqa: F811
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    with receiving() as hook:
        subscribe(
            app_client,
            database,
            name="dashboard",
            match={"kind": "aggregate"},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        for index in range(4):
            nightly(app_client, headers, index)
        nightly(app_client, headers, 4, BREAKING)
        settle(app_client)
        (opened,) = hook.wait_for(1)
        body = opened.json()
        assert body["event"] == "opened"
        assert body["headline"] == (
            "1 aggregate on h100-8 (nightly): torchbench cudagraphs bf16 inference"
            " pass_rate 100.0% -> 70.0% (pass rate below 90%)"
        )
        (finding,) = body["findings"]
        assert finding["kind"] == "aggregate"
        assert (finding["metric"], finding["rule"]) == ("pass_rate", "pass_rate_below")
        assert (finding["before"], finding["after"]) == (1.0, 0.7)
        assert len(finding["explained_by"]["failures"]) == 3
        assert finding["url"] == f"https://bw.example/alerts?group={body['group']['id']}"
        assert finding_line(finding) == (
            "aggregate -30.0% pass_rate torchbench/cudagraphs/bf16/inference (1 -> 0.7)"
        )

        nightly(app_client, headers, 5)
        settle(app_client)
        assert received_events(hook.wait_for(2)) == ["opened", "resolved"]


def test_a_group_whose_untriaged_finding_is_an_aggregate_is_reminded(
    app_client: TestClient,  # noqa: F811
    database: Database,
    notify_settings: Settings,  # noqa: F811
) -> None:
    day = notify_settings.NOTIFY_REMIND_S
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    with receiving() as hook:
        subscribe(
            app_client,
            database,
            name="dashboard",
            match={"kind": "aggregate"},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        for index in range(4):
            nightly(app_client, headers, index)
        nightly(app_client, headers, 4, BREAKING)
        settle(app_client)
        hook.wait_for(1)
        sweep(database, notify_settings, after_s=day + 60)
        deliver_due(database, notify_settings)
        assert received_events(hook.wait_for(2)) == ["opened", "reminder"]
