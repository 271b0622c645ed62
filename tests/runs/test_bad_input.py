"""Every kind of bad input gets a 4xx that says what and where, and nothing is written."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from starlette.requests import Request

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.models import Benchmark, Machine, Metric, Result, Run, Series
from tests.factories import example_run, result, run_payload

pytestmark = pytest.mark.both_dialects

Mutation = Callable[[dict[str, Any]], None]


def stored_rows(database: Database) -> int:
    with database.session_scope() as session:
        return sum(
            session.scalar(select(func.count()).select_from(m)) or 0
            for m in (Run, Result, Series, Benchmark, Metric, Machine)
        )


def set_result(index: int, field: str, value: Any) -> Mutation:
    def mutate(payload: dict[str, Any]) -> None:
        payload["results"][index][field] = value

    return mutate


def drop_result_field(index: int, field: str) -> Mutation:
    def mutate(payload: dict[str, Any]) -> None:
        del payload["results"][index][field]

    return mutate


def set_top(field: str, value: Any) -> Mutation:
    def mutate(payload: dict[str, Any]) -> None:
        payload[field] = value

    return mutate


def set_machine(field: str, value: Any) -> Mutation:
    def mutate(payload: dict[str, Any]) -> None:
        payload["machine"][field] = value

    return mutate


def set_package(name: str, version: str) -> Mutation:
    def mutate(payload: dict[str, Any]) -> None:
        payload["environment"]["packages"][name] = version

    return mutate


def duplicate_row(payload: dict[str, Any]) -> None:
    payload["results"].append(dict(payload["results"][0], value=9.9))


CASES: dict[str, tuple[Mutation, int, str, int | None, str]] = {
    # name: (mutation, status, field, result_index, words in the message)
    "value as string": (set_result(0, "value", "4.21"), 422, "value", 0, "number"),
    "batch_size as float": (set_result(0, "batch_size", 32.5), 422, "batch_size", 0, "integer"),
    "missing metric": (drop_result_field(2, "metric"), 422, "metric", 2, "required"),
    "missing key": (lambda p: p.pop("key"), 422, "key", None, "required"),
    "missing machine": (lambda p: p.pop("machine"), 422, "machine", None, "required"),
    "negative sample": (set_result(0, "samples", [4.2, -1.0]), 422, "results", 0, "negative"),
    "negative value": (set_result(0, "value", -4.2), 422, "results", 0, "negative"),
    "empty samples": (set_result(0, "samples", []), 422, "samples", 0, "empty"),
    "unknown unit": (set_result(0, "unit", "furlongs"), 422, "unit", 0, "unknown unit"),
    "unknown field": (set_result(1, "colour", "red"), 422, "colour", 1, "extra"),
    "unknown top field": (set_top("owner", "me"), 422, "owner", None, "extra"),
    "unknown precision": (set_result(0, "precision", "fp7"), 422, "precision", 0, "precision"),
    "bad mode": (set_result(0, "mode", "serving"), 422, "mode", 0, "inference"),
    "failed without reason": (set_result(2, "reason", ""), 422, "results", 2, "reason"),
    "ok without value": (drop_result_field(0, "value"), None, "", None, ""),
    "no direction": (
        lambda p: p["results"][0].update(metric="my_score", unit="", higher_is_better=None),
        422,
        "results",
        0,
        "higher_is_better",
    ),
    "empty results": (set_top("results", []), 422, "results", None, "at least 1"),
    "time order": (set_top("finished_at", "2026-11-28T00:00:00Z"), 422, "body", None, "before"),
    "bad device": (lambda p: p["machine"].update(device="tpu"), 422, "device", None, "cuda"),
    "duplicate rows": (duplicate_row, 422, "metric", 3, "duplicates results[0]"),
    # What the columns cannot hold: each failed in the database (a 500) before it was refused.
    "batch_size over 64 bits": (set_result(0, "batch_size", 2**63), 422, "batch_size", 0, "2147"),
    "batch_size over INTEGER": (set_result(0, "batch_size", 2**31), 422, "batch_size", 0, "2147"),
    "gpu_count over INTEGER": (set_machine("gpu_count", 2**31), 422, "gpu_count", None, "2147"),
    "cpu_count over INTEGER": (set_machine("cpu_count", 2**40), 422, "cpu_count", None, "2147"),
    "NUL in a model": (set_result(0, "model", "res\x00net"), 422, "model", 0, "NUL"),
    "NUL in a reason": (set_result(2, "reason", "O\x00M"), 422, "reason", 2, "NUL"),
    "NUL in the key": (set_top("key", "k\x00"), 422, "key", None, "NUL"),
    "NUL in extra": (set_top("extra", {"log": "a\x00b"}), 422, "log", None, "NUL"),
    "NUL in a package": (set_package("tri\x00ton", "3"), 422, "tri\x00ton", None, "NUL"),
    # Triton's (and torch's) version given only in packages fills its 128-character column:
    # on Postgres a longer one was a 500 (StringDataRightTruncation), on SQLite stored.
    "triton version over its column": (
        set_package("triton", "3" * 129),
        422,
        "triton",
        None,
        "128",
    ),
    "torch version over its column": (set_package("torch", "2" * 129), 422, "torch", None, "128"),
    "package version over 256": (set_package("numpy", "2" * 257), 422, "numpy", None, "256"),
    "100 KB package name": (set_package("n" * 100_000, "1"), 422, "packages", None, "name"),
    "empty package name": (set_package("", "1"), 422, "packages", None, "name"),
    "time beyond UTC": (
        set_top("started_at", "0001-01-01T00:00:00+01:00"),
        422,
        "started_at",
        None,
        "range",
    ),
    "time before 1970": (
        set_top("started_at", "1969-12-31T23:59:59Z"),
        422,
        "started_at",
        None,
        "1970",
    ),
    "time after 2999": (
        set_top("finished_at", "3000-01-01T00:00:00Z"),
        422,
        "finished_at",
        None,
        "2999",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_payload_is_rejected_with_location(
    case: str, client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    mutate, status, field, index, words = CASES[case]
    payload = example_run()
    mutate(payload)
    if status is None:  # "ok without value": samples still carry it
        assert client.post("/api/v1/runs", json=payload, headers=ingest_headers).is_success
        return
    response = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] in ("ValidationError", "InvalidInput")
    located = [
        e
        for e in body["errors"]
        if e.get("field") == field
        or e["loc"] == field
        or (field == "results" and e["loc"].startswith(f"results[{index}]"))
    ]
    assert located, body
    if index is not None:
        assert located[0]["result_index"] == index
    assert words.lower() in json.dumps(body).lower()
    assert stored_rows(database) == 0


def test_package_versions_at_their_bounds_are_stored(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    payload = example_run()
    payload["environment"]["packages"] = {"triton": "3" * 128, "numpy": "2" * 256, "n" * 128: "1"}
    response = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert response.status_code == 201, response.text
    assert response.json()["environment"]["triton"] == "3" * 128


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(
    token: str, client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    text = json.dumps(example_run())
    for place in ('"value": 4.21', '"samples": [4.2, 4.21, 4.25]'):
        assert place in text
        field = place.split(":")[0]
        bad = text.replace(
            place, f"{field}: {token}" if "value" in field else f"{field}: [4.2, {token}]", 1
        )
        response = client.post(
            "/api/v1/runs",
            content=bad,
            headers={**ingest_headers, "Content-Type": "application/json"},
        )
        assert response.status_code == 422, response.text
        assert "finite number" in response.text
        assert response.json()["errors"][0]["result_index"] == 0
    nested = example_run()
    nested["results"][0]["extra"] = {"nested": {"x": float("nan")}}
    body = json.dumps(nested)  # Python writes NaN
    response = client.post(
        "/api/v1/runs", content=body, headers={**ingest_headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert "nested.x" in response.text
    assert stored_rows(database) == 0


def test_malformed_json_is_400_with_line_and_column(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    text = '{\n  "key": "x",\n  "machine": {,}\n}'
    response = client.post(
        "/api/v1/runs", content=text, headers={**ingest_headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "MalformedJSON"
    assert "line 3 column 15" in response.json()["detail"]
    assert stored_rows(database) == 0


def test_a_bad_row_late_in_a_big_run_stores_nothing(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    rows = [result(model=f"m{i}", value=1.0) for i in range(1500)]
    rows[1499]["unit"] = "parsecs"
    response = client.post("/api/v1/runs", json=run_payload("k", rows), headers=ingest_headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["result_index"] == 1499
    assert stored_rows(database) == 0


def test_contradicting_a_stored_metric_stores_nothing(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    ok = client.post(
        "/api/v1/runs", json=run_payload("a", [result(value=1.0)]), headers=ingest_headers
    )
    assert ok.status_code == 201
    before = stored_rows(database)
    flipped = run_payload("b", [result(model="other", value=1.0, higher_is_better=True)])
    response = client.post("/api/v1/runs", json=flipped, headers=ingest_headers)
    assert response.status_code == 422
    assert "higher_is_better" in response.text
    other_dimension = run_payload("c", [result(model="other", value=1.0, unit="GB")])
    response = client.post("/api/v1/runs", json=other_dimension, headers=ingest_headers)
    assert response.status_code == 422
    assert "cannot be converted" in response.text
    assert stored_rows(database) == before


def test_machine_device_cannot_change(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    assert (
        client.post(
            "/api/v1/runs", json=run_payload("a", [result()]), headers=ingest_headers
        ).status_code
        == 201
    )
    before = stored_rows(database)
    response = client.post(
        "/api/v1/runs", json=run_payload("b", [result()], device="rocm"), headers=ingest_headers
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "machine.device"
    assert stored_rows(database) == before


@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_body_is_413(
    chunked: bool, settings: Settings, database: Database, ingest_headers: dict[str, str]
) -> None:
    small = settings.model_copy(update={"MAX_BODY_BYTES": 2000})
    application = create_app(small)
    body = json.dumps(example_run(url="x" * 3000)).encode()
    with TestClient(application) as client:
        headers = {**ingest_headers, "Content-Type": "application/json"}
        if chunked:
            response = client.post(
                "/api/v1/runs", content=iter([body[:1500], body[1500:]]), headers=headers
            )
        else:
            response = client.post("/api/v1/runs", content=body, headers=headers)
        assert response.status_code == 413
        assert "BENCHWATCH_MAX_BODY_BYTES" in response.json()["detail"]
        assert (
            client.post("/api/v1/runs", json=example_run(), headers=ingest_headers).status_code
            == 201
        )
    application.state.database.dispose()


def test_only_a_body_that_fails_pydantics_json_pass_is_decoded_again(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[bytes] = []
    plain_json = Request.json

    async def spy(request: Request) -> Any:
        decoded.append(await request.body())
        return await plain_json(request)

    monkeypatch.setattr(Request, "json", spy)
    assert (
        client.post("/api/v1/runs", json=example_run(), headers=ingest_headers).status_code == 201
    )
    assert decoded == []  # validated straight from the bytes
    bad = example_run(key="other")
    bad["results"][0]["value"] = "4.21"
    response = client.post("/api/v1/runs", json=bad, headers=ingest_headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "value"
    assert len(decoded) == 1  # FastAPI's own path located the problem


@pytest.mark.parametrize(
    ("body", "message", "where"),
    [
        ('{\n  "key": "x",\n  "extra": ' + "[" * 995 + "]" * 995 + "}", "nesting", "line 3"),
        ('{"key": "x",\n "extra": ' + "[" * 257 + "]" * 257 + "}", "deeper than 256", "line 2"),
        ('{"key": "x",\n "batch_size": ' + "7" * 5000 + "}", "5000 digits", "line 2 column 16"),
        ('{"key": "x",\n "machine": "\xe9"}'.encode("latin-1"), "not UTF-8", "line 2 column 14"),
    ],
    ids=["nested 995 deep", "nested 258 deep", "5,000-digit number", "not UTF-8"],
)
def test_a_body_json_loads_cannot_read_is_400_with_its_place(
    body: str | bytes,
    message: str,
    where: str,
    client: TestClient,
    ingest_headers: dict[str, str],
    database: Database,
) -> None:
    response = client.post(
        "/api/v1/runs", content=body, headers={**ingest_headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "MalformedJSON"
    assert message in response.json()["detail"]
    assert where in response.json()["detail"]
    assert stored_rows(database) == 0


def test_free_form_json_nests_at_most_64_deep(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    def nested(levels: int) -> dict[str, Any]:
        value: dict[str, Any] = {"leaf": 1}
        for _ in range(levels - 1):
            value = {"a": value}
        return value

    def post(payload: dict[str, Any]) -> Any:
        return client.post("/api/v1/runs", json=payload, headers=ingest_headers)

    deepest = example_run(extra=nested(64))
    assert post(deepest).status_code == 201
    stored = stored_rows(database)
    response = post(example_run(key="too-deep", extra=nested(65)))
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["loc"] == "extra"
    assert "nested deeper than 64 levels (at a.a.a." in error["message"]
    assert stored_rows(database) == stored
