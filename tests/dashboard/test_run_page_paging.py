"""The run page shows a run's results a page at a time: a run may hold 100,000 of them."""

import re

from fastapi.testclient import TestClient

from tests.factories import many_results, run_payload


def _models(html: str) -> list[str]:
    return re.findall(r'<a href="/series\?[^"]*">(model_\d+)</a>', html)


def test_the_run_page_is_paged(client: TestClient, ingest_headers: dict[str, str]) -> None:
    # 48 results, one case each (12 models of 4 configs): three pages of 20.
    posted = client.post(
        "/api/v1/runs", json=run_payload("paged", many_results(48)), headers=ingest_headers
    )
    run_id = posted.raise_for_status().json()["id"]
    pages = [
        client.get(f"/runs/{run_id}", params={"page": n, "size": 20}).raise_for_status().text
        for n in (1, 2, 3)
    ]
    assert "results 1-20 of 48" in pages[0]
    assert "results 21-40 of 48" in pages[1]
    assert "results 41-48 of 48" in pages[2]
    assert f'href="/runs/{run_id}?page=2&amp;size=20" rel="next"' in pages[0]
    assert 'rel="prev"' not in pages[0]
    assert f'href="/runs/{run_id}?page=1&amp;size=20" rel="prev"' in pages[1]
    assert f'href="/runs/{run_id}?page=3&amp;size=20" rel="next"' in pages[1]
    assert 'rel="next"' not in pages[2]
    # Each page shows its results' cases, together every case once.
    shown = [_models(page) for page in pages]
    assert [len(models) for models in shown] == [20, 20, 8]
    assert sorted(m for models in shown for m in models) == sorted(
        f"model_{i // 4}" for i in range(48)
    )
    # The default page size: one page, no paging line.
    whole = client.get(f"/runs/{run_id}").raise_for_status().text
    assert len(_models(whole)) == 48
    assert 'id="paging"' not in whole


def test_the_default_page_holds_500_results(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    payload = run_payload("sized", many_results(501))
    posted = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    run_id = posted.raise_for_status().json()["id"]
    first = client.get(f"/runs/{run_id}").raise_for_status().text
    assert "results 1-500 of 501" in first
    assert f'href="/runs/{run_id}?page=2" rel="next"' in first
    second = client.get(f"/runs/{run_id}", params={"page": 2}).raise_for_status().text
    assert "results 501-501 of 501" in second
    assert f'href="/runs/{run_id}?page=1" rel="prev"' in second


def test_a_page_past_the_end_or_a_bad_page_is_a_friendly_answer(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    posted = client.post(
        "/api/v1/runs", json=run_payload("ends", many_results(12)), headers=ingest_headers
    )
    run_id = posted.raise_for_status().json()["id"]
    past = client.get(f"/runs/{run_id}", params={"page": 4, "size": 5})
    assert past.status_code == 404, past.text
    assert "text/html" in past.headers["content-type"]
    assert "page 4 is past its last" in past.text
    assert "12 results" in past.text
    far = client.get(f"/runs/{run_id}", params={"page": 2**31 - 1})
    assert far.status_code == 404, far.text
    for bad in ({"page": 0}, {"page": "x"}, {"page": 2**31}, {"size": 0}, {"size": 2_001}):
        answer = client.get(f"/runs/{run_id}", params=bad)
        assert answer.status_code == 422, (bad, answer.text)
        assert f"query.{next(iter(bad))}" in answer.text
