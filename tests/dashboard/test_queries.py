"""The pages' queries without HTTP: shared selects, and what each page reads, as plain data."""

import ast
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from app.dashboard import compare, queries, run_page, series
from app.dashboard.compare import CompareQuery
from app.dashboard.series import SeriesQuery
from app.runs.models import INVALID, Run
from tests.anomalies.test_service import BAD, dynamic_bert_slower, post_history
from tests.factories import result, run_payload

DASHBOARD = Path(compare.__file__).parent
PAGES = ("overview", "compare", "series", "run_page", "alerts")


def post(
    client: TestClient, headers: dict[str, str], key: str, rows: list[dict[str, Any]], **fields: Any
) -> int:
    extra = fields.pop("machine_extra", None)
    payload = run_payload(key, rows, **fields)
    if extra is not None:
        payload["machine"]["extra"] = extra
    response = client.post("/api/v1/runs", json=payload, headers=headers)
    assert response.status_code == 201, response.text
    run_id: int = response.json()["id"]
    return run_id


def test_no_page_imports_another_and_figures_read_nothing() -> None:
    for module in (*PAGES, "figures", "queries", "format"):
        tree = ast.parse((DASHBOARD / f"{module}.py").read_text())
        imported = {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        } | {
            f"app.dashboard.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "app.dashboard"
            for alias in node.names
        }
        others = {f"app.dashboard.{page}" for page in PAGES} - {f"app.dashboard.{module}"}
        assert not imported & others, module
        if module in ("figures", "format"):
            assert not {m for m in imported if m.startswith(("sqlalchemy", "app.runs"))}, module


