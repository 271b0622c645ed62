"""GET /api/v1/compare reads values only, never a run's raw samples, unless asked for its
statistics; the compare page reads them only bounded, as many as its statistics cover."""

import pytest
from fastapi.testclient import TestClient

from app.summaries import router as summaries_router
from tests.dashboard.test_alerts_statements import counted
from tests.factories import many_results, run_payload


def test_compare_reads_no_samples(client: TestClient, ingest_headers: dict[str, str]) -> None:
    ids = []
    for index in range(2):
        payload = run_payload(f"cmp-{index}", many_results(8), index=index)
        posted = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
        ids.append(posted.raise_for_status().json()["id"])
    with counted() as statements:
        answer = client.get("/api/v1/compare", params={"base_run_id": ids[0], "new_run_id": ids[1]})
    assert len(answer.raise_for_status().json()["rows"]) == 8
    read = [s for s in statements if "FROM result" in s]
    assert read
    assert not [s for s in read if "samples" in s or "result.extra" in s]


def test_compare_page_reads_samples_bounded(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    ids = []
    for index in range(2):
        payload = run_payload(f"page-{index}", many_results(8), index=index)
        posted = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
        ids.append(posted.raise_for_status().json()["id"])
    params = {"kind": "runs", "machine": "h100-8", "base_run": ids[0], "new_run": ids[1]}
    for fmt in ("html", "csv"):
        with counted() as statements:
            page = client.get("/compare", params=params | {"format": fmt}).raise_for_status()
        assert "model_1" in page.text
        read = [s for s in statements if "FROM result" in s]
        assert read
        assert not [s for s in read if "result.extra" in s]
        with_samples = [s for s in read if "samples" in s]
        if fmt == "csv":  # values alone
            assert not with_samples
        else:  # the statistics': a stored value past its byte bound is not read
            assert with_samples
            assert all("length(" in s.lower() for s in with_samples)


def test_run_page_reads_no_samples(client: TestClient, ingest_headers: dict[str, str]) -> None:
    payload = run_payload("run-page", many_results(8))
    posted = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    run_id = posted.raise_for_status().json()["id"]
    with counted() as statements:
        page = client.get(f"/runs/{run_id}").raise_for_status()
    assert "model_1" in page.text
    read = [s for s in statements if "FROM result" in s]
    assert read
    assert not [s for s in read if "samples" in s]


def test_compare_is_paged(client: TestClient, ingest_headers: dict[str, str]) -> None:
    ids = []
    for index in range(2):
        payload = run_payload(f"paged-{index}", many_results(12), index=index)
        posted = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
        ids.append(posted.raise_for_status().json()["id"])
    runs = {"base_run_id": ids[0], "new_run_id": ids[1]}
    whole = client.get("/api/v1/compare", params=runs).raise_for_status().json()
    assert (whole["total"], whole["offset"], whole["limit"]) == (12, 0, 5_000)
    pages = [
        client.get("/api/v1/compare", params=runs | {"limit": 5, "offset": start}).json()
        for start in (0, 5, 10)
    ]
    assert [len(p["rows"]) for p in pages] == [5, 5, 2]
    assert [r for p in pages for r in p["rows"]] == whole["rows"]
    for bad in ({"limit": 5_001}, {"limit": 0}, {"offset": -1}):
        answer = client.get("/api/v1/compare", params=runs | bad)
        assert answer.status_code == 422, answer.text
        assert f"query.{next(iter(bad))}" in answer.text


def test_compare_page_ends_at_its_byte_budget(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each case carries 20 KB of params; a budget of 50 KB fits two rows a page.
    monkeypatch.setattr(summaries_router, "ANSWER_BYTES", 50_000)
    ids = []
    for index in range(2):
        results = many_results(5)
        for number, row in enumerate(results):
            row["params"] = {"blob": f"{number}" * 20_000}
        payload = run_payload(f"bytes-{index}", results, index=index)
        posted = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
        ids.append(posted.raise_for_status().json()["id"])
    runs = {"base_run_id": ids[0], "new_run_id": ids[1]}
    pages, offset = [], 0
    while offset is not None:
        page = client.get("/api/v1/compare", params=runs | {"offset": offset}).raise_for_status()
        pages.append(page.json())
        offset = pages[-1]["next_offset"]
    assert [len(p["rows"]) for p in pages] == [2, 2, 1]
    assert [p["offset"] for p in pages] == [0, 2, 4]
    assert {p["total"] for p in pages} == {5}
    blobs = [r["params"]["blob"][0] for p in pages for r in p["rows"]]
    assert sorted(blobs) == ["0", "1", "2", "3", "4"]
    # A row over the budget alone still ships, one a page.
    monkeypatch.setattr(summaries_router, "ANSWER_BYTES", 10)
    alone = client.get("/api/v1/compare", params=runs | {"offset": 4}).raise_for_status().json()
    assert (len(alone["rows"]), alone["next_offset"]) == (1, None)
