"""Query strings the API refuses, each a 422 at its location, and the schema saying so."""

import re

import pytest
from fastapi.testclient import TestClient

from app.api.validation import NUL_FREE
from tests.test_api_fuzz import openapi_document

pytestmark = pytest.mark.both_dialects


@pytest.mark.parametrize("path", ["/api/v1/benchmarks", "/api/v1/series"])
@pytest.mark.parametrize("project", ["", "-x", "a b", "x" * 65])
def test_a_project_filter_no_project_can_have_is_refused(
    client: TestClient, path: str, project: str
) -> None:
    answer = client.get(path, params={"project": project})
    assert answer.status_code == 422, answer.text
    assert [e["loc"] for e in answer.json()["errors"]] == ["query.project"]


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v1/benchmarks", "model"),
        ("/api/v1/series", "machine"),
        ("/api/v1/runs", "commit"),
        ("/api/v1/regressions", "suite"),
        ("/api/v1/run-anomalies", "machine"),
    ],
)
def test_a_nul_in_a_query_string_is_a_422_at_its_place(
    client: TestClient, path: str, name: str
) -> None:
    # On Postgres a NUL reaching a text comparison is a DataError, a 500.
    answer = client.get(path, params={name: "h100\x00"})
    assert answer.status_code == 422, answer.text
    assert [e["loc"] for e in answer.json()["errors"]] == [f"query.{name}"]


def test_the_schema_declares_what_the_api_takes_of_a_query() -> None:
    paths = openapi_document()["paths"]
    for path in ("/api/v1/benchmarks", "/api/v1/series"):
        parameters = {p["name"]: p["schema"] for p in paths[path]["get"]["parameters"]}
        project = parameters["project"]["anyOf"][0]
        assert project["minLength"] == 1
        assert "pattern" in project
        assert parameters["model"]["anyOf"][0]["pattern"] == NUL_FREE
    assert re.fullmatch(NUL_FREE, "h100-8")
    assert not re.fullmatch(NUL_FREE, "h100\x00")
