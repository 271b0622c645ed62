"""Annotations on the pages: drawn on the series chart, listed beside alert groups in their
window, added and deleted through the /annotations page's form."""

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import make_token, sign_in

SERIES = "/series?model=bert&precision=bf16&metric=latency"
# The history's runs are 12 hours apart from 2026-01-01; the step's last good run is the 25th
# (2026-01-13 00:00), its first bad run the 26th (2026-01-13 12:00).
IN_WINDOW = {"at": "2026-01-13T06:00:00Z", "machine": "h100-8", "text": "driver 550 upgrade"}
OUTAGE = {
    "at": "2026-01-03T00:00:00Z",
    "ends_at": "2026-01-04T00:00:00Z",
    "text": "<b>lab</b> outage",
}
ELSEWHERE = {"at": "2026-01-13T06:00:00Z", "machine": "a100-1", "text": "a100 node swap"}
OTHER_CHANNEL = {
    "at": "2026-01-13T07:00:00Z",
    "machine": "h100-8",
    "channel": "weekly",
    "text": "weekly reimage",
}


@pytest.fixture
def annotated(client: TestClient, ingest_headers: dict[str, str], database: Database) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)
    headers = {"Authorization": f"Bearer {make_token(database, 'triage', name='ops')}"}
    for body in (IN_WINDOW, OUTAGE, ELSEWHERE, OTHER_CHANNEL):
        answer = client.post("/api/v1/annotations", json=body, headers=headers)
        assert answer.status_code == 201, answer.text


def figure(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="series-figure">(.*?)</script>', page)
    assert found
    drawn: dict[str, Any] = json.loads(found.group(1))
    return drawn


@pytest.mark.usefixtures("annotated")
def test_the_series_chart_draws_the_annotations_that_apply(client: TestClient) -> None:
    page = client.get(SERIES)
    assert page.status_code == 200
    layout = figure(page.text)["layout"]
    shapes = {s["name"]: s for s in layout["shapes"]}
    labels = {a["name"]: a for a in layout["annotations"]}
    assert len(shapes) == 2  # the machine's event and the global outage; not the others
    event = next(s for s in shapes.values() if s["type"] == "line")
    assert event["x0"].startswith("2026-01-13T06:00")
    assert event["yref"] == "paper"
    span = next(s for s in shapes.values() if s["type"] == "rect")
    assert span["x0"].startswith("2026-01-03T00:00")
    assert span["x1"].startswith("2026-01-04T00:00")
    hovers = [a["hovertext"] for a in labels.values()]
    assert any("driver 550 upgrade" in h and "h100-8" in h for h in hovers)
    # The user's text is drawn as typed: plotly would read its tags.
    assert any("&lt;b&gt;lab&lt;/b&gt; outage" in h and "everywhere" in h for h in hovers)
    assert not any("a100 node swap" in h or "weekly reimage" in h for h in hovers)
    assert "driver 550 upgrade" in page.text  # listed under the chart too
    assert html.escape("<b>lab</b> outage") in page.text


@pytest.mark.usefixtures("annotated")
def test_the_nightly_chart_leaves_out_the_weekly_channels(client: TestClient) -> None:
    layout = figure(client.get(SERIES + "&channel=nightly").text)["layout"]
    assert len(layout["shapes"]) == 2


def test_the_chart_draws_at_most_fifty(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)
    headers = {"Authorization": f"Bearer {make_token(database, 'triage')}"}
    for hour in range(60):
        body = {"at": f"2026-01-05T{hour % 24:02d}:{hour // 24:02d}:00Z", "text": f"n{hour}"}
        assert client.post("/api/v1/annotations", json=body, headers=headers).status_code == 201
    assert len(figure(client.get(SERIES).text)["layout"]["shapes"]) == 50


@pytest.mark.usefixtures("annotated")
def test_the_alerts_page_lists_the_annotations_in_a_groups_window(client: TestClient) -> None:
    page = client.get("/alerts").text
    aside = re.search(r'<aside class="annotations".*?</aside>', page, re.S)
    assert aside
    assert "driver 550 upgrade" in aside.group()
    assert "h100-8" in aside.group()
    for outside in ("outage", "a100 node swap", "weekly reimage"):
        assert outside not in aside.group()


def test_a_projects_chart_and_alerts_leave_out_another_projects_annotations(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)  # the default project's
    headers = {"Authorization": f"Bearer {make_token(database, 'triage', name='ops')}"}
    notes = {"nlp": "nlp team reimage", "default": "our driver bump", None: "lab-wide outage"}
    for project, text in notes.items():
        body = IN_WINDOW | {"text": text, "project": project}
        answer = client.post("/api/v1/annotations", json=body, headers=headers)
        assert answer.status_code == 201, answer.text
    page = client.get(SERIES)
    hovers = " ".join(a["hovertext"] for a in figure(page.text)["layout"]["annotations"])
    assert "our driver bump" in hovers
    assert "lab-wide outage" in hovers  # every project's
    assert "nlp team reimage" not in hovers
    assert "nlp team reimage" not in page.text  # nor listed under the chart
    alerts = client.get("/alerts").text
    aside = re.search(r'<aside class="annotations".*?</aside>', alerts, re.S)
    assert aside
    assert "our driver bump" in aside.group()
    assert "lab-wide outage" in aside.group()
    assert "nlp team reimage" not in aside.group()


@pytest.fixture
def web(settings: Settings) -> Iterator[TestClient]:
    """A browser-like client that does not follow redirects."""
    application = create_app(settings)
    with TestClient(application, follow_redirects=False) as test_client:
        yield test_client
    application.state.database.dispose()


def fields(csrf: str, **changes: str) -> dict[str, str]:
    return {
        "csrf": csrf,
        "at": "2026-01-13T06:00",
        "ends_at": "",
        "machine": "",
        "channel": "",
        "text": "cuda 12.8 everywhere",
        "url": "https://wiki.example/cuda",
        **changes,
    }


def test_the_page_form_adds_and_deletes(web: TestClient, database: Database) -> None:
    assert web.post("/annotations", data=fields("")).status_code == 403  # signed out
    assert "Sign in" in web.get("/annotations").text
    read_csrf = sign_in(web, database, "read")
    assert web.post("/annotations", data=fields(read_csrf)).status_code == 403
    web.cookies.clear()
    csrf = sign_in(web, database, "triage")
    assert web.post("/annotations", data=fields("not-the-value")).status_code == 403
    refused = web.post("/annotations", data=fields(csrf, url="javascript:alert(1)"))
    assert refused.status_code == 200  # the form again, with why
    assert "Not added" in refused.text
    assert "http(s) URL" in refused.text
    assert web.get("/api/v1/annotations").json()["total"] == 0

    added = web.post("/annotations", data=fields(csrf))
    assert added.status_code == 303
    assert added.headers["location"] == "/annotations?done=added"
    (stored,) = web.get("/api/v1/annotations").json()["items"]
    assert stored["at"].startswith("2026-01-13T06:00:00")  # typed as UTC
    assert stored["machine"] is None
    assert stored["created_by"].startswith("triage (token #")
    assert "dashboard session #" in stored["created_by"]
    page = web.get("/annotations?done=added").text
    assert "Annotation added." in page
    assert 'href="https://wiki.example/cuda"' in page

    gone = web.post(f"/annotations/{stored['id']}/delete", data={"csrf": csrf})
    assert gone.status_code == 303
    assert web.get("/api/v1/annotations").json()["total"] == 0
    missing = web.post(f"/annotations/{stored['id']}/delete", data={"csrf": csrf})
    assert missing.status_code == 404
