"""A localization probe keeps the case's kernel profile in its environment, and its kernels
are diffed against the last good reference's (issue 29 points 1 and 3)."""

from typing import Any

from fastapi.testclient import TestClient

from app.core.db import Database
from app.localization import lifecycle
from app.localization.lifecycle import Costs, ProbeRow
from tests.localization.test_lifecycle import _asked


def profile(softmax_us: float, wall_us: float) -> dict[str, Any]:
    """A probe's profile as its command's output gives it (a payload's kernel_profiles[i])."""
    kernels = [
        {"name": "triton_red_fused__softmax_0", "calls": 1.0, "time_us": softmax_us, "graph": ""},
        {"name": "sm90_xmma_gemm_bf16bf16", "calls": 2.0, "time_us": 5000.0, "graph": ""},
    ]
    return {"timing": "device", "calls": 5, "wall_us": wall_us, "kernels": kernels}


def probe(label: str, outcome: str, kernels: dict[str, Any] | None) -> ProbeRow:
    return ProbeRow("isolate", label, {}, outcome, [1.0, 1.1], 1, "", kernels=kernels)


def test_a_probes_kernels_against_the_last_good_references(
    client: TestClient,
    database: Database,
    worker_headers: dict[str, str],
    triage_headers: dict[str, str],
) -> None:
    made = _asked(client, worker_headers, triage_headers)
    with database.session_scope() as session:
        lease = lifecycle.start(session, made["id"], "node-a", 60).lease
        assert lease
        for row in (
            probe("last good (reference)", "reference", profile(600.0, 10_000.0)),
            probe("good with triton from bad", "bad", profile(1380.0, 11_000.0)),
            probe("good with torch from bad", "good", None),  # its command gave no profile
            # The profiler's time moved this profile's wall against its slower softmax.
            probe("good with driver from bad", "bad", profile(1380.0, 9_000.0)),
        ):
            assert lifecycle.record_probe(session, made["id"], lease, row, Costs(1, 0, 1, 2))
    detail = client.get(f"/api/v1/localizations/{made['id']}").json()
    reference, moved, bare, preempted = detail["probes"]
    assert reference["kernel_profile"]["kernels"][1]["name"] == "softmax"  # merged, identity
    assert bare["kernel_profile"] is None
    url = f"/api/v1/localizations/{made['id']}/probes/{moved['position']}/kernels"
    answer = client.get(url)
    assert answer.status_code == 200, answer.text
    assert answer.json()["base_position"] == reference["position"]
    assert answer.json()["diff"]["headline"] == "78% of the step is in `fused_softmax` (+130%)"
    # The kernels that slowed rank first whichever way the walls moved: a localization looks
    # for what made the case worse. A wall that moved the other way gives no share.
    url = f"/api/v1/localizations/{made['id']}/probes/{preempted['position']}/kernels"
    against = client.get(url).json()["diff"]
    assert (against["toward"], against["step_us"], against["headline"]) == ("slower", -1000.0, "")
    top = against["kernels"][0]
    assert (top["name"], top["change"], top["share"]) == ("softmax", "slower", None), top
    missing = client.get(f"/api/v1/localizations/{made['id']}/probes/{bare['position']}/kernels")
    assert missing.status_code == 404
    assert "has no kernel profile" in missing.json()["detail"]
    assert client.get(f"/api/v1/localizations/{made['id']}/probes/9/kernels").status_code == 404
