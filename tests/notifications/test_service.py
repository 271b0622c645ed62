"""Which subscriptions an alert group concerns, on a history detection really ran on."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies.models import AlertGroup
from app.core.db import Database
from app.notifications import service
from app.notifications.models import Subscription
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import make_token

HOOK = [{"kind": "webhook", "url": "https://hooks.example/bw"}]


def subscribe(session: Any, name: str, match: dict[str, Any], **fields: Any) -> Subscription:
    values = {"owner": "", "exclude": [], "receivers": HOOK, "when": "immediate", "paused": False}
    values = {**values, "name": name, "match": match, **fields}
    return service.create_subscription(session, values, service.accept_any)


def test_matching_subscriptions_on_a_detected_regression(
    client: TestClient, database: Database
) -> None:
    post_history(
        client, {"Authorization": f"Bearer {make_token(database, 'ingest')}"}, dynamic_bert_slower
    )
    with database.session_scope() as session:
        group = session.scalars(select(AlertGroup)).one()
        bert = [r for r in group.regressions if r.series.benchmark.model == "bert"]
        assert bert
        assert all(r.series.benchmark.config == "dynamic" for r in bert)
        finding = service.finding_of(bert[0])
        assert (finding.machine, finding.channel, finding.suite) == (
            "h100-8",
            "nightly",
            "torchbench",
        )
        assert (finding.kind, finding.direction, finding.metric) == (
            "regression",
            "regression",
            "latency",
        )
        assert finding.rel_change > 0.05

        everything = subscribe(session, "everything", {})
        berts = subscribe(
            session, "bert", {"model": "be*", "config": ["dynamic"], "metric": "latency"}
        )
        subscribe(session, "paused", {}, paused=True)
        subscribe(session, "other machine", {"machine": "a100-*"})
        subscribe(session, "too small", {"model": ["bert"], "min_rel_change": 0.5})
        subscribe(session, "improvements", {"direction": "improvement"})
        subscribe(session, "vetoed", {"model": "bert"}, exclude=[{"channel": "nightly"}])
        exact = subscribe(
            session, "at the boundary", {"model": "bert", "min_rel_change": abs(bert[0].rel_change)}
        )

        selected = service.matching_subscriptions(session, group)
        assert [(s.name, [r.id for r in found]) for s, found in selected] == [
            ("everything", [r.id for r in group.regressions]),
            ("bert", [r.id for r in bert]),
            ("at the boundary", [bert[0].id]),
        ]
        assert {s.id for s, _ in selected} == {everything.id, berts.id, exact.id}
