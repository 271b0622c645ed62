"""Issue 28 point 6, the notices: a finished localization is told to the subscriptions that were
told of its finding's group, once, by every receiver kind, escaped, and its commit's author is
mentioned (by GitHub login only) where a subscription asked for it.

Real detection on a worker's nightlies, a localization asked through the API and finished
through its lifecycle, the outbox swept by the in-process jobs; real local receivers: an HTTP
server for webhooks and Slack, an SMTP server, a fake GitHub API, a Mattermost for Apprise,
the Atom feed. Both databases.
"""

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import feedparser
import pytest
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from pydantic import SecretStr
from sqlalchemy import select

from app.core.config import Settings
from app.core.db import Database, utcnow
from app.dashboard.subscriptions import SubscriptionForm, form_of, parse_subscription
from app.localization import lifecycle
from app.localization.lifecycle import Costs
from app.notifications import config_file, dispatch, planning, service
from app.notifications.message import Message, culprit_text, lines_of, text_body
from app.notifications.models import Notice, Subscription
from app.notifications.receivers import email, github_issue, slack
from tests.conftest import make_token
from tests.localization.test_requests import _nightlies, _regression
from tests.notifications.receiver import Receiver, receiving
from tests.notifications.test_apprise import Mattermost, mattermost  # noqa: F401 (fixture)
from tests.notifications.test_delivery import deliver_due, serving_app, settle, sweep
from tests.notifications.test_email import Recorder, parse, smtp_server
from tests.notifications.test_github_issue import TOKEN, FakeGitHub, github  # noqa: F401

TITLE = "<script>alert(1)</script> [click](https://evil.example) <!here> @channel *now*"
AUTHOR = "Eve <b>Evil</b> <eve@evil.example>"
LINK = "javascript:alert(document.cookie)"
SHA = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
CULPRIT = {
    "kind": "commit",
    "component": "torch",
    "commit": SHA,
    "title": TITLE,
    "author": AUTHOR,
    "author_login": "eve-dev",
    "date": "2026-01-04T10:00:00+00:00",
    "link": LINK,
    "good_commit": "0" * 40,
    "bad_commit": "f" * 40,
}
ANSWER = {"strategy": "commit_bisection", "culprit": CULPRIT, "commits": 16}
COSTS = Costs(probe_count=7, repeats=2, builds=5, samples=90)
LIVE_MENTION = re.compile(r"(?<![\w\u200b])@(channel|here|everyone|eve-dev)\b|<!(channel|here)")


@dataclass
class Served:
    """The app, its settings, and the receivers every subscription here sends to."""

    client: TestClient
    settings: Settings
    hooks: Receiver
    mail: Recorder
    github: FakeGitHub
    mattermost: Mattermost


@contextmanager
def served(
    settings: Settings,
    github: FakeGitHub,  # noqa: F811
    mattermost: Mattermost,  # noqa: F811
    **changes: Any,
) -> Iterator[Served]:
    mail = Recorder()
    with smtp_server(mail) as port, receiving() as hooks:
        configured = settings.model_copy(
            update={
                "RECEIVER_ALLOW": "127.0.0.1",
                "NOTIFY_GROUP_WAIT_S": 0.0,
                "NOTIFY_SWEEP_S": 0.0,
                "DETECTION_SWEEP_S": 0.0,
                "DELIVERY_BACKOFF_S": 0.0,
                "PUBLIC_URL": "https://bw.example",
                "SMTP_HOST": "127.0.0.1",
                "SMTP_PORT": port,
                "SMTP_STARTTLS": False,
                "GITHUB_API_URL": github.base,
                "GITHUB_TOKEN": SecretStr(TOKEN),
                **changes,
            }
        )
        with serving_app(configured) as client:
            yield Served(client, configured, hooks, mail, github, mattermost)


@pytest.fixture
def app(settings: Settings, github: FakeGitHub, mattermost: Mattermost) -> Iterator[Served]:  # noqa: F811
    with served(settings, github, mattermost) as serving:
        yield serving


def admin(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'admin', name='admin')}"}


