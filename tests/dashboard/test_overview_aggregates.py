"""The overview marks the cells whose aggregate has an open finding, linking to its group."""

from fastapi.testclient import TestClient

from tests.anomalies.test_aggregate_findings import nightly
from tests.anomalies.test_aggregate_triage import BREAKING


def test_a_cell_with_an_open_aggregate_finding_links_to_its_group(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    link = 'title="An open aggregate finding on this cell">finding</a>'
    for index in range(4):
        nightly(client, ingest_headers, index)
    assert link not in client.get("/").text
    nightly(client, ingest_headers, 4, BREAKING)
    (found,) = client.get("/api/v1/aggregate-findings").json()["items"]
    text = client.get("/").text
    assert text.count(link) == 1  # the pass rate's cell only
    assert f'<a class="tag regression" href="/alerts?group={found["group_id"]}" {link}' in text
    nightly(client, ingest_headers, 5)  # recovered: no longer open
    assert link not in client.get("/").text
