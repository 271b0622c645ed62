"""Coverage changes as notifications: kind ``coverage``, low severity, told but never reminded."""

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies.models import CaseFailure
from app.core.config import Settings
from app.core.db import Database
from app.notifications.matching import compile_subscription
from app.notifications.message import finding_line
from app.notifications.models import Notice
from app.notifications.service import finding_of
from tests.anomalies.test_coverage import post
from tests.anomalies.test_failures import MODELS
from tests.conftest import make_token
from tests.notifications.receiver import receiving
from tests.notifications.test_delivery import (  # noqa: F401  (fixtures)
    admin,
    app_client,
    deliver_due,
    notify_settings,
    received_events,
    settle,
    subscribe,
    sweep,
)

WITHOUT_T5 = tuple(m for m in MODELS if m != "t5")
KINDS = [
    "regression", "improvement", "noise", "bimodal", "failure", "coverage", "machine_silent",
    "aggregate",
]  # fmt: skip


def test_removed_and_added_cases_are_coverage_findings(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    for index in range(3):
        post(client, ingest_headers, index)
    post(client, ingest_headers, 3, (*WITHOUT_T5, "vit"), outcomes={"bert": "oom"})
    with database.session_scope() as session:
        found = {f.failure: finding_of(f) for f in session.scalars(select(CaseFailure)).unique()}
    assert {failure: f.kind for failure, f in found.items()} == {
        "failed": "failure",
        "removed": "coverage",
        "added": "coverage",
    }
    removed, added = found["removed"], found["added"]
    assert (removed.model, removed.suite, removed.machine) == ("t5", "torchbench", "h100-8")
    assert (removed.direction, added.direction) == ("regression", "change")
    assert compile_subscription({"kind": "coverage"}).matches(removed)
    assert compile_subscription({"kind": "failure"}).matches(removed) is False
    assert compile_subscription({"kind": "failure"}).matches(found["failed"])
    assert compile_subscription({"direction": "regression"}).matches(added) is False
    assert compile_subscription({"min_rel_change": 0.5}).matches(added)  # like a failure


def test_a_subscription_may_name_every_kind(
    app_client: TestClient,  # noqa: F811
    database: Database,
) -> None:
    feed = [{"kind": "feed"}]
    created = subscribe(app_client, database, match={"kind": KINDS}, receivers=feed)
    assert created["match"]["kind"] == KINDS
    for name, kind in (("too many", [*KINDS, "failure"]), ("unknown", "flaky")):
        body = {"name": name, "match": {"kind": kind}, "receivers": feed}
        refused = app_client.post("/api/v1/subscriptions", json=body, headers=admin(database))
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"][0]["loc"].startswith("match.kind"), refused.text


def test_a_removed_model_is_told_as_coverage_and_its_return_resolves_it(
    app_client: TestClient,  # noqa: F811
    database: Database,
    notify_settings: Settings,  # noqa: F811
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    with receiving() as hook:
        subscribe(
            app_client,
            database,
            name="coverage",
            match={"kind": "coverage"},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        subscribe(
            app_client,
            database,
            name="failures",
            match={"kind": "failure"},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        runs = [post(app_client, headers, i) for i in range(3)]
        runs.append(post(app_client, headers, 3, WITHOUT_T5))
        settle(app_client)
        (opened,) = hook.wait_for(1)  # to the coverage subscription alone
        body = opened.json()
        assert body["subscription"]["name"] == "coverage"
        assert body["event"] == "opened"
        assert body["headline"] == "1 coverage change on h100-8 (nightly): t5 no longer reported"
        (finding,) = body["findings"]
        assert (finding["kind"], finding["severity"], finding["failure"]) == (
            "coverage",
            "low",
            "removed",
        )
        assert (finding["last_passing_run"]["id"], finding["first_failing_run"]["id"]) == (
            runs[2],
            runs[3],
        )
        assert finding_line(finding) == (
            "coverage torchbench/t5/cudagraphs/bf16/inference: no longer reported"
        )

        post(app_client, headers, 4)
        settle(app_client)
        assert received_events(hook.wait_for(2)) == ["opened", "resolved"]


def test_failures_come_first_and_coverage_is_counted_apart(
    app_client: TestClient,  # noqa: F811
    database: Database,
    notify_settings: Settings,  # noqa: F811
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    with receiving() as hook:
        subscribe(
            app_client,
            database,
            name="all",
            match={},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        for index in range(3):
            post(app_client, headers, index)
        post(app_client, headers, 3, (*MODELS, "vit"), outcomes={"bert": "oom"})
        settle(app_client)
        (opened,) = hook.wait_for(1)
        body = opened.json()
        assert body["headline"] == (
            "1 coverage change, 1 failure on h100-8 (nightly): bert fails (CUDA out of memory)"
        )
        assert [(f["kind"], f["severity"], f["model"]) for f in body["findings"]] == [
            ("failure", "high", "bert"),
            ("coverage", "low", "vit"),
        ]


def test_a_group_of_coverage_changes_alone_is_never_reminded(
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
            name="all",
            match={},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        for index in range(3):
            post(app_client, headers, index)
        post(app_client, headers, 3, WITHOUT_T5)  # t5 is gone, and stays gone
        settle(app_client)
        hook.wait_for(1)
        for after in (day + 60, 2 * day + 60, 5 * day):
            assert sweep(database, notify_settings, after_s=after).planned == 0
            deliver_due(database, notify_settings)
        assert received_events(hook.received) == ["opened"]


def test_a_group_is_reminded_while_a_failure_is_untriaged_not_while_coverage_is(
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
            name="all",
            match={},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        for index in range(3):
            post(app_client, headers, index)
        post(app_client, headers, 3, (*WITHOUT_T5, "vit"), outcomes={"bert": "oom"})
        settle(app_client)
        hook.wait_for(1)
        sweep(database, notify_settings, after_s=day + 60)
        deliver_due(database, notify_settings)
        assert received_events(hook.wait_for(2)) == ["opened", "reminder"]

        with database.session_scope() as session:
            bert = session.scalars(select(CaseFailure.id).where(CaseFailure.failure == "failed"))
            bert_id = bert.one()
        triager = {"Authorization": f"Bearer {make_token(database, 'triage', name='oncall')}"}
        answer = app_client.patch(
            f"/api/v1/failures/{bert_id}", json={"status": "acknowledged"}, headers=triager
        )
        assert answer.status_code == 200, answer.text
        settle(app_client)
        for after in (2 * day + 60, 3 * day + 60):  # t5 and vit are still new: no escalation
            sweep(database, notify_settings, after_s=after)
            deliver_due(database, notify_settings)
        assert received_events(hook.received) == ["opened", "reminder"]
        with database.session_scope() as session:
            events = session.scalars(select(Notice.event).order_by(Notice.id)).all()
            assert events == ["opened", "reminder"]
