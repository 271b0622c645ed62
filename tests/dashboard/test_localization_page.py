"""A finding's localization on the dashboard (issue 28 point 6): the alert
group's rows name their newest localization, its page shows the culprit (escaped, a link only
when http(s)), costs, chart and probes; and the "Localize" form is for triage only."""

import json
import re
from collections.abc import Iterator
from typing import Any

import plotly.graph_objects as go
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.config import Settings
from app.core.db import Database
from app.dashboard import page_figures
from app.dashboard.localization_page import PROBES_SHOWN
from app.localization import service
from app.localization.models import Localization, LocalizationProbe
from app.main import create_app
from tests.conftest import make_token
from tests.dashboard.test_subscriptions_page import sign_in
from tests.localization.test_requests import _nightlies, _regression

EVIL = "<script>alert(1)</script>"
GOOD, BAD = 10.0, 13.0
COMMIT = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"


@pytest.fixture
def web(settings: Settings) -> Iterator[TestClient]:
    """A browser-like client of the app that does not follow redirects."""
    application = create_app(settings)
    with TestClient(application, follow_redirects=False) as client:
        yield client
    application.state.database.dispose()


def worker_regression(client: TestClient, database: Database, model: str = "resnet50") -> Any:
    """A 30% step of a case a benchwatch worker measures (its runs a worker's uploads)."""
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest', name='worker')}"}
    _nightlies(client, headers, model=model)
    return _regression(client, model)


def samples(level: float, count: int = 10) -> list[float]:
    return [level * (1 + 0.002 * (i % 5)) for i in range(count)]


def finished(
    database: Database,
    regression_id: int,
    culprit: dict[str, Any] | None = None,
    *,
    extra_probes: int = 0,
) -> int:
    """A localization of the regression, finished: a culprit commit of torch, four probes."""
    culprit = culprit or {
        "kind": "commit",
        "component": "torch",
        "commit": COMMIT,
        "title": "Speed up the conv kernel",
        "author": "Ada <ada@example.com>",
        "link": f"https://github.com/pytorch/pytorch/commit/{COMMIT}",
    }
    with database.session_scope() as session:
        localization, _ = service.request_localization(
            session, "regression", regression_id, started_by="test", budget=100, command_suites={}
        )
        localization.state = "culprit_found"
        localization.reason = "torch moves the case; its commit 1a2b3c4d5e6f does"
        localization.answer = {
            **localization.answer,
            "strategy": "bisect",
            "culprit": culprit,
            "strategies": [
                {"strategy": "isolate", "state": "culprit_found", "reason": "torch", "probes": 1},
                {"strategy": "bisect", "state": "culprit_found", "reason": "found", "probes": 1},
            ],
            "preflight": {
                "reproduced": True,
                "p_value": 1e-4,
                "rel_change": 0.3,
                "least": 0.02,
                "good": {"count": 10, "median": GOOD, "spread": 0.002},
                "bad": {"count": 10, "median": BAD, "spread": 0.002},
                "reason": "the step shows",
            },
        }
        localization.probe_count, localization.repeats = 2, 1
        localization.builds, localization.samples = 4, 40 + 10 * extra_probes
        rows = [
            ("preflight", "last good (reference)", "reference", GOOD, None),
            ("preflight", "first bad (reference)", "reference", BAD, None),
            ("isolate", "torch → 2.6.0.dev20260105", "bad", BAD, 0.3),
            ("bisect", f"{COMMIT[:12]} {culprit.get('title', '')}", "bad", BAD, 0.3),
        ]
        rows += [("bisect", f"extra {i}", "good", GOOD, 0.0) for i in range(extra_probes)]
        session.add_all(
            LocalizationProbe(
                localization_id=localization.id,
                position=position,
                strategy=strategy,
                label=label,
                outcome=outcome,
                samples=samples(level),
                p_good=None if effect is None else 1e-4,
                p_bad=None if effect is None else 0.6,
                step_position=None if effect is None else effect / 0.3,
                effect=effect,
                rounds=2 if position == 2 else 1,
                reason=f"probe {position}",
            )
            for position, (strategy, label, outcome, level, effect) in enumerate(rows)
        )
        session.flush()
        return localization.id


