"""The series page draws a branch's points beside the default branch's."""

import json
import re

from fastapi.testclient import TestClient

from tests.factories import case_rows, nightly


def test_a_branch_is_drawn_beside_the_default_branch(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for index in range(6):
        payload = nightly(index, case_rows("bert", "eager", 10.0))
        assert client.post("/api/v1/runs", json=payload, headers=ingest_headers).status_code == 201
    for index in range(6, 9):
        payload = nightly(index, case_rows("bert", "eager", 12.0))
        payload.update(key=f"pr-{index}", branch="feature-x")
        assert client.post("/api/v1/runs", json=payload, headers=ingest_headers).status_code == 201
    params = {
        "machine": "h100-8",
        "channel": "nightly",
        "model": "bert",
        "precision": "bf16",
        "config": "eager",
        "metric": "latency",
        "days": "all",
    }
    alone = client.get("/series", params=params).text
    assert "@feature-x" not in _figure(alone)  # the default branch alone, by default
    assert "<option selected>nightly@feature-x</option>" not in alone
    assert "nightly@feature-x" in alone  # offered as a branch to draw beside
    beside = client.get("/series", params={**params, "branch": "nightly@feature-x"}).text
    names = [trace.get("name", "") for trace in json.loads(_figure(beside))["data"]]
    assert "eager" in names
    assert "eager @feature-x" in names


def _figure(page: str) -> str:
    found = re.search(
        r'<script type="application/json" id="series-figure">(.*?)</script>', page, re.S
    )
    assert found is not None
    return found.group(1)
