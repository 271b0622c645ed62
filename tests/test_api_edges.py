"""The API's edges: every invalid parameter is a 4xx in the one error body, every read bounded."""

import base64
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.conftest import make_token
from tests.factories import example_run

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