def subscribe(app: Served, database: Database, name: str, **fields: Any) -> dict[str, Any]:
    body = {"name": name, "match": {"model": "resnet50"}, **fields}
    answer = app.client.post("/api/v1/subscriptions", json=body, headers=admin(database))
    assert answer.status_code == 201, answer.text
    made: dict[str, Any] = answer.json()
    return made


def every_receiver(app: Served, tag: str, address: str) -> list[dict[str, Any]]:
    """One receiver of each kind, told apart by ``tag`` (a path, a token, an address)."""
    return [
        {"kind": "webhook", "url": f"{app.hooks.url}/{tag}"},
        {"kind": "slack", "url": f"{app.hooks.url}/slack/{tag}"},
        {"kind": "email", "to": [address]},
        {"kind": "github_issue", "repository": "perf/bench"},
        {"kind": "feed"},
        {"kind": "apprise", "url": f"mmost://127.0.0.1:{app.mattermost.port}/{tag}"},
    ]


def detected(app: Served, database: Database) -> int:
    """A worker's nightlies with a 30% step on resnet50, detected and told; the step's id."""
    worker = {"Authorization": f"Bearer {make_token(database, 'ingest', name='worker')}"}
    _nightlies(app.client, worker)
    settle(app.client)
    step: int = _regression(app.client)["id"]
    return step


def localize(
    app: Served, database: Database, step: int, start: bool = True
) -> tuple[int, str | None]:
    """A localization asked for ``step`` (and started on its machine): its id and lease."""
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='on-call')}"}
    body = {"kind": "regression", "id": step}
    asked = app.client.post("/api/v1/localizations", json=body, headers=triage)
    assert asked.status_code == 201, asked.text
    localization_id: int = asked.json()["id"]
    if not start:
        return localization_id, None
    with app_database(app).session_scope() as session:
        claim = lifecycle.start(session, localization_id, "node-a", 60)
    return localization_id, claim.lease


def app_database(app: Served) -> Database:
    found: Database = app.client.app.state.database  # type: ignore[attr-defined]
    return found


def finish(app: Served, localization_id: int, lease: str | None, **fields: Any) -> bool:
    """Finish it in the app's database (whose commit publishes the notice sweep), and settle."""
    values: dict[str, Any] = {
        "state": "culprit_found",
        "reason": "torch alone moves the case; commit 1a2b3c4d bisected",
        "answer": ANSWER,
        "costs": COSTS,
        **fields,
    }
    with app_database(app).session_scope() as session:
        done = lifecycle.finish(session, localization_id, lease, **values)
    settle(app.client)
    return done


def bodies(hooks: Receiver, path: str) -> list[dict[str, Any]]:
    return [r.json() for r in hooks.received if r.path == path]


