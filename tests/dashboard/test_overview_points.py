"""The overview reads the aggregate points detection stored, and shows what the results say."""

from dataclasses import asdict

from fastapi.testclient import TestClient
from sqlalchemy import delete

from app.anomalies.models import AggregatePoint
from app.core.db import Database
from app.dashboard import overview
from app.runs.models import Run
from app.summaries import aggregates
from app.summaries.service import model_records
from tests.anomalies.test_aggregate_findings import nightly
from tests.anomalies.test_aggregate_triage import BREAKING

SHOWN = ("pass_count", "total_count", "pass_rate", "geomean_speedup", "mean_compile_time_s")


def shown(stats: dict[tuple[str, ...], aggregates.GroupStats]) -> dict[tuple[str, ...], dict]:
    return {group: {k: asdict(s)[k] for k in SHOWN} for group, s in stats.items()}


def test_the_stored_points_give_the_aggregates_the_results_give(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = [nightly(client, ingest_headers, i) for i in range(2)]
    ids.append(nightly(client, ingest_headers, 2, BREAKING))
    page = client.get("/").text
    with database.session_scope() as session:
        runs = [session.get_one(Run, run_id) for run_id in ids]
        from_points = overview._stored_stats(session, ids)
        assert set(from_points) == set(ids)
        for run in runs:
            computed = aggregates.summarize(model_records(session, run.id))
            assert shown(from_points[run.id]) == shown(computed)
        assert from_points[ids[2]] != from_points[ids[0]]  # three models fail in the last
        # A run without points (detected before they were kept) is computed from its results.
        session.execute(delete(AggregatePoint).where(AggregatePoint.run_id == ids[2]))
        assert overview._stats_by_run(session, runs)[ids[2]] == aggregates.summarize(
            model_records(session, ids[2])
        )
    assert "70.0% (7/10)" in page  # the pass rate read from the points
