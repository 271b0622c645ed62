"""Read API: run listing with keyset pagination, one run, series points, public/private reads."""

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.jobs import DETECT_RUN
from app.main import create_app
from tests.conftest import make_token
from tests.factories import result, run_payload
from tests.test_queue import Recorder

pytestmark = pytest.mark.both_dialects


def post_runs(client: TestClient, headers: dict[str, str], count: int, **fields: Any) -> list[int]:
    ids = []
    for i in range(count):
        payload = run_payload(
            f"run-{fields.get('machine', 'm')}-{i}", [result(value=10.0 + i)], index=i, **fields
        )
        response = client.post("/api/v1/runs", json=payload, headers=headers)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def test_runs_are_listed_newest_first_across_pages(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    ids = post_runs(client, ingest_headers, 7)
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/api/v1/runs", params=params).json()
        seen += [r["id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))


def test_runs_filter_by_machine_channel_and_time(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post_runs(client, ingest_headers, 3, machine="a100-1")
    post_runs(client, ingest_headers, 2, machine="mi300x-8", device="rocm", channel="stable")
    by_machine = client.get("/api/v1/runs", params={"machine": "mi300x-8"}).json()["items"]
    assert {r["machine"]["name"] for r in by_machine} == {"mi300x-8"}
    assert len(by_machine) == 2
    stable = client.get("/api/v1/runs", params={"channel": "stable"}).json()["items"]
    assert len(stable) == 2
    window = client.get(
        "/api/v1/runs",
        params={
            "machine": "a100-1",
            "since": "2026-01-01T12:00:00Z",
            "until": "2026-01-02T00:00:00Z",
        },
    ).json()["items"]
    assert [r["key"] for r in window] == ["run-a100-1-1"]


def test_bad_cursor_and_unknown_run_are_clear_errors(client: TestClient) -> None:
    response = client.get("/api/v1/runs", params={"cursor": "garbage!"})
    assert response.status_code == 422
    assert "cursor" in response.json()["detail"]
    missing = client.get("/api/v1/runs/999")
    assert missing.status_code == 404
    assert missing.json() == {"error": "RunNotFound", "detail": "run 999 does not exist"}


def test_series_search_by_every_field(client: TestClient, ingest_headers: dict[str, str]) -> None:
    rows = [
        result(
            model="bert",
            metric="speedup",
            value=1.5,
            precision="amp",
            config="inductor_dynamic",
            mode="training",
            category="text",
        ),
        result(model="bert", metric="latency", value=3.0),
        result(model="unet", metric="latency", value=3.0, suite="timm_models"),
    ]
    client.post("/api/v1/runs", json=run_payload("k", rows, channel="rc"), headers=ingest_headers)

    def search(**params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = client.get("/api/v1/series", params=params).json()["items"]
        return items

    assert len(search()) == 3
    (dynamic,) = search(config="dynamic")  # the alias was stored as the canonical name
    assert dynamic["benchmark"]["config"] == "dynamic"
    assert dynamic["benchmark"]["precision"] == "amp"
    assert search(config="inductor_dynamic") == [dynamic]
    assert search(precision="amp", mode="training", metric="speedup", category="text") == [dynamic]
    assert len(search(model="bert")) == 2
    assert [s["benchmark"]["model"] for s in search(suite="timm_models")] == ["unet"]
    assert len(search(machine="h100-8", channel="rc")) == 3
    assert search(channel="stable") == []
    assert search(metric="compile_time") == []  # alias of compilation_latency
    machines = client.get("/api/v1/machines").json()
    assert [m["name"] for m in machines] == ["h100-8"]
    benchmarks = client.get("/api/v1/benchmarks", params={"model": "bert"}).json()
    assert benchmarks["total"] == 2


def test_series_points_in_a_time_range_and_downsampled(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    # The uploads' detection tasks are kept, not run: the points read here are the stored
    # rows, and detecting 120 runs one by one (in process) cost a minute of the teardown.
    queued = Recorder()
    client.app.state.database.set_publisher(queued)  # type: ignore[attr-defined]
    values = [10.0] * 60 + [13.0] * 60  # a 30% step in the middle
    values[30] = 40.0  # and an outlier
    for i, value in enumerate(values):
        row = result(value=value, samples=[value, value + 0.5])
        if i == 90:
            row = result(value=None, status="failed", reason="OOM")
        answer = client.post(
            "/api/v1/runs", json=run_payload(f"p{i}", [row], index=i), headers=ingest_headers
        )
        assert answer.status_code == 201, answer.text
    assert [name for name, _ in queued.sent].count(DETECT_RUN) == len(values)
    (series,) = client.get("/api/v1/series").json()["items"]
    url = f"/api/v1/series/{series['id']}/points"
    full = client.get(url).json()
    assert (full["total"], len(full["points"]), full["downsampled"]) == (120, 120, False)
    assert full["points"][0]["samples_max"] == 10.5
    assert full["points"][0]["samples"] is None
    day = client.get(
        url, params={"since": "2026-01-02T00:00:00Z", "until": "2026-01-03T00:00:00Z"}
    ).json()
    assert [p["value"] for p in day["points"]] == [10.0, 10.0]

    thin = client.get(url, params={"max_points": 20}).json()
    assert thin["downsampled"]
    assert len(thin["points"]) <= 24
    kept = [p["value"] for p in thin["points"]]
    assert 40.0 in kept  # the outlier survives
    assert 10.0 in kept
    assert 13.0 in kept
    assert any(p["status"] == "failed" for p in thin["points"])  # and the failure
    with_samples = client.get(url, params={"include_samples": True, "max_points": 10}).json()
    assert with_samples["points"][0]["samples"] == [10.0, 10.5]


@pytest.mark.parametrize("public", [True, False])
def test_reads_need_a_token_only_when_not_public(
    public: bool, settings: Settings, database: Database
) -> None:
    application = create_app(settings.model_copy(update={"PUBLIC_READ": public}))
    with TestClient(application) as client:
        anonymous = client.get("/api/v1/runs")
        assert anonymous.status_code == (200 if public else 401)
        reader = {"Authorization": f"Bearer {make_token(database, 'read')}"}
        assert client.get("/api/v1/machines", headers=reader).status_code == 200
        assert client.get("/healthz").status_code == 200  # probes stay open
    application.state.database.dispose()
