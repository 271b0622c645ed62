"""The compare page and ``GET /api/v1/compare`` judge the same runs the same way.

Both go through ``app.benchmarks.comparison``: the same rows (a case per benchmark, batch size
and params included), the same verdicts, the same relative changes, one geomean.
"""

import csv
import io
import math
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.factories import result, run_payload

Row = tuple[str, int | None, list[tuple[str, float | None]]]


def failed(model: str, **fields: Any) -> dict[str, Any]:
    return result(model=model, value=None, status="failed", reason="crash", **fields)


BASE = [
    result(model="a", value=10.0),
    result(model="b", value=10.0),
    result(model="c", value=10.0),
    result(model="d", value=10.0),
    result(model="f", value=10.0),
    failed("g"),
    result(model="h", value=10.0, batch_size=8),
    result(model="h", value=20.0, batch_size=16),
    result(model="z", value=0.0),
    result(model="a", metric="accuracy", value=None, text_value="pass"),
]
NEW = [
    result(model="a", value=12.0),
    result(model="b", value=9.0),
    result(model="c", value=10.2),
    result(model="e", value=1.0),
    failed("f"),
    result(model="g", value=10.0),
    result(model="h", value=10.0, batch_size=8),
    result(model="h", value=30.0, batch_size=16),
    result(model="z", value=1.0),
    result(model="a", metric="accuracy", value=None, text_value="fail_accuracy"),
]


@pytest.fixture
def runs(client: TestClient, ingest_headers: dict[str, str]) -> tuple[int, int]:
    ids = []
    for index, rows in enumerate((BASE, NEW)):
        posted = client.post(
            "/api/v1/runs", json=run_payload(f"r{index}", rows, index=index), headers=ingest_headers
        )
        assert posted.status_code == 201, posted.text
        ids.append(posted.json()["id"])
    return ids[0], ids[1]


def page(client: TestClient, runs: tuple[int, int], metric: str) -> str:
    params = {"kind": "runs", "base_run": runs[0], "new_run": runs[1], "metric": metric}
    response = client.get("/compare", params=params)
    assert response.status_code == 200
    return response.text


def page_rows(html: str) -> list[Row]:
    """Per table row: model, batch size, and (verdict, relative change) per compared side."""
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = []
    for line in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        model = re.match(r"<td>([^<\s]+)", line)
        batch = re.search(r'<span class="sub">batch (\d+)</span>', line)
        cells = re.findall(r'<td class="num cell (\w+)" data-value="([^"]*)">', line)
        assert model is not None
        rows.append(
            (
                model.group(1),
                int(batch.group(1)) if batch else None,
                [(verdict, float(rel) if rel else None) for verdict, rel in cells],
            )
        )
    return rows


def api_rows(client: TestClient, runs: tuple[int, int], metric: str) -> list[dict[str, Any]]:
    params = {"base_run_id": runs[0], "new_run_id": runs[1], "metric": metric, "mode": "inference"}
    response = client.get("/api/v1/compare", params=params)
    assert response.status_code == 200
    rows: list[dict[str, Any]] = response.json()["rows"]
    return rows


def as_page_rows(rows: list[dict[str, Any]]) -> list[Row]:
    return [(r["model"], r["batch_size"], [(r["verdict"], r["rel_change"])]) for r in rows]


@pytest.mark.parametrize("metric", ["latency", "accuracy"])
def test_the_page_and_the_api_list_the_same_rows_and_verdicts(
    client: TestClient, runs: tuple[int, int], metric: str
) -> None:
    assert page_rows(page(client, runs, metric)) == as_page_rows(api_rows(client, runs, metric))


def test_the_page_geomean_is_over_the_api_rows_both_runs_measured(
    client: TestClient, runs: tuple[int, int]
) -> None:
    ratios = [
        r["new_value"] / r["base_value"]
        for r in api_rows(client, runs, "latency")
        if r["base_status"] == r["new_status"] == "ok" and r["base_value"] and r["new_value"]
    ]
    assert len(ratios) == 5  # a, b, c and both batch sizes of h; z's base is 0
    expected = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert expected == pytest.approx((1.2 * 0.9 * 1.02 * 1.0 * 1.5) ** (1 / 5))
    found = re.search(
        r"ratio vs base <strong>([\d.]+)x</strong> over (\d+) benchmarks[^(]*\((\w+)\)",
        page(client, runs, "latency"),
    )
    assert found is not None
    assert found.groups() == (f"{expected:.3f}", "5", "worse")  # latency: lower is better


def test_where_the_page_disagreed_with_the_api_the_api_wins(
    client: TestClient, runs: tuple[int, int]
) -> None:
    """The page said "same" (no colour) for all of these; the API said what happened.

    Its own row keys also left batch sizes out, so h's batch 16 hid its batch 8.
    """
    rows = {
        (model, batch): cells[0][0]
        for model, batch, cells in page_rows(page(client, runs, "latency"))
    }
    assert rows[("f", None)] == "now_fails"
    assert rows[("g", None)] == "now_passes"
    assert rows[("d", None)] == "missing"
    assert rows[("e", None)] == "new"
    assert rows[("z", None)] == "changed"  # from 0: no relative change, but it moved
    assert (rows[("h", 8)], rows[("h", 16)]) == ("unchanged", "worse")
    api = {(r["model"], r["batch_size"]): r["verdict"] for r in api_rows(client, runs, "latency")}
    assert rows == api
    accuracy = page_rows(page(client, runs, "accuracy"))
    assert accuracy == [("a", None, [("now_fails", None)])]
    html = page(client, runs, "latency")
    assert 'class="num cell now_fails" data-value="">now fails</td>' in html


def test_the_csv_tells_batch_sizes_apart(client: TestClient, runs: tuple[int, int]) -> None:
    params = {"kind": "runs", "base_run": runs[0], "new_run": runs[1], "format": "csv"}
    table = list(csv.DictReader(io.StringIO(client.get("/compare", params=params).text)))
    assert sorted(r["batch_size"] for r in table if r["model"] == "h") == ["16", "8"]
