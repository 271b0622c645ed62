"""GET /api/v1/compare reads values only: never a run's raw samples."""

from fastapi.testclient import TestClient

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


def test_compare_page_reads_no_samples(client: TestClient, ingest_headers: dict[str, str]) -> None:
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
        assert not [s for s in read if "samples" in s or "result.extra" in s]


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
