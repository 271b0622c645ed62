"""The run page's environment names the CPU governor, and warns when it is not performance."""

import pytest
from fastapi.testclient import TestClient

from tests.factories import result, run_payload

WARNING = "warning: not <code>performance</code>"
GOVERNORS = {  # what the worker recorded: whether the page warns
    "powersave": True,
    "mixed: performance 0-3, powersave 4-7": True,
    "performance": False,
    "unavailable": False,  # no cpufreq (a VM): nothing the operator can set
}


# A template's logic: one dialect is enough.
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_the_run_page_shows_the_cpu_governor(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for index, governor in enumerate([*GOVERNORS, None]):
        environment = {"channel": "nightly", "torch": "2.6.0", "extra": {"cpu_governor": governor}}
        if governor is None:  # a run from elsewhere (an upload) does not say
            del environment["extra"]
        payload = run_payload(f"gov-{index}", [result(value=1.0)], index=index)
        posted = client.post(
            "/api/v1/runs", json={**payload, "environment": environment}, headers=ingest_headers
        )
        assert posted.status_code == 201, posted.text
        page = client.get(f"/runs/{posted.json()['id']}").text
        assert ('id="cpu-governor"' in page) is (governor is not None), governor
        assert (WARNING in page) is GOVERNORS.get(governor or "", False), governor
        assert governor is None or governor in page
