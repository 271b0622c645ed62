"""How pages sit in real Chromium: boxes that must not touch, overlap or grow."""

import itertools

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page

from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.dashboard.test_alerts_coverage import mixed_nightly
from tests.factories import result, run_payload

PLOT = ".js-plotly-plot .main-svg"

Box = dict[str, float]


def overlap(a: Box, b: Box) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def box(page: Page, selector: str) -> Box:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, f"{selector} is not shown"
    return dict(found)


@pytest.fixture
def history(client: TestClient, ingest_headers: dict[str, str]) -> list[int]:
    return post_history(client, ingest_headers, dynamic_bert_slower)


@pytest.mark.usefixtures("history")
def test_the_compare_kinds_stand_apart(page: Page) -> None:
    page.goto("/compare")
    links = page.get_by_role("navigation", name="What to compare").get_by_role("link")
    boxes = [
        dict(b) for b in links.evaluate_all("ls => ls.map(l => l.getBoundingClientRect().toJSON())")
    ]
    assert len(boxes) == 4
    for left, right in itertools.pairwise(boxes):
        same_line = abs(left["y"] - right["y"]) < 1
        assert not same_line or right["x"] - (left["x"] + left["width"]) >= 8


@pytest.mark.usefixtures("history")
def test_the_series_range_buttons_keep_off_the_title(page: Page) -> None:
    page.goto("/series?model=bert&precision=bf16&metric=latency")
    page.wait_for_selector(PLOT)
    title = box(page, ".gtitle")
    for button in page.locator(".rangeselector .button").all():
        found = button.bounding_box()
        assert found is not None
        assert not overlap(dict(found), title)


def test_the_scatter_log_axes_write_their_ticks_in_full(
    page: Page, client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """Left to right, each label's number grows: a minor tick reads "20", not "2"."""
    cases = [
        result(f"m{i}", value=value * factor, config=config)
        for i, value in enumerate((3.0, 9.0, 25.0, 70.0, 200.0))
        for config, factor in (("eager", 1.0), ("dynamic", 1.1))
    ]
    answer = client.post("/api/v1/runs", json=run_payload("wide", cases), headers=ingest_headers)
    assert answer.status_code == 201, answer.text
    page.goto("/compare?kind=configs&base_config=eager&new_config=dynamic")
    page.wait_for_selector(PLOT)
    script = "ts => ts.map(t => [t.getBoundingClientRect().x, t.textContent])"
    ticks = page.locator(".xtick text").evaluate_all(script)
    assert len(ticks) >= 2
    values = [float(text.replace("\u2212", "-")) for _, text in sorted(ticks)]
    assert values == sorted(values), values
    assert len(set(values)) == len(values), values


def test_a_coverage_badge_is_a_line_high(
    page: Page, client: TestClient, ingest_headers: dict[str, str]
) -> None:
    mixed_nightly(client, ingest_headers)
    page.goto("/?machine=h100-8")
    badge = page.locator(".tag.coverage").first
    found = badge.bounding_box()
    assert found is not None
    line = box(page, ".tag.now_fails")
    assert found["height"] <= line["height"] + 1
