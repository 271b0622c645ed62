"""An upload's packages are bounded as a native run's are (issue 26 point 9), on both databases.

A pytorch-v3 dependency whose version is over 64 characters goes to environment.packages under
its own name, and ``triton`` there fills the 128-character column: on Postgres a 200-character
version was a 500, on SQLite it was stored; a 100 KB dependency name was stored.
"""

import json

import pytest
from fastapi.testclient import TestClient

from tests.uploads.test_api import DATA, upload

pytestmark = pytest.mark.both_dialects

V3 = DATA / "pytorch_v3"


@pytest.mark.parametrize(
    ("dependencies", "words"),
    [
        ({"triton": "3" * 200}, "128"),  # over 64: it went to packages.triton, then the column
        ({"n" * 100_000: "1.0"}, "package name"),
    ],
)
def test_an_uploads_packages_are_bounded_too(
    client: TestClient, ingest_headers: dict[str, str], dependencies: dict[str, str], words: str
) -> None:
    record = json.loads((V3 / "constructed__full_stored_row_example.json").read_text())
    record["dependencies"] = dependencies
    status, body = upload(client, ingest_headers, [("v3.json", json.dumps(record).encode())])
    assert status == 422, body
    assert words in json.dumps(body)
