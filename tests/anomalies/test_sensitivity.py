"""Sensitivity learns from triage, with the evidence shown; a person can turn it off or pin."""

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.anomalies.detectors import DetectorConfig
from app.anomalies.models import SeriesSensitivity
from app.anomalies.sensitivity import Record, adjusted, label_of
from app.core.db import Database
from tests.anomalies.test_service import post_history, regressions
from tests.conftest import make_token


def headers(database: Database, scope: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, scope, name=f'{scope}-person')}"}


def bert_up_and_down(model: str, config: str, index: int) -> dict[str, float]:
    """bert dynamic steps 10% up at run 10, back at 18, up at 26, back at 34."""
    if model == "bert" and config == "dynamic":
        return {"latency": 11.0 if (index // 8) % 2 == 1 and index >= 10 else 10.0}
    return {}


def audit(client: TestClient, database: Database, action: str) -> list[dict[str, Any]]:
    params = {"action": action}
    answer = client.get("/api/v1/audit", params=params, headers=headers(database, "admin"))
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_findings_marked_invalid_make_their_series_less_sensitive_until_a_person_says_no(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    post_history(client, ingest_headers, bert_up_and_down, runs=range(42))
    found = regressions(client)
    assert len(found) >= 4
    series_id = found[0]["series"]["id"]
    assert {r["series"]["id"] for r in found} == {series_id}
    path = f"/api/v1/series/{series_id}/sensitivity"
    fresh = client.get(path).json()
    assert (fresh["factor"], fresh["record"]["labels"]) == (1.0, 0)

    triager = headers(database, "triage")
    for regression in found:
        body = {"status": "invalid"}
        client.patch(f"/api/v1/regressions/{regression['id']}", json=body, headers=triager)
    learnt = client.get(path).json()
    labels = len(found)
    assert learnt["record"] == {
        "labels": labels,
        "invalid": labels,
        "missed": 0,
        "invalid_share": 1.0,
        "words": f"{labels} of the last {labels} findings on this series were invalid",
    }
    assert learnt["factor"] == 2.0  # 1 + the invalid share, at most 2
    defaults = DetectorConfig()
    assert learnt["thresholds"]["min_rel_change"] == pytest.approx(2 * defaults.min_rel_change)
    assert learnt["thresholds"]["noise_multiple"] == pytest.approx(2 * defaults.noise_multiple)
    assert learnt["reason"] == learnt["record"]["words"]
    changes = audit(client, database, "sensitivity.learn")
    assert changes[0]["after"]["factor"] == 2.0  # newest first: each change logged
    words = learnt["record"]["words"]
    alerts = client.get("/alerts", params={"status": "invalid"}).text
    assert words in alerts  # on the alert's rows, and on the series page
    series_page = client.get(
        "/series",
        params={"model": "bert", "metric": "latency", "precision": "bf16", "by": "config"},
    ).text
    assert words in series_page
    assert "x2.00" in series_page

    off = client.put(path, json={"learning": False}, headers=triager).json()
    assert (off["factor"], off["learning"]) == (1.0, False)
    assert off["thresholds"]["min_rel_change"] == defaults.min_rel_change
    pinned = client.put(path, json={"pinned": {"min_rel_change": 0.2}}, headers=triager).json()
    assert pinned["pinned"] == {"min_rel_change": 0.2}
    assert pinned["thresholds"]["min_rel_change"] == 0.2
    back = client.put(path, json={"unpin": True, "learning": True}, headers=triager).json()
    assert (back["pinned"], back["learning"], back["factor"]) == (None, True, 2.0)
    assert len(audit(client, database, "sensitivity.set")) == 3

    shares = client.get("/api/v1/triage-labels", params={"by": "config"}).json()
    assert {s["key"]: s["invalid_share"] for s in shares} == {"dynamic": 1.0}
    by_detector = client.get("/api/v1/triage-labels", params={"by": "detector"}).json()
    assert [s["key"] for s in by_detector] == ["change_point"]


def bert_slower_by_three_percent(model: str, config: str, index: int) -> dict[str, float]:
    if model in ("bert", "resnet50") and config == "default" and index >= 25:
        return {"latency": (10.0 if model == "bert" else 20.0) * 1.03}
    return {}


def test_a_pinned_series_does_not_report_what_its_thresholds_ignore(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    post_history(client, ingest_headers, bert_slower_by_three_percent, runs=range(20))
    (bert,) = client.get(
        "/api/v1/series", params={"model": "bert", "config": "default", "metric": "latency"}
    ).json()["items"]
    pin = {"pinned": {"min_rel_change": 0.05, "min_rel_floor": 0.05}}
    answer = client.put(
        f"/api/v1/series/{bert['id']}/sensitivity", json=pin, headers=headers(database, "triage")
    )
    assert answer.status_code == 200, answer.text
    post_history(client, ingest_headers, bert_slower_by_three_percent, runs=range(20, 40))
    stepped = {r["series"]["benchmark"]["model"] for r in regressions(client)}
    assert stepped == {"resnet50"}  # the same 3% step, found where nothing was pinned


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"pinned": {"min_rel_chnge": 0.1}}, "pinned.min_rel_chnge"),
        ({"pinned": {"window": 2}}, "pinned.window"),
        ({"pinned": {"max_p_value": 0}}, "pinned.max_p_value"),
        ({"learning": "maybe"}, "learning"),
    ],
)
def test_bad_sensitivity_settings_are_refused_where_they_are(
    client: TestClient, database: Database, ingest_headers: dict[str, str], body: Any, loc: str
) -> None:
    post_history(client, ingest_headers, runs=range(3))
    (one, *_) = client.get("/api/v1/series").json()["items"]
    path = f"/api/v1/series/{one['id']}/sensitivity"
    answer = client.put(path, json=body, headers=headers(database, "triage"))
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["loc"] == loc
    assert client.put(path, json={"learning": False}).status_code == 401
    read_only = client.put(path, json={"learning": False}, headers=headers(database, "read"))
    assert read_only.status_code == 403
    missing = client.get("/api/v1/series/99999/sensitivity")
    assert missing.status_code == 404


def test_labels_and_the_learnt_factor() -> None:
    assert label_of("invalid", "ann (token #3, API)", {"name": "change_point"}) == "invalid"
    assert label_of("fixed", "ann (token #3, API)", {"name": "change_point"}) == "real"
    assert label_of("new", "", {"name": "change_point"}) is None
    assert label_of("invalid", "detection: withdrawn", {"name": "change_point"}) is None
    assert label_of("invalid", "correction: run 4 invalidated", {}) is None
    assert label_of("new", "", {"name": "manual"}) == "missed"
    assert Record(labels=3, invalid=3).factor()[0] == 1.0  # too few to learn from
    assert Record(labels=9, invalid=7).factor()[0] == pytest.approx(1 + 7 / 9)
    assert Record(labels=9, invalid=7).words() == (
        "7 of the last 9 findings on this series were invalid"
    )
    assert Record(labels=6, invalid=1, missed=2).factor()[0] == 0.75
    assert Record(labels=6, invalid=2).factor()[0] == 1.0
    config = DetectorConfig()
    learnt = SeriesSensitivity(series_id=1, factor=1.5, learning=True, pinned=None)
    assert adjusted(config, learnt).min_rel_floor == pytest.approx(1.5 * config.min_rel_floor)
    assert adjusted(config, learnt).window == config.window  # not a minimum effect
    pinned = SeriesSensitivity(series_id=1, factor=1.5, learning=True, pinned={"window": 30.0})
    assert adjusted(config, pinned).window == 30
    assert type(adjusted(config, pinned).window) is int
