"""The API's edges: every invalid parameter is a 4xx in the one error body, every read bounded."""

import base64
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from app.dashboard import compare as dashboard_compare
from app.runs import router as runs_router
from tests.conftest import make_token
from tests.factories import example_run, many_results, result, run_payload

pytestmark = pytest.mark.both_dialects

BIG = "99999999999999999999999"  # beyond 64 bits
INT32 = str(2**31)  # beyond the INTEGER columns, within 64 bits


def assert_error(response: Any, status: int, where: str | None = None) -> dict[str, Any]:
    """The answer is ``status`` in the API's error body, located at ``where`` when given."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) <= {"error", "detail", "errors"}
    assert isinstance(body["error"], str)
    assert isinstance(body["detail"], str)
    if where is not None:
        assert [e["loc"] for e in body["errors"]][:1] == [where], body
    return body


def cursor_of(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("path", "where"),
    [
        (f"/api/v1/runs/{BIG}", "path.run_id"),
        (f"/api/v1/runs/{INT32}", "path.run_id"),
        ("/api/v1/runs/0", "path.run_id"),
        (f"/api/v1/alert-groups/{BIG}", "path.group_id"),
        (f"/api/v1/alert-groups/{INT32}", "path.group_id"),
        (f"/api/v1/regressions/{BIG}", "path.regression_id"),
        (f"/api/v1/regressions/{INT32}", "path.regression_id"),
        (f"/api/v1/series/{INT32}", "path.series_id"),
        (f"/api/v1/series/{BIG}/points", "path.series_id"),
        (f"/api/v1/series/{INT32}/points", "path.series_id"),
        (f"/api/v1/compare?base_run_id=1&new_run_id={INT32}", "query.new_run_id"),
        (f"/api/v1/compare?base_run_id={BIG}&new_run_id=1", "query.base_run_id"),
        (f"/api/v1/summary?run_id={INT32}", "query.run_id"),
        (f"/api/v1/summary?machine=m&base_run_id={BIG}", "query.base_run_id"),
        (f"/api/v1/regressions?group_id={INT32}", "query.group_id"),
        (f"/api/v1/regressions?first_bad_run_id={BIG}", "query.first_bad_run_id"),
        (f"/api/v1/regressions?found_by_run_id={INT32}", "query.found_by_run_id"),
    ],
)
def test_ids_no_column_holds_are_422(path: str, where: str, client: TestClient) -> None:
    assert_error(client.get(path), 422, where)


@pytest.mark.parametrize("listing", ["benchmarks", "series", "regressions", "alert-groups"])
def test_page_numbers_are_bounded(listing: str, client: TestClient) -> None:
    assert_error(client.get(f"/api/v1/{listing}", params={"page": BIG}), 422, "query.page")
    assert client.get(f"/api/v1/{listing}", params={"page": 1_000_000}).status_code == 200


@pytest.mark.parametrize(
    "cursor",
    [
        cursor_of(["2026-01-01T00:00:00+00:00", 2**31]),
        cursor_of(["2026-01-01T00:00:00+00:00", 10**30]),
        cursor_of(["2026-01-01T00:00:00+00:00", 1.5]),
        cursor_of(["0001-01-01T00:00:00+01:00", 1]),
        cursor_of(["not a time", 1]),
        cursor_of({"offset": 3}),
        "WyIyMDI2LTAxLTAxIiwgSW5maW5pdHld",  # ["2026-01-01", Infinity]
        "!!!",
    ],
)
def test_tampered_run_cursors_are_422(cursor: str, client: TestClient) -> None:
    assert_error(client.get("/api/v1/runs", params={"cursor": cursor}), 422, "query.cursor")


def test_over_long_cursor_is_422(client: TestClient) -> None:
    assert_error(client.get("/api/v1/runs", params={"cursor": "A" * 201}), 422, "query.cursor")


@pytest.mark.parametrize(
    "path",
    ["/api/v1/runs", "/api/v1/regressions", "/api/v1/alert-groups", "/api/v1/series/1/points"],
)
@pytest.mark.parametrize("since", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_times_without_a_utc_equivalent_are_422(path: str, since: str, client: TestClient) -> None:
    assert_error(client.get(path, params={"since": since}), 422, "query.since")


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/runs", {"machine": "h100\x00"}),
        ("/api/v1/series", {"model": "\x00"}),
        ("/api/v1/regressions", {"suite": "a\x00b"}),
        ("/api/v1/summary", {"machine": "\x00"}),
        ("/api/v1/benchmarks", {"suite\x00": "x"}),
    ],
)
def test_nul_in_a_query_is_422(path: str, params: dict[str, str], client: TestClient) -> None:
    name = next(iter(params))
    assert_error(client.get(path, params=params), 422, f"query.{name}")


def test_nul_in_a_triage_note_is_422(client: TestClient, database: Database) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'triage')}"}
    for path in ("/api/v1/regressions/1", "/api/v1/alert-groups/1"):
        response = client.patch(path, json={"note": "see\x00log"}, headers=headers)
        assert_error(response, 422, "note")


def test_auth_and_body_errors_answer_in_the_error_body(client: TestClient) -> None:
    body = assert_error(client.post("/api/v1/runs", json=example_run()), 401)
    assert body["error"] == "Unauthorized"
    assert assert_error(client.patch("/api/v1/regressions/1", json={}), 401)["error"] == (
        "Unauthorized"
    )
    reader = make_token(client.app.state.database, "ingest")  # type: ignore[attr-defined]
    body = assert_error(
        client.patch(
            "/api/v1/alert-groups/1", json={}, headers={"Authorization": f"Bearer {reader}"}
        ),
        403,
    )
    assert body["error"] == "Forbidden"
    not_text = client.post(
        "/api/v1/runs",
        content=b"\xff\xfeb",
        headers={"Authorization": f"Bearer {reader}", "Content-Type": "application/json"},
    )
    assert_error(not_text, 400)


def test_a_token_name_as_long_as_the_column_still_uploads(
    client: TestClient, database: Database
) -> None:
    # The run's source is "upload:" and the token's name: longer than the column by 7.
    token = make_token(database, "ingest", name="n" * 128)
    response = client.post(
        "/api/v1/uploads",
        params={"format": "native"},
        content=json.dumps(example_run()),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.text


def test_openapi_declares_every_error_with_the_error_body(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for path, operations in document["paths"].items():
        if not path.startswith("/api/v1/") or path == "/api/v1/uploads":
            continue
        for method, operation in operations.items():
            codes = {c for c in operation["responses"] if c.startswith(("4", "5"))}
            assert {"401", "422"} <= codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)
            if method in ("post", "patch"):
                assert {"400", "403", "413"} <= codes, (method, path)
            for code in codes:
                content = operation["responses"][code]["content"]["application/json"]
                assert content["schema"] == {"$ref": "#/components/schemas/ErrorBody"}


def test_a_dashboard_run_id_no_column_holds_is_a_404_page(client: TestClient) -> None:
    assert client.get(f"/runs/{BIG}").status_code == 404


# Bounded reads ---------------------------------------------------------------------------


def test_a_runs_results_come_in_pages_that_add_up_to_all(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    payload = run_payload("paged", many_results(7))
    run_id = client.post("/api/v1/runs", json=payload, headers=ingest_headers).json()["id"]
    whole = client.get(f"/api/v1/runs/{run_id}").json()
    assert len(whole["results"]) == 7
    assert whole["results_next_cursor"] is None
    pages, params = [], {"results_limit": 3}
    while True:
        page = client.get(f"/api/v1/runs/{run_id}", params=params).json()
        pages.append(page["results"])
        if page["results_next_cursor"] is None:
            break
        params = {"results_limit": 3, "results_cursor": page["results_next_cursor"]}
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [r for p in pages for r in p] == whole["results"]
    too_many = client.get(f"/api/v1/runs/{run_id}", params={"results_limit": 5001})
    assert_error(too_many, 422, "query.results_limit")
    tampered = client.get(f"/api/v1/runs/{run_id}", params={"results_cursor": cursor_of([1])})
    assert_error(tampered, 422, "query.results_cursor")


def series_with_points(client: TestClient, headers: dict[str, str], count: int) -> int:
    for index in range(count):
        row = result(value=1.0 + index % 3, samples=[1.0, 2.0, 3.0])
        posted = client.post(
            "/api/v1/runs", json=run_payload(f"k{index}", [row], index=index), headers=headers
        )
        assert posted.status_code == 201, posted.text
    series_id: int = client.get("/api/v1/series").json()["items"][0]["id"]
    return series_id


def test_series_points_are_capped_and_samples_only_on_request(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    series_id = series_with_points(client, ingest_headers, 12)
    url = f"/api/v1/series/{series_id}/points"
    plain = client.get(url).json()
    assert plain["total"] == 12
    assert not plain["downsampled"]
    assert [(p["samples"], p["samples_min"], p["samples_max"]) for p in plain["points"]] == [
        (None, 1.0, 3.0)
    ] * 12
    sampled = client.get(url, params={"include_samples": True}).json()
    assert [p["samples"] for p in sampled["points"]] == [[1.0, 2.0, 3.0]] * 12
    assert_error(client.get(url, params={"max_points": 10_001}), 422, "query.max_points")

    monkeypatch.setattr(runs_router, "MAX_POINTS", 10)  # the default cap
    capped = client.get(url).json()
    assert capped["downsampled"]
    assert capped["total"] == 12
    assert len(capped["points"]) <= 10
    assert all(p["samples_max"] == 3.0 for p in capped["points"])

    monkeypatch.setattr(runs_router, "MAX_POINTS", 10_000)
    monkeypatch.setattr(runs_router, "MAX_SAMPLED_POINTS", 10)  # with samples, fewer
    assert client.get(url, params={"include_samples": True}).json()["downsampled"]
    assert not client.get(url).json()["downsampled"]

    monkeypatch.setattr(runs_router, "MAX_POINTS_READ", 11)  # a range holding too many
    assert_error(client.get(url), 422)
    narrower = client.get(url, params={"since": "2026-01-01T12:00:00Z"})
    assert narrower.status_code == 200
    assert narrower.json()["total"] == 11


def test_a_compare_page_naming_one_channel_many_times_reads_it_once(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for index, channel in enumerate(("nightly", "release")):
        payload = run_payload(f"c{index}", [result()], channel=channel, index=index)
        assert client.post("/api/v1/runs", json=payload, headers=ingest_headers).is_success
    read: list[int] = []
    compared_results = dashboard_compare.compared_results

    def counting(session: Any, run_id: int) -> list[dict[str, Any]]:
        read.append(run_id)
        return compared_results(session, run_id)

    monkeypatch.setattr(dashboard_compare, "compared_results", counting)
    many = ",".join(["nightly", "release"] * 1000)
    page = client.get(
        "/compare", params={"kind": "channels", "machine": "h100-8", "channels": many}
    )
    assert page.status_code == 200
    assert len(read) == 2
    nine = ",".join(f"c{i}" for i in range(9))
    response = client.get("/compare", params={"kind": "channels", "channels": nine})
    assert response.status_code == 422  # a page, saying why
    assert "at most 8" in response.text


def test_unknown_api_paths_and_methods_answer_in_the_error_body(client: TestClient) -> None:
    missing = client.get("/api/v1/no-such-thing")
    assert (missing.status_code, missing.json()["error"]) == (404, "NotFound")
    wrong = client.delete("/api/v1/runs")
    assert (wrong.status_code, wrong.json()["error"]) == (405, "MethodNotAllowed")
    assert "allow" in wrong.headers
    assert client.get("/no-such-page").status_code == 404  # pages keep Starlette's answer
