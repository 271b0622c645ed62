"""The alert-group listing filters by the derived status in SQL, agreeing with group_status."""

import itertools

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.anomalies.models import STATUSES, AlertGroup, Regression
from app.anomalies.triage import group_status, list_groups
from app.core.db import Database
from tests.anomalies.test_service import BAD, post_history


def bert_slower_twice(model: str, config: str, index: int) -> dict[str, float]:
    if model == "bert" and config in ("dynamic", "default") and index >= BAD:
        return {"latency": 11.0}
    return {}


def test_every_status_filter_finds_exactly_the_groups_of_that_status(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post_history(client, ingest_headers, bert_slower_twice)
    with database.session_scope() as session:
        (group,) = session.scalars(select(AlertGroup))
        members = [r.id for r in group.regressions]
    assert len(members) == 2
    for first, second in itertools.product(STATUSES, repeat=2):
        with database.session_scope() as session:
            for member, status in zip(members, (first, second), strict=True):
                session.execute(
                    update(Regression).where(Regression.id == member).values(status=status)
                )
        with database.session_scope() as session:
            expected = group_status(session.get_one(AlertGroup, group.id))
            for status in STATUSES:
                found, total = list_groups(session, status, None, None, None, 0, 10)
                wanted = [group.id] if status == expected else []
                assert ([g.id for g in found], total) == (wanted, len(wanted)), (first, second)
    answer = client.get("/api/v1/alert-groups", params={"status": expected}).json()
    assert [g["id"] for g in answer["items"]] == [group.id]
    assert answer["items"][0]["status"] == expected
