"""Anonymous reads of runs and series cost what their answer is worth: samples bounded by bytes,
bands computed by the database, never sample arrays loaded to draw them."""

import re

import pytest
from fastapi.testclient import TestClient

from app.dashboard import series as series_page
from app.runs import router as runs_router
from tests.dashboard.test_alerts_statements import counted
from tests.factories import result, run_payload

pytestmark = pytest.mark.both_dialects

# The raw column selected as such (a column of the answer: before a comma, FROM or AS); inside
# a JSON function (json_each(result.samples)) the database reads the array, answers a figure.
RAW_SAMPLES = re.compile(r"(?<!\()\bresult\.samples\s*(,|FROM\b|AS\b|$)")


def _run(client: TestClient, headers: dict[str, str], key: str, count: int) -> int:
    rows = [
        # The same length of text for each: 1.i, 1.i5 and 3.i.
        result(model=f"m{i:02d}", samples=[float(f"1.{i}"), float(f"1.{i}5"), float(f"3.{i}")] * 40)
        for i in range(count)
    ]
    posted = client.post("/api/v1/runs", json=run_payload(key, rows), headers=headers)
    return int(posted.raise_for_status().json()["id"])


def test_a_page_of_results_ends_at_its_bytes(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _run(client, ingest_headers, "heavy", 10)
    # 120 samples are about 640 bytes of JSON: three results a page.
    monkeypatch.setattr(runs_router, "ANSWER_BYTES", 2_000)
    pages, params = [], {}
    while True:
        page = client.get(f"/api/v1/runs/{run_id}", params=params).raise_for_status().json()
        pages.append([r["model"] for r in page["results"]])
        if page["results_next_cursor"] is None:
            break
        params = {"results_cursor": page["results_next_cursor"]}
    assert [len(p) for p in pages] == [3, 3, 3, 1]
    assert [m for p in pages for m in p] == [f"m{i:02d}" for i in range(10)]
    first = client.get(f"/api/v1/runs/{run_id}").json()["results"][1]
    assert (first["samples_count"], first["samples_min"], first["samples_max"]) == (120, 1.1, 3.1)
    assert len(first["samples"]) == 120

    # One result over the budget still comes, alone: a page is never empty.
    monkeypatch.setattr(runs_router, "ANSWER_BYTES", 10)
    alone = client.get(f"/api/v1/runs/{run_id}").json()
    assert len(alone["results"]) == 1
    assert alone["results_next_cursor"] is not None


def test_a_run_without_samples_answers_their_summary(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run_id = _run(client, ingest_headers, "summary", 10)
    plain = client.post(
        "/api/v1/runs",
        json=run_payload("plain", [result(model="p", value=2.0)], index=1),
        headers=ingest_headers,
    ).json()["id"]
    with counted() as statements:
        answer = client.get(f"/api/v1/runs/{run_id}", params={"samples": "false"})
    results = answer.raise_for_status().json()["results"]
    assert answer.json()["results_next_cursor"] is None
    assert [
        (r["samples"], r["samples_count"], r["samples_min"], r["samples_max"]) for r in results
    ] == [(None, 120, float(f"1.{i}"), float(f"3.{i}")) for i in range(10)]
    read = [s for s in statements if "FROM result" in s]
    assert read
    assert not [s for s in read if RAW_SAMPLES.search(s)]
    lone = client.get(f"/api/v1/runs/{plain}", params={"samples": "false"}).json()["results"][0]
    assert (lone["samples_count"], lone["samples_min"], lone["samples_max"]) == (None,) * 3


def _series(client: TestClient, headers: dict[str, str], count: int) -> int:
    for index in range(count):
        row = result(value=1.0 + index % 3, samples=[1.0 + index, 2.0, 3.0 + index])
        posted = client.post(
            "/api/v1/runs", json=run_payload(f"s{index}", [row], index=index), headers=headers
        )
        posted.raise_for_status()
    series_id: int = client.get("/api/v1/series").json()["items"][0]["id"]
    return series_id


def test_a_band_is_drawn_from_the_database(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    series_id = _series(client, ingest_headers, 12)
    url = f"/api/v1/series/{series_id}/points"
    expected = [(2.0 if i else 1.0, 3.0 + i) for i in range(12)]
    for cap in (runs_router.MAX_POINTS, 10):  # whole, then downsampled
        monkeypatch.setattr(runs_router, "MAX_POINTS", cap)
        with counted() as statements:
            points = client.get(url).raise_for_status().json()["points"]
        got = {p["run_id"]: (p["samples_min"], p["samples_max"], p["samples"]) for p in points}
        assert len(got) == (12 if cap > 12 else len(points))
        assert set(got.values()) <= {(low, high, None) for low, high in expected}
        read = [s for s in statements if "FROM result" in s]
        assert read
        assert not [s for s in read if RAW_SAMPLES.search(s)]

    with counted() as statements:
        page = client.get(
            "/series",
            params={
                "machine": "h100-8",
                "model": "resnet50",
                "precision": "bf16",
                "config": "cudagraphs",
                "days": "all",
            },
        )
    assert page.raise_for_status().text.count("resnet50")
    read = [s for s in statements if "FROM result" in s]
    assert read
    assert not [s for s in read if RAW_SAMPLES.search(s)]


def test_a_chart_reads_a_bounded_number_of_points(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 12 points of one line, a budget of 5 (MAX_POINTS 4): the newest 5 are read and drawn,
    # and the page says the range was cut; the old code read and drew all 12.
    _series(client, ingest_headers, 12)
    monkeypatch.setattr(series_page, "READ_BUDGET", 5)
    monkeypatch.setattr(series_page, "MAX_POINTS", 4)
    params = {
        "machine": "h100-8",
        "model": "resnet50",
        "precision": "bf16",
        "config": "cudagraphs",
        "days": "all",
    }
    with counted() as statements:
        page = client.get("/series", params=params).raise_for_status().text
    assert (
        "each line&#39;s newest 5 points are read" in page or "each line's newest 5 points" in page
    )
    assert re.search(r"\b4 of 5 points drawn", page), page
    limits = [s for s in statements if "FROM result" in s and "LIMIT" in s]
    assert limits  # the database cut it, not Python
    # Within the budget: nothing is cut and nothing said.
    monkeypatch.setattr(series_page, "READ_BUDGET", 100)
    monkeypatch.setattr(series_page, "MAX_POINTS", 400)
    whole = client.get("/series", params=params).raise_for_status().text
    assert re.search(r"\b12 of 12 points drawn", whole)
    assert "points are read" not in whole