def localized(notices: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [n for n in notices if n["event"] == "localized"]
    return found


def test_every_receiver_tells_the_localization_once_escaped_and_mentions_only_when_asked(
    app: Served, database: Database
) -> None:
    quiet = subscribe(app, database, "resnet owners", receivers=every_receiver(app, "a", "a@bw.x"))
    loud = subscribe(
        app,
        database,
        "resnet mentions",
        mention_author=True,
        receivers=every_receiver(app, "b", "b@bw.x"),
    )
    assert (quiet["mention_author"], loud["mention_author"]) == (False, True)
    bert = [{"kind": "webhook", "url": f"{app.hooks.url}/bert"}]
    subscribe(app, database, "bert owners", match={"model": "bert"}, receivers=bert)
    step = detected(app, database)
    app.hooks.wait_for(4)  # both subscriptions' webhook and Slack told of the group
    late = subscribe(
        app, database, "late", receivers=[{"kind": "webhook", "url": f"{app.hooks.url}/late"}]
    )
    localization_id, lease = localize(app, database, step)
    assert finish(app, localization_id, lease)
    assert not finish(app, localization_id, lease)  # the finish delivered again: nothing
    assert not finish(app, localization_id, None)
    app.hooks.wait_for(8)
    deliver_due(app_database(app), app.settings)  # nothing left to do: all were delivered

    with app_database(app).session_scope() as session:
        notices = session.execute(
            select(Notice.subscription_id, Notice.event, Notice.state, Notice.localization_id)
            .where(Notice.event == "localized")
            .order_by(Notice.subscription_id)
        ).all()
        assert notices == [
            (quiet["id"], "localized", "sent", localization_id),
            (loud["id"], "localized", "sent", localization_id),
        ]
        # Planned again (a retried transaction): the event's key is taken.
        assert planning.plan_localized(session, [localization_id]) == 0
    assert bodies(app.hooks, "/hook/bert") == []
    assert bodies(app.hooks, "/hook/late") == []  # it selects the step, but was never told
    with app_database(app).session_scope() as session:
        assert not session.scalars(select(Notice).where(Notice.subscription_id == late["id"])).all()

    page = f"https://bw.example/localizations/{localization_id}"
    payloads = {tag: localized(bodies(app.hooks, f"/hook/{tag}")) for tag in ("a", "b")}
    for tag, payload in payloads.items():
        assert payload["url"] == page
        assert payload["headline"].startswith("Localized (culprit found): resnet50 latency on")
        told = payload["localization"]
        assert (told["id"], told["url"], told["state"]) == (localization_id, page, "culprit_found")
        assert told["finding"] == {"kind": "regression", "id": step}
        assert (told["machine"], told["case"]["model"]) == ("h100-8", "resnet50")
        assert (told["probes"], told["repeats"], told["builds"], told["samples"]) == (7, 2, 5, 90)
        assert told["culprit"]["title"] == TITLE  # JSON carries it as it is
        assert told["culprit"]["link"] == LINK  # data: no receiver links it (below)
        assert [f["model"] for f in payload["findings"]] == ["resnet50"]
        assert payload["group"]["machine"] == "h100-8", tag
    assert payloads["a"]["localization"]["culprit"]["author"] == "Eve <b>Evil</b>"
    assert payloads["a"]["localization"]["mention"] is None
    assert "eve@evil.example" not in json.dumps(payloads["a"])
    assert payloads["b"]["localization"]["culprit"]["author"] == AUTHOR
    assert payloads["b"]["localization"]["mention"] == "@eve-dev"

    # Slack: the lines escaped, the @ broken, no button to a javascript: link.
    for tag in ("a", "b"):
        (message,) = [
            b for b in bodies(app.hooks, f"/hook/slack/{tag}") if "Localized" in b["text"]
        ]
        section = next(b for b in message["blocks"] if b["type"] == "section")["text"]["text"]
        assert "*Culprit:* torch commit 1a2b3c4d5e6f" in section
        assert "&lt;script&gt;" in section
        assert "<" not in section  # so no <url|text> link and no <!here>
        assert not LIVE_MENTION.search(section), section
        actions = [b for b in message["blocks"] if b["type"] == "actions"]
        assert [e["url"] for b in actions for e in b["elements"]] == [page]
        assert ("cc @\u200beve-dev" in section) == (tag == "b")
        assert ("eve@\u200bevil.example" in section) == (tag == "b")

    # Email: text and HTML, escaped, no link to javascript:, the address only where asked.
    mails = {tuple(e.rcpt_tos): parse(e) for e in app.mail.received}
    for address, tag in (("a@bw.x", "a"), ("b@bw.x", "b")):
        (mail,) = [m for to, m in mails.items() if to == (address,) and "Localized" in m["Subject"]]
        plain = mail.get_body(("plain",))
        html_part = mail.get_body(("html",))
        assert plain is not None
        assert html_part is not None
        text, html = plain.get_content(), html_part.get_content()
        assert f'Culprit: torch commit {SHA[:12]} "{TITLE}"' in text
        assert "Cost: 7 probes, 2 repeats, 5 builds, 90 samples" in text
        assert page in text
        assert "javascript:" not in text
        assert "<script>" not in html
        assert "&lt;script&gt;" in html
        assert not [a for a in re.findall(r"<a\b[^>]*>", html) if "javascript" in a]
        assert f'href="{page}"' in html
        assert ("eve@evil.example" in text) == (tag == "b")
        assert ("cc @eve-dev" in text) == (tag == "b")
        assert mail["In-Reply-To"]  # threads with the group's first notice

    # GitHub: comments on the group's issue (one per group and repository, opened by the first
    # notice), none a new issue; the live mention only where asked.
    assert [i["title"] for i in app.github.issues.values() if "Localized" in i["title"]] == []
    comments = [
        c
        for issue in app.github.issues.values()
        for c in issue["comments"]
        if c.startswith("**Localized")
    ]
    assert len(comments) == 2
    for comment in comments:
        rendered = MarkdownIt("commonmark").render(comment)
        assert "<script>" not in rendered
        assert "javascript" not in " ".join(re.findall(r'href="([^"]*)"', rendered))
        assert "evil.example" not in " ".join(re.findall(r'href="([^"]*)"', rendered))
        assert page in rendered
        assert not re.search(r"(?<![\w\u200b])@(channel|here)", rendered)
    mentions = [c for c in comments if re.search(r"(?<![\w\u200b])@eve-dev\b", c)]
    assert len(mentions) == 1
    assert "eve@\u200bevil" in mentions[0]  # the address, as text that mentions nobody
    (other,) = [c for c in comments if c is not mentions[0]]
    assert "eve-dev" not in other
    assert "evil.example" not in other

    # Apprise (Mattermost): Markdown, escaped, the login as text that pings nobody.
    posts = [p for path, p in app.mattermost.posts if "Localized" in p["text"]]
    assert len(posts) == 2
    for post in posts:
        assert not LIVE_MENTION.search(post["text"]), post["text"]
        links = re.findall(r'href="([^"]*)"', MarkdownIt("commonmark").render(post["text"]))
        assert not [link for link in links if "javascript" in link or "evil" in link]

    # The feed: the entry as text, escaped in the XML.
    token = quiet["receivers"][4]["token"]
    answer = app.client.get(f"/feeds/{token}.atom")
    assert b"<script>" not in answer.content
    parsed: Any = feedparser.parse(answer.content)
    entry = next(e for e in parsed.entries if e.title.startswith("Localized"))
    assert entry.link == page
    assert "Culprit: torch commit" in entry.summary


def test_a_localization_waits_for_the_notice_that_tells_the_group(
    settings: Settings,
    database: Database,
    github: FakeGitHub,  # noqa: F811
    mattermost: Mattermost,  # noqa: F811
) -> None:
    wait_s = 3600.0
    with served(settings, github, mattermost, NOTIFY_GROUP_WAIT_S=wait_s) as app:
        receivers = [
            {"kind": "webhook", "url": f"{app.hooks.url}/a"},
            {"kind": "github_issue", "repository": "perf/bench"},
        ]
        subscribe(app, database, "resnet", receivers=receivers)
        step = detected(app, database)
        localization_id, _ = localize(app, database, step, start=False)
        # It could not start (its worker failed before it held a lease): failed, told too.
        assert finish(
            app, localization_id, None, state="failed", reason="no such provider", answer={}
        )
        with app_database(app).session_scope() as session:
            rows = session.execute(select(Notice.event, Notice.state)).all()
        states = dict(rows)
        assert states == {"opened": "planned", "localized": "planned"}
        now = utcnow()
        db = app_database(app)
        # Both wait; then the group settled: the opened notice goes, and this sweep does not
        # send the localization yet (its issue is opened by that notice's delivery); the next does.
        for after_s, sent in ((0, 0), (wait_s, 1), (wait_s + 30, 1)):
            with db.session_scope() as session:
                at = now + timedelta(seconds=after_s)
                assert dispatch.sweep(session, app.settings, at).sent == sent, after_s
            settle(app.client)
            deliver_due(db, app.settings)
        events = [r.json()["event"] for r in app.hooks.wait_for(2)]
        assert events == ["opened", "localized"]
        told = app.hooks.received[1].json()
        assert told["localization"]["state"] == "failed"
        assert told["localization"]["culprit"] is None
        assert told["headline"] == "Localized (failed): resnet50 latency on h100-8 (nightly)"
        (issue,) = app.github.issues.values()  # opened by the first notice, commented on next
        (comment,) = issue["comments"]
        assert "**Localization:** [failed](https://bw.example/localizations/" in comment
        assert "**Why:** no such provider" in comment


def test_a_subscription_not_told_of_the_group_gets_nothing(
    settings: Settings,
    database: Database,
    github: FakeGitHub,  # noqa: F811
    mattermost: Mattermost,  # noqa: F811
) -> None:
    with served(settings, github, mattermost) as app:
        hook = [{"kind": "webhook", "url": f"{app.hooks.url}/x"}]
        silenced = subscribe(app, database, "silenced", receivers=hook)
        other = subscribe(
            app, database, "other machine", match={"machine": "a100-*"}, receivers=hook
        )
        triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
        muted = {
            "matchers": {"model": "resnet50"},
            "ends_at": (utcnow() + timedelta(hours=1)).isoformat(),
            "comment": "maintenance",
        }
        assert app.client.post("/api/v1/silences", json=muted, headers=triage).status_code == 201
        step = detected(app, database)
        localization_id, lease = localize(app, database, step)
        assert finish(app, localization_id, lease)
        with app_database(app).session_scope() as session:
            rows = session.execute(
                select(Notice.subscription_id, Notice.event, Notice.state).order_by(Notice.id)
            ).all()
        # The silenced one was never told (its notice silenced), the other selects nothing of
        # the group: no localized notice for either.
        assert (silenced["id"], "opened", "silenced") in rows
        assert [r for r in rows if r[1] == "localized"] == []
        assert not [r for r in rows if r[0] == other["id"]]
        assert app.hooks.received == []


def test_a_digest_carries_the_localization_in_its_groups_section(
    settings: Settings,
    database: Database,
    github: FakeGitHub,  # noqa: F811
    mattermost: Mattermost,  # noqa: F811
) -> None:
    start = utcnow()  # every sweep's time from one start, as in test_delivery's digest
    next_hour = (start + timedelta(hours=1)).hour
    with served(settings, github, mattermost) as app:
        subscribe(
            app,
            database,
            "daily",
            when={"digest_hours": [next_hour]},
            receivers=[{"kind": "webhook", "url": f"{app.hooks.url}/d"}],
        )
        step = detected(app, database)
        localization_id, lease = localize(app, database, step)
        assert finish(app, localization_id, lease, state="not_reproduced", answer={})
        assert sweep(app_database(app), app.settings, start=start).sent == 0  # before its hour
        assert sweep(app_database(app), app.settings, after_s=3600, start=start).sent == 1
        deliver_due(app_database(app), app.settings)
        (digest,) = app.hooks.wait_for(1)
    body = digest.json()
    assert body["event"] == "digest"
    opened, told = body["groups"]
    assert (opened["event"], told["event"]) == ("opened", "localized")
    assert "localization" not in opened
    assert told["localization"]["state"] == "not_reproduced"
    assert told["headline"].startswith("Localized (not reproduced): resnet50 latency")
    text = text_body(Message(body["id"], body))
    assert "Localization: not reproduced" in text
    assert f"https://bw.example/localizations/{localization_id}" in text


def test_the_opt_in_is_validated_stored_and_read_back(app: Served, database: Database) -> None:
    url = "/api/v1/subscriptions"
    body = {"name": "x", "receivers": [{"kind": "feed"}], "mention_author": "yes"}
    refused = app.client.post(url, json=body, headers=admin(database))
    assert refused.status_code == 422
    assert [e["loc"] for e in refused.json()["errors"]] == ["mention_author"]
    made = app.client.post(url, json={**body, "mention_author": False}, headers=admin(database))
    assert made.json()["mention_author"] is False
    one = f"{url}/{made.json()['id']}"
    changed = app.client.patch(one, json={"mention_author": True}, headers=admin(database))
    assert (changed.json()["mention_author"], changed.json()["revision"]) == (True, 2)
    assert app.client.patch(one, json={"owner": "o"}, headers=admin(database)).json()[
        "mention_author"
    ]


def told(culprit: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    base = {
        "id": 5,
        "url": "https://bw.example/localizations/5",
        "state": "culprit_found",
        "reason": "",
        "finding": {"kind": "regression", "id": 3},
        "machine": "h100-a",
        "case": {"suite": "tb", "model": "m", "metric": "latency", "rel_change": 0.2},
        "culprit": culprit,
        "mention": None,
        "probes": 3,
        "repeats": 0,
        "builds": 2,
        "samples": 30,
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("culprit", "line"),
    [
        (
            {"kind": "component", "names": ["triton"], "versions": {"triton": ["3.1", "3.2"]}},
            "component triton 3.1 -> 3.2",
        ),
        (
            {
                "kind": "component",
                "names": ["torch", "triton"],
                "versions": {"torch": ["2.5", "2.6"], "triton": ["3.1", "3.2"]},
            },
            "component torch 2.5 -> 2.6; triton 3.1 -> 3.2 (only together)",
        ),
        (
            {
                "kind": "commit_range",
                "component": "torch",
                "commits": ["a" * 40, "b" * 40],
                "good_commit": "c" * 40,
                "bad_commit": "d" * 40,
            },
            f"torch: one of 2 commits that do not build ({'a' * 12}, {'b' * 12}),"
            f" between {'c' * 12} and {'d' * 12}",
        ),
        (
            {
                "kind": "setting",
                "names": ["inductor.cpp.simdlen"],
                "values": {"inductor.cpp.simdlen": [None, 1]},
            },
            "compiler setting inductor.cpp.simdlen null -> 1",
        ),
        ({"kind": "oracle", "note": "<b>x</b>"}, "oracle: note: <b>x</b>"),
    ],
)
def test_each_culprit_kind_in_words(culprit: dict[str, Any], line: str) -> None:
    assert culprit_text(culprit) == line
    (found,) = [one for one in lines_of(told(culprit)) if one.label == "Culprit"]
    assert (found.text, found.link) == (line, None)


@pytest.mark.parametrize("mention", ["@@x", "@-x", "@a b", "@x<b>", "@" + "a" * 40, "eve", None])
def test_only_a_github_login_is_ever_a_live_mention(mention: str | None) -> None:
    payload = {
        "headline": "h",
        "url": "https://bw.example/x",
        "event": "localized",
        "findings": [],
        "localization": told(CULPRIT, mention=mention),
    }
    message = Message("notice-1", payload)
    assert "cc " not in github_issue.comment_body(message)
    assert not [line for line in text_body(message).splitlines() if line.startswith("cc ")]
    assert "cc @" not in json.dumps(slack.blocks(message))
    assert '<th align="left">cc</th>' not in email.html_body(message, None)
    # A login is one: mentioned live on GitHub, as text elsewhere.
    good = Message("notice-1", {**payload, "localization": told(CULPRIT, mention="@eve-dev")})
    assert "\ncc @eve-dev\n" in github_issue.comment_body(good)
    assert "cc @eve-dev" in text_body(good).splitlines()


def test_the_subscription_form_keeps_the_opt_in(app: Served, database: Database) -> None:
    """The dashboard's form sends every field: an edit that left it out would switch it off."""
    form = SubscriptionForm(name="f", receivers='[{"kind": "feed"}]', mention_author=True)
    values, errors = parse_subscription(form)
    assert errors == []
    assert values is not None
    assert values["mention_author"] is True
    with app_database(app).session_scope() as session:
        made = service.create_subscription(session, values, service.accept_any)
        assert form_of(made).mention_author is True
        again, _ = parse_subscription(form_of(made))
        assert again is not None
        assert again["mention_author"] is True
    unticked, _ = parse_subscription(SubscriptionForm(name="g", receivers='[{"kind": "feed"}]'))
    assert unticked is not None
    assert unticked["mention_author"] is False


def test_the_subscriptions_file_declares_the_opt_in(
    app: Served, database: Database, tmp_path: Path
) -> None:
    path = tmp_path / "subscriptions.yaml"
    path.write_text(
        "subscriptions:\n"
        "  - {name: loud, receivers: [{kind: feed}], mention_author: true}\n"
        "  - {name: quiet, receivers: [{kind: feed}]}\n"
    )
    with app_database(app).session_scope() as session:
        config_file.load(session, path, service.accept_any)
    with app_database(app).session_scope() as session:
        query = select(Subscription.name, Subscription.mention_author)
        stored = dict(session.execute(query).all())
    assert stored == {"loud": True, "quiet": False}
    path.write_text("subscriptions:\n  - {name: x, receivers: [{kind: feed}], mention_author: 2}\n")
    with pytest.raises(config_file.FileError, match=r"subscriptions\[0\]\.mention_author"):
        config_file.read(path)