def figure(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="probe-chart">(.*?)</script>', page)
    assert found, "no probe chart"
    drawn: dict[str, Any] = json.loads(found.group(1))
    return drawn


def test_a_finished_localization_on_its_alert_group_and_its_page(
    web: TestClient, database: Database
) -> None:
    step = worker_regression(web, database)
    localization_id = finished(database, step["id"])

    alerts = web.get("/alerts", params={"group": step["group_id"]})
    assert alerts.status_code == 200
    link = f'<a href="/localizations/{localization_id}">Localization {localization_id}</a>'
    assert link in alerts.text  # beside the regression
    assert f"regression {step['id']}: <a" in alerts.text  # and in the group's line
    assert "culprit found" in alerts.text
    assert f"torch commit {COMMIT[:12]} Speed up the conv kernel" in alerts.text
    assert 'action="/localizations"' not in alerts.text  # signed out: no form

    page = web.get(f"/localizations/{localization_id}")
    assert page.status_code == 200
    text = page.text
    assert "culprit found" in text
    assert "torch moves the case" in text
    assert f'href="/alerts?group={step["group_id"]}#regression-{step["id"]}"' in text
    assert f'id="regression-{step["id"]}"' in alerts.text  # the anchor the link goes to
    good_run, bad_run = step["last_good_run_id"], step["first_bad_run_id"]
    assert f'<a href="/runs/{good_run}">run {good_run}</a>' in text
    assert f'<a href="/runs/{bad_run}">run {bad_run}</a>' in text
    assert "2.6.0.dev20260101 → 2.6.0.dev20260105" in text  # the environment diff
    assert f'href="https://github.com/pytorch/pytorch/commit/{COMMIT}"' in text
    assert "Ada &lt;ada@example.com&gt;" in text
    assert "2 probes · 1 repeat · 4 builds · 40 samples" in text
    assert text.count('<tr><td class="num">') == 4  # the probe table's rows
    assert "first bad (reference)" in text
    assert "probe 3" in text

    drawn = figure(text)
    points = [t for t in drawn["data"] if t["mode"] == "markers"]
    assert {t["name"] for t in points} == {"reference", "bad"}
    assert sorted(x for t in points for x in t["x"]) == sorted(
        [0] * 10 + [1] * 10 + [2] * 10 + [3] * 10
    )
    levels = {t["name"]: t["y"] for t in drawn["data"] if t["mode"] == "lines"}
    assert levels == {"good reference median": [GOOD, GOOD], "bad reference median": [BAD, BAD]}

    assert web.get("/localizations/999999").status_code == 404
    assert web.get("/api/v1/localizations/999999").status_code == 404


def test_a_hostile_culprit_stays_text_and_a_javascript_link_no_link(
    web: TestClient, database: Database
) -> None:
    step = worker_regression(web, database)
    culprit = {
        "kind": "commit",
        "component": "torch",
        "commit": COMMIT,
        "title": EVIL,
        "author": '"><img src=x onerror=alert(2)>',
        "link": "javascript:alert(3)",
    }
    localization_id = finished(database, step["id"], culprit)
    for path in (f"/localizations/{localization_id}", f"/alerts?group={step['group_id']}"):
        text = web.get(path).text
        assert EVIL not in text
        assert "<img src=x" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert 'href="javascript:' not in text
    text = web.get(f"/localizations/{localization_id}").text
    assert "javascript:alert(3)" in text  # shown, as text
    assert "the commit</a>" not in text
    assert "\\u0026lt;script\\u0026gt;alert(1)" in text  # the probe's label, in the chart


def test_a_setting_and_an_unknown_culprit_kind_are_shown_by_their_fields(
    web: TestClient, database: Database
) -> None:
    step = worker_regression(web, database)
    setting = {
        "kind": "setting",
        "names": ["inductor.max_autotune"],
        "values": {"inductor.max_autotune": [False, True]},
    }
    first = finished(database, step["id"], setting)
    text = web.get(f"/localizations/{first}").text
    assert "Culprit: setting" in text
    assert "setting inductor.max_autotune false → true" in text
    unknown = {"kind": "kernel", "name": EVIL, "launches": {"before": 3, "after": [4, "<b>"]}}
    second = finished(database, step["id"], unknown)
    text = web.get(f"/localizations/{second}").text
    assert "Culprit: kernel" in text
    assert '<th scope="row">launches</th><td>{&#34;after&#34;: [4, &#34;&lt;b&gt;&#34;]' in text
    assert EVIL not in text
    assert "&lt;script&gt;" in text
    # The alert group's row shows the newest of the finding's localizations.
    alerts = web.get("/alerts", params={"group": step["group_id"]}).text
    assert f"Localization {second}</a>" in alerts
    assert f"Localization {first}</a>" not in alerts


def test_a_localization_of_many_probes_reads_a_page_of_them(
    web: TestClient, database: Database
) -> None:
    step = worker_regression(web, database)
    localization_id = finished(database, step["id"], extra_probes=PROBES_SHOWN)
    text = web.get(f"/localizations/{localization_id}").text
    assert text.count('<tr><td class="num">') == PROBES_SHOWN
    assert "and 4 more probes" in text


def test_the_localize_form_is_for_a_triage_session_and_queues_one(
    web: TestClient, database: Database
) -> None:
    step = worker_regression(web, database)
    fields = {"kind": "regression", "finding": str(step["id"]), "group": str(step["group_id"])}
    signed_out = web.post("/localizations", data={**fields, "csrf": ""})
    assert signed_out.status_code == 403
    assert "Sign in with a" in signed_out.text

    csrf = sign_in(web, database, "ingest")
    page = web.get("/alerts", params={"group": step["group_id"]}).text
    assert 'action="/localizations"' not in page  # no triage scope: no button
    refused = web.post("/localizations", data={**fields, "csrf": csrf})
    assert refused.status_code == 403
    assert "lacks the scope &#39;triage&#39;" in refused.text

    csrf = sign_in(web, database, "triage")
    page = web.get("/alerts", params={"group": step["group_id"]}).text
    assert f'aria-label="Localize regression {step["id"]}"' in page
    assert f'name="csrf" value="{csrf}"' in page
    assert web.post("/localizations", data={**fields, "csrf": "forged"}).status_code == 403
    other_site = web.post(
        "/localizations", data={**fields, "csrf": csrf}, headers={"Origin": "https://evil.example"}
    )
    assert other_site.status_code == 403
    assert web.get("/api/v1/localizations").json()["total"] == 0

    asked = web.post("/localizations", data={**fields, "csrf": csrf})
    assert asked.status_code == 303, asked.text
    made = web.get("/api/v1/localizations").json()["items"]
    assert [(m["state"], m["regression_id"]) for m in made] == [("queued", step["id"])]
    assert asked.headers["location"] == f"/localizations/{made[0]['id']}?done=queued"
    shown = web.get(asked.headers["location"]).text
    assert "Queued for the machine" in shown
    assert "No probe yet" in shown
    assert made[0]["started_by"].startswith("triage (token #")
    page = web.get("/alerts", params={"group": step["group_id"]}).text
    assert f'aria-label="Localize regression {step["id"]}"' not in page  # one is queued
    assert f'Localization {made[0]["id"]}</a>: <span class="tag loc-queued">queued' in page
    again = web.post("/localizations", data={**fields, "csrf": csrf})
    assert again.headers["location"] == f"/localizations/{made[0]['id']}?done=unfinished"


def test_a_refused_localization_is_shown_beside_its_button(
    settings: Settings, database: Database
) -> None:
    application = create_app(settings.model_copy(update={"LOCALIZE_BUDGET": 1}))
    with TestClient(application, follow_redirects=False) as web:
        headers = {"Authorization": f"Bearer {make_token(database, 'ingest', name='ci')}"}
        _nightlies(web, headers, machine="ci-box", model="bert")  # CI's uploads: not measurable
        uploaded = _regression(web, "bert")
        step = worker_regression(web, database)
        csrf = sign_in(web, database, "triage")

        def localize(finding: dict[str, Any]) -> Any:
            fields = {"kind": "regression", "finding": str(finding["id"])}
            fields["group"] = str(finding["group_id"])
            return web.post("/localizations", data={**fields, "csrf": csrf})

        refused = localize(uploaded)
        assert refused.status_code == 200
        assert (
            '<p class="form-error" role="alert">Not localized: no benchwatch worker' in refused.text
        )
        assert f'id="group-{uploaded["group_id"]}"' in refused.text
        assert localize(step).status_code == 303
        with database.session_scope() as session:  # it ends; the machine's budget is spent
            (only,) = session.scalars(select(Localization)).all()
            only.state = "failed"
        spent = localize(step)
        assert spent.status_code == 200
        assert "Not localized: machine h100-8 has run 1 localizations in 24 h" in spent.text
    application.state.database.dispose()


def test_the_probe_chart_is_a_valid_figure_whose_labels_stay_text() -> None:
    drawn = page_figures.probe_chart(
        [(0, "last good (reference)", "reference", [1.0, 1.1]), (1, "<b>x</b>", "halfway", [2.0])],
        (1.05, None),
        "latency",
        "ms",
    )
    go.Figure(drawn)  # plotly checks every property it is given
    assert [t["name"] for t in drawn["data"]] == ["reference", "halfway", "good reference median"]
    assert drawn["data"][1]["hovertext"] == ["&lt;b&gt;x&lt;/b&gt;<br>2 ms"]
    assert drawn["data"][2]["x"] == [-0.5, 1.5]
    assert page_figures.probe_chart([], (None, None), "latency", "ms")["data"] == []


def test_the_suite_runs_page_links_a_localizations_run_to_its_search(
    web: TestClient, database: Database
) -> None:
    step = worker_regression(web, database)
    localization_id = finished(database, step["id"])

    page = web.get("/suite-runs")
    assert page.status_code == 200
    link = f'<a href="/localizations/{localization_id}">localization {localization_id}</a>'
    assert f"{link}: culprit found" in page.text
    assert "of 0 shards" not in page.text  # it has none: the search is its work
