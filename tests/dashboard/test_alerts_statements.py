"""The alerts page reads a bounded number of statements: not one more per step of a group."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, select

from app.anomalies.models import AlertGroup, Regression
from app.benchmarks.models import Series
from app.core.db import Database
from app.dashboard.alerts import CHARTS_PER_GROUP, SHOWN_PER_GROUP
from app.runs.models import Run
from tests.factories import many_results, run_payload

STEPS = SHOWN_PER_GROUP + 15  # more than the page shows


@contextmanager
def counted() -> Iterator[list[str]]:
    """The SQL statements any engine runs inside the block."""
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(Engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(Engine, "before_cursor_execute", count)


def group_of(database: Database, steps: int, skip: int = 0) -> tuple[int, list[int]]:
    """A group of ``steps`` steps on distinct series (after the first ``skip``), the later
    ones larger; its step ids."""
    with database.session_scope() as session:
        first, second = session.scalars(select(Run).order_by(Run.id)).all()[:2]
        group = AlertGroup(
            machine_id=second.machine_id,
            channel=second.channel,
            first_bad_run_id=second.id,
            last_good_run_id=first.id,
        )
        session.add(group)
        session.flush()
        series = session.scalars(
            select(Series.id).order_by(Series.id).offset(skip).limit(steps)
        ).all()
        rows = [
            Regression(
                series_id=series_id,
                group_id=group.id,
                last_good_run_id=first.id,
                first_bad_run_id=second.id,
                direction="regression",
                before=1.0,
                after=1.0 + 0.1 + i / 100,
                before_spread=0.01,
                after_spread=0.01,
                rel_change=0.1 + i / 100,
                p_value=0.001,
                detector={"name": "change_point"},
            )
            for i, series_id in enumerate(series)
        ]
        session.add_all(rows)
        session.flush()
        return group.id, [r.id for r in rows]


def test_a_group_of_many_steps_costs_the_page_no_more_statements_than_a_few(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    for index in range(2):
        payload = run_payload(
            f"steps-{index}", many_results(STEPS + 2 * CHARTS_PER_GROUP), index=index
        )
        client.post("/api/v1/runs", json=payload, headers=ingest_headers).raise_for_status()
    few, _ = group_of(database, CHARTS_PER_GROUP)  # as many charts as the large one
    many, steps = group_of(database, STEPS, skip=CHARTS_PER_GROUP)
    client.get("/alerts").raise_for_status()  # the app's first request reads more

    with counted() as small:
        client.get("/alerts", params={"group": few}).raise_for_status()
    with counted() as large:
        page = client.get("/alerts", params={"group": many}).text
    assert len(large) == len(small)
    with counted() as two:
        client.get("/alerts").raise_for_status()
    group_of(database, CHARTS_PER_GROUP, skip=STEPS + CHARTS_PER_GROUP)
    with counted() as three:
        client.get("/alerts").raise_for_status()
    assert len(three) == len(two) + 1  # a group more: its annotations' statement alone

    assert f"{STEPS} regressions" in page
    assert "and 15 more" in page
    largest, second, smallest = steps[-1], steps[-2], steps[0]
    assert page.index(f'id="regression-{largest}"') < page.index(f'id="regression-{second}"')
    assert f'id="regression-{smallest}"' not in page  # not among the largest shown
    assert page.count('id="step-') == CHARTS_PER_GROUP