def test_demo_data_is_told_by_a_machine_flag(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    def demo() -> bool:
        with database.sessionmaker() as session:
            return queries.has_demo_data(session)

    assert not demo()
    post(client, ingest_headers, "a", [result()], machine="a", machine_extra={"rack": "demo"})
    post(client, ingest_headers, "b", [result()], machine="b", machine_extra={"demo": False})
    post(client, ingest_headers, "c", [result()], machine="c", machine_extra={"x": {"demo": 1}})
    assert not demo()  # a word, a false flag, a nested key: not demo data
    post(client, ingest_headers, "d", [result()], machine="d", machine_extra={"demo": True})
    assert demo()
    assert "Demo data:" in client.get("/").text


def test_machines_channels_and_newest_runs(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    ids = [
        post(client, ingest_headers, f"r{i}", [result()], channel=channel, index=i)
        for i, channel in enumerate(("2.5", "nightly", "2.5"))
    ]
    post(client, ingest_headers, "other", [result()], machine="b200", device="rocm")
    with database.sessionmaker() as session:
        assert queries.machine_names(session) == ["b200", "h100-8"]
        assert queries.machine_device(session, "b200") == "rocm"
        assert queries.machine_device(session, "nope") == ""
        channels = queries.machine_channels(session, "h100-8")
        assert channels == ["2.5", "nightly"]
        assert [r.id for r in queries.recent_runs(session, "h100-8", "2.5", 5)] == [ids[2], ids[0]]
        assert [r.id for r in queries.recent_runs(session, "h100-8", "2.5", 1)] == [ids[2]]
    assert queries.default_channel(channels) == "nightly"
    assert queries.default_channel(["2.5", "2.6"]) == "2.5"
    assert queries.default_channel([]) == "nightly"


@pytest.fixture
def history(client: TestClient, ingest_headers: dict[str, str]) -> list[int]:
    return post_history(client, ingest_headers, dynamic_bert_slower)


def test_the_compare_table_of_two_configs(database: Database, history: list[int]) -> None:
    query = CompareQuery(base_config="default", new_config="dynamic")
    with database.sessionmaker() as session:
        offered = compare.choices(session, query)
        chosen = compare.sides(session, query, offered)
        table = compare.table(session, query, chosen)
    assert (offered.machines, offered.machine, offered.channels) == (
        ["h100-8"],
        "h100-8",
        ["nightly"],
    )
    assert [s.label for s in chosen] == ["default", "dynamic"]
    assert chosen[0].run.id == history[-1]  # the newest run, one config per side
    by_model = {r["model"]: r for r in table.rows}
    assert set(by_model) == {"bert", "resnet50", "llama"}
    assert by_model["bert"]["config"] == ""  # each side fixes its own
    assert by_model["bert"]["verdicts"] == ["worse"]  # dynamic is 10% slower
    assert by_model["bert"]["changes"][0] == pytest.approx(0.10, abs=0.02)
    (geomean,) = table.geomeans
    assert geomean.count == table.common == 3
    assert geomean.ratio == pytest.approx(1.03, abs=0.03)
    assert table.unit == "ms"


def test_the_compare_page_holds_its_scatter_as_values(
    database: Database, history: list[int]
) -> None:
    query = CompareQuery(kind="runs", base_run=history[BAD - 1], new_run=history[BAD])
    with database.sessionmaker() as session:
        page = compare.compare_page(session, query)
    assert [s.label for s in page["sides"]] == [f"run {history[BAD - 1]}", f"run {history[BAD]}"]
    (points, diagonal) = page["scatter"]["data"]
    assert len(points["x"]) == len(page["rows"]) == 9  # 3 models x 3 configs
    dynamic = page["rows"][[r["config"] for r in page["rows"]].index("dynamic")]
    assert dynamic["model"] == "bert"
    assert diagonal["name"] == "no change"
    assert page["rollback"][0]["run"].id == history[BAD - 1]  # before the open regression


def test_an_invalidated_run_is_never_the_rollback_target(
    database: Database, history: list[int]
) -> None:
    # The last good run before the open step is invalidated: the one before it is the target
    # (the old query named the invalidated run).
    with database.session_scope() as session:
        session.get_one(Run, history[BAD - 1]).status = INVALID
    query = CompareQuery(kind="runs", base_run=history[BAD - 2], new_run=history[BAD])
    with database.sessionmaker() as session:
        page = compare.compare_page(session, query)
    assert page["rollback"][0]["run"].id == history[BAD - 2]


def test_the_series_lines_and_their_steps(database: Database, history: list[int]) -> None:
    query = SeriesQuery(model="bert", precision="bf16", by="config", days="all")
    with database.sessionmaker() as session:
        found = series.matching_series(session, query, "h100-8", "bert")
        drawn = series.lines(session, found, "config", "cuda", "all")
    assert [line.name for line in drawn.lines] == ["default", "dynamic", "eager"]
    dynamic = drawn.lines[1]
    assert len(dynamic.points) == len(history) == drawn.points // 3 == drawn.shown // 3
    assert [p.run_id for p in dynamic.points] == history
    assert {p.torch for p in dynamic.points} == {"2.6.0.dev20260101", "2.6.0.dev20260113"}
    (step,) = dynamic.steps
    assert (step.label, step.direction, step.unit) == ("dynamic", "regression", "ms")
    assert step.at == dynamic.points[BAD].at
    with database.sessionmaker() as session:
        rocm = series.lines(session, found[:1], "config", "rocm", "7")
    assert len(rocm.lines[0].points) < len(history)  # the last 7 days only
    assert rocm.points == len(rocm.lines[0].points)


def test_the_run_page_hardware_panels() -> None:
    rows = [
        {"metric": "power", "value": 300.0, "model": "a", "config": "c", "precision": "p"}
        | {"mode": "m"},
        {"metric": "latency", "value": 1.0, "model": "a", "config": "c", "precision": "p"}
        | {"mode": "m"},
        {"metric": "gpu_utilization", "value": None, "model": "b", "config": "c"}
        | {"precision": "p", "mode": "m"},
        {"metric": "gpu_utilization", "value": 90.0, "model": "b", "config": "c"}
        | {"precision": "p", "mode": "m"},
    ]
    assert run_page.hardware_panels(rows) == {
        "gpu_utilization": [("b c p m", 90.0)],  # HARDWARE's order, not the rows'
        "power": [("a c p m", 300.0)],
    }
