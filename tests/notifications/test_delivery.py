"""From a detected regression to the notice a receiver gets: the outbox, in process.

Real detection on a real history, a real local HTTP receiver; the
sweep is run by hand at chosen times where the test is about timing.
"""

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies.models import AlertGroup, Regression
from app.core.config import Settings
from app.core.db import Database, utcnow
from app.core.queue import InProcessPublisher
from app.jobs import SWEEP_SILENCE
from app.main import create_app
from app.notifications import delivery as delivery_module
from app.notifications import dispatch, jobs, outbound
from app.notifications.message import finding_line
from app.notifications.models import Delivery, DeliveryAttempt, Notice, Subscription
from app.notifications.receivers import Outcome
from app.notifications.render import Renderer
from tests.anomalies.test_failures import nightly as failing_nightly
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import make_token
from tests.notifications.receiver import Received, receiving
from tests.notifications.test_email import Recorder, parse, smtp_server


@pytest.fixture
def notify_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "RECEIVER_ALLOW": "127.0.0.1",
            "NOTIFY_GROUP_WAIT_S": 0.0,
            "NOTIFY_SWEEP_S": 0.0,  # the tests sweep when they mean to
            "DETECTION_SWEEP_S": 0.0,
            "DELIVERY_BACKOFF_S": 0.0,
            "PUBLIC_URL": "https://bw.example",
        }
    )


@contextmanager
def serving_app(settings: Settings) -> Iterator[TestClient]:
    application = create_app(settings)
    with TestClient(application) as test_client:
        yield test_client
    application.state.database.dispose()


@pytest.fixture
def app_client(notify_settings: Settings) -> Iterator[TestClient]:
    with serving_app(notify_settings) as test_client:
        yield test_client


def admin(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'admin', name='admin')}"}


def subscribe(client: TestClient, database: Database, **fields: Any) -> dict[str, Any]:
    body = {"name": "bert owners", "match": {"model": "bert"}, **fields}
    response = client.post("/api/v1/subscriptions", json=body, headers=admin(database))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def settle(client: TestClient) -> None:
    """Let the in-process jobs (and the jobs they queue) finish."""
    publisher = client.app.state.publisher  # type: ignore[attr-defined]
    assert isinstance(publisher, InProcessPublisher)
    for _ in range(4):
        publisher.drain()


def detect_bert_regression(client: TestClient, database: Database) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    post_history(client, headers, dynamic_bert_slower)
    settle(client)


def sweep(
    database: Database, settings: Settings, after_s: float = 0.0, start: datetime | None = None
) -> dispatch.Swept:
    """A sweep ``after_s`` seconds after ``start`` (default: now)."""
    with database.session_scope() as session:
        return dispatch.sweep(session, settings, (start or utcnow()) + timedelta(seconds=after_s))


def deliver_due(database: Database, settings: Settings) -> None:
    """Attempt every delivery that is due, as the tasks the sweep queues would."""
    with database.session_scope() as session:
        due = list(session.scalars(select(Delivery.id).where(Delivery.state == "pending")))
    for delivery_id in due:
        jobs.deliver(database, settings, delivery_id=delivery_id)


def received_events(received: list[Received]) -> list[str]:
    return [r.json()["event"] for r in received]


def failed_test_delivery(
    app_client: TestClient, database: Database, status: int, due: datetime
) -> int:
    """A test notice's delivery whose one attempt got ``status``; its retry due at ``due``."""
    with receiving(statuses=[status]) as hook:
        created = subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        sent = app_client.post(
            f"/api/v1/subscriptions/{created['id']}/test", headers=admin(database)
        )
        hook.wait_for(1)
        settle(app_client)
    (listed,) = sent.json()["deliveries"]
    with database.session_scope() as session:
        session.get_one(Delivery, listed["id"]).next_attempt_at = due
    delivery_id: int = listed["id"]
    return delivery_id


def signature_ok(secret: str, received: Any) -> bool:
    """The Standard Webhooks signature, recomputed here from the spec."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{received.headers['webhook-id']}.{received.headers['webhook-timestamp']}."
    digest = hmac.new(key, signed.encode() + received.body, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(digest).decode()
    return expected in received.headers["webhook-signature"].split(" ")


def test_a_detected_regression_reaches_its_subscriber_once(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    with receiving() as hook:
        created = subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        subscribe(
            app_client,
            database,
            name="resnet only",
            match={"model": "resnet50"},
            receivers=[{"kind": "webhook", "url": hook.url + "/other"}],
        )
        detect_bert_regression(app_client, database)
        (notice,) = hook.wait_for(1)
        body = notice.json()
        assert body["version"] == 1
        assert body["event"] == "opened"
        assert body["id"] == notice.headers["webhook-id"]
        assert body["subscription"] == {
            "id": created["id"],
            "name": "bert owners",
            "owner": "",
            "revision": 1,
        }
        assert [f["model"] for f in body["findings"]] == ["bert"]
        assert body["findings"][0]["config"] == "dynamic"
        assert body["findings"][0]["history"][body["findings"][0]["first_bad_index"]] > 10.5
        assert body["group"]["machine"] == "h100-8"
        assert body["url"] == f"https://bw.example/alerts?group={body['group']['id']}"
        assert signature_ok(created["receivers"][0]["secrets"][0], notice)

        for _ in range(2):  # more sweeps, a retried detection: nothing new
            sweep(database, notify_settings)
            deliver_due(database, notify_settings)
        settle(app_client)
        assert len(hook.received) == 1

    log = app_client.get(
        f"/api/v1/subscriptions/{created['id']}/notices", headers=admin(database)
    ).json()
    (listed,) = log["items"]
    assert (listed["event"], listed["state"], listed["revision"]) == ("opened", "sent", 1)
    (delivery,) = listed["deliveries"]
    assert (delivery["state"], delivery["attempts"], delivery["last_status"]) == (
        "delivered",
        1,
        200,
    )
    assert "/hook" not in delivery["target"]  # a URL's path can be its credential


def test_the_first_notice_waits_for_the_group_to_settle(
    database: Database, notify_settings: Settings
) -> None:
    waiting = notify_settings.model_copy(update={"NOTIFY_GROUP_WAIT_S": 600.0})
    with receiving() as hook, serving_app(waiting) as app_client:
        subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        detect_bert_regression(app_client, database)
        # From the notice's planning: detection may take more than 10 s on a loaded machine.
        with database.session_scope() as session:
            planned = session.scalars(select(Notice.created_at)).one()
        for after_s, sent in ((590, 0), (601, 1)):
            with database.session_scope() as session:
                at = planned + timedelta(seconds=after_s)
                assert dispatch.sweep(session, waiting, at).sent == sent, after_s
        deliver_due(database, waiting)
        assert received_events(hook.received) == ["opened"]


def test_a_receiver_that_fails_three_times_gets_one_notice(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    with receiving(statuses=[500, 503, 429]) as hook:
        created = subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        detect_bert_regression(app_client, database)
        for _ in range(6):
            deliver_due(database, notify_settings)
        received = hook.wait_for(4)
        assert len({r.headers["webhook-id"] for r in received}) == 1  # one notice, 4 tries
    with database.session_scope() as session:
        (delivery,) = session.scalars(select(Delivery)).all()
        assert (delivery.state, delivery.attempts) == ("delivered", 4)
        statuses = session.scalars(
            select(DeliveryAttempt.status).order_by(DeliveryAttempt.id)
        ).all()
        assert statuses == [500, 503, 429, 200]
        assert session.get_one(Subscription, created["id"]).revision == 1


def test_a_410_switches_the_receiver_off(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    with receiving(statuses=[410]) as hook:
        created = subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        detect_bert_regression(app_client, database)
        hook.wait_for(1)
        deliver_due(database, notify_settings)
    stored = app_client.get(
        f"/api/v1/subscriptions/{created['id']}", headers=admin(database)
    ).json()
    assert stored["revision"] == 2
    assert stored["receivers"][0]["disabled"] is True
    assert "410" in stored["receivers"][0]["disabled_reason"]
    with database.session_scope() as session:
        assert session.scalars(select(Delivery.state)).all() == ["failed"]


def test_a_silence_holds_the_notice_back(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='oncall')}"}
    silence = {
        "matchers": {"model": "bert", "config": "dynamic"},
        "ends_at": (utcnow() + timedelta(hours=4)).isoformat(),
        "comment": "known-bad nightly, revert in flight",
    }
    made = app_client.post("/api/v1/silences", json=silence, headers=triage)
    assert made.status_code == 201, made.text
    assert made.json()["state"] == "active"
    with receiving() as hook:
        subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        detect_bert_regression(app_client, database)
        deliver_due(database, notify_settings)
        assert hook.received == []
        with database.session_scope() as session:
            assert session.scalars(select(Notice.state)).all() == ["silenced"]
        listed = app_client.get("/api/v1/silences", params={"state": "active"}).json()
        assert [s["comment"] for s in listed["items"]] == [silence["comment"]]
        expired = app_client.delete(f"/api/v1/silences/{made.json()['id']}", headers=triage)
        assert expired.json()["state"] == "expired"
        # Ending it early releases what it held, now (before: at the 24 h reminder), once:
        # the sweep it queues sends it.
        settle(app_client)
        deliver_due(database, notify_settings)
        (released,) = hook.wait_for(1)
        assert released.json()["event"] == "opened"
        sweep(database, notify_settings)
        deliver_due(database, notify_settings)
        assert len(hook.received) == 1
    with database.session_scope() as session:
        assert session.scalars(select(Notice.state)).all() == ["sent"]


def test_a_digest_gathers_the_groups_and_goes_at_its_hour(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    # Every sweep's time from one start: a test that crossed the hour between reading the
    # clock and sweeping found its digest due at the "before" sweep.
    start = utcnow()
    next_hour = (start + timedelta(hours=1)).hour
    with receiving() as hook:
        subscribe(
            app_client,
            database,
            receivers=[{"kind": "webhook", "url": hook.url}],
            when={"digest_hours": [next_hour]},
        )
        detect_bert_regression(app_client, database)
        assert sweep(database, notify_settings, start=start).sent == 0  # before its hour
        assert sweep(database, notify_settings, after_s=3600, start=start).sent == 1
        assert sweep(database, notify_settings, after_s=3700, start=start).sent == 0
        deliver_due(database, notify_settings)
        (digest,) = hook.wait_for(1)
    body = digest.json()
    assert body["event"] == "digest"
    assert [g["machine"] for g in body["groups"]] == ["h100-8"]
    assert [f["model"] for f in body["groups"][0]["findings"]] == ["bert"]


def test_reminders_escalation_and_the_fix_are_told_once_each(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    day = notify_settings.NOTIFY_REMIND_S
    with receiving() as hook:
        subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        detect_bert_regression(app_client, database)
        hook.wait_for(1)
        for after in (day + 60, day + 120, 2 * day + 60, 2 * day + 120):
            sweep(database, notify_settings, after_s=after)
            deliver_due(database, notify_settings)
        events = received_events(hook.received)
        assert events == ["opened", "reminder", "escalation"]  # in place of reminder 2
        assert hook.received[1].json()["headline"].startswith("Still untriaged: ")

        with database.session_scope() as session:
            group_id = session.scalars(select(AlertGroup.id)).one()
        triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='oncall')}"}
        for _ in range(2):
            fixed = app_client.patch(
                f"/api/v1/alert-groups/{group_id}", json={"status": "fixed"}, headers=triage
            )
            assert fixed.status_code == 200, fixed.text
            settle(app_client)
            sweep(database, notify_settings, after_s=3 * day)
            deliver_due(database, notify_settings)
        events = received_events(hook.received)
        assert events == ["opened", "reminder", "escalation", "resolved"]


def test_a_test_notice_and_a_redelivery(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    with receiving() as hook:
        created = subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        sent = app_client.post(
            f"/api/v1/subscriptions/{created['id']}/test", headers=admin(database)
        )
        assert sent.status_code == 202, sent.text
        (first,) = hook.wait_for(1)
        assert first.json()["event"] == "test"
        (delivery,) = sent.json()["deliveries"]
        again = app_client.post(
            f"/api/v1/deliveries/{delivery['id']}/redeliver", headers=admin(database)
        )
        assert again.status_code == 202, again.text
        second = hook.wait_for(2)[1]
        assert second.headers["webhook-id"] == first.headers["webhook-id"]
    shown = app_client.get(f"/api/v1/deliveries/{delivery['id']}", headers=admin(database))
    assert [a["status"] for a in shown.json()["log"]] == [200, 200]


def test_a_loopback_receiver_is_refused_unless_allowed(
    client: TestClient, database: Database
) -> None:
    body = {"name": "local", "receivers": [{"kind": "webhook", "url": "http://127.0.0.1:9/x"}]}
    refused = client.post("/api/v1/subscriptions", json=body, headers=admin(database))
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["loc"] == "receivers[0].url"


def test_an_attempt_that_outlived_its_lease_leaves_the_delivery_to_the_newer_one(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    now = utcnow()
    first, second = now + timedelta(minutes=5), now + timedelta(minutes=10)
    delivery_id = failed_test_delivery(app_client, database, 500, now - timedelta(seconds=5))
    with database.session_scope() as session:
        assert delivery_module.claim(session, delivery_id, first)
    with database.session_scope() as session:  # held: nobody else sends it
        assert not delivery_module.claim(session, delivery_id, second)
    with database.session_scope() as session:  # the first attempt hangs past its lease
        session.get_one(Delivery, delivery_id).lease_until = now - timedelta(seconds=2)
    with database.session_scope() as session:
        assert delivery_module.claim(session, delivery_id, second)
    ok = Outcome(ok=True, status=200)
    with database.session_scope() as session:
        late = delivery_module.record(session, notify_settings, delivery_id, ok, utcnow(), first)
        assert late == "sending"  # the late report is logged, and changes nothing
    with database.session_scope() as session:
        done = delivery_module.record(session, notify_settings, delivery_id, ok, utcnow(), second)
        assert done == "delivered"
        attempts = session.scalars(
            select(DeliveryAttempt.status).where(DeliveryAttempt.delivery_id == delivery_id)
        ).all()
        assert attempts == [500, 200, 200]


def test_a_detected_regression_is_mailed_through_a_real_smtp_server(
    database: Database, notify_settings: Settings
) -> None:
    recorder = Recorder()
    with smtp_server(recorder) as port:
        mailing = notify_settings.model_copy(
            update={"SMTP_HOST": "127.0.0.1", "SMTP_PORT": port, "SMTP_STARTTLS": False}
        )
        with serving_app(mailing) as app_client:
            subscribe(app_client, database, receivers=[{"kind": "email", "to": ["nlp@bw.example"]}])
            detect_bert_regression(app_client, database)
            deadline = time.monotonic() + 20
            while not recorder.received and time.monotonic() < deadline:
                time.sleep(0.05)
    (envelope,) = recorder.received
    assert envelope.rcpt_tos == ["nlp@bw.example"]
    mail = parse(envelope)
    assert mail["Subject"].startswith("1 regression on h100-8 (nightly)")
    text = mail.get_body(("plain",))
    assert text is not None
    assert "bert" in text.get_content()
    images = [part for part in mail.walk() if part.get_content_type() == "image/png"]
    assert len(images) == 1  # the step chart
    with database.session_scope() as session:
        assert session.scalars(select(Delivery.state)).all() == ["delivered"]


def set_state(database: Database, state: str) -> None:
    """The one step's state, changed in its own transaction (as confirmation does)."""
    with database.session_scope() as session:
        session.scalars(select(Regression)).one().state = state


def wait_for_mail(recorder: Recorder, count: int) -> None:
    deadline = time.monotonic() + 20
    while len(recorder.received) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_notices_say_suspected_or_confirmed_and_a_confirmation_is_told_once(
    database: Database, notify_settings: Settings
) -> None:
    recorder = Recorder()
    with smtp_server(recorder) as port, receiving() as hook:
        mailing = notify_settings.model_copy(
            update={"SMTP_HOST": "127.0.0.1", "SMTP_PORT": port, "SMTP_STARTTLS": False}
        )
        with serving_app(mailing) as app_client:
            receivers = [
                {"kind": "email", "to": ["nlp@bw.example"]},
                {"kind": "webhook", "url": hook.url},
            ]
            match = {"model": "bert", "state": ["suspected", "confirmed"]}
            subscribe(app_client, database, match=match, receivers=receivers)
            detect_bert_regression(app_client, database)
            wait_for_mail(recorder, 1)
            (opened,) = hook.wait_for(1)
            (finding,) = opened.json()["findings"]
            assert finding["state"] == "confirmed"
            assert 0 <= finding["p_value"] <= 1
            with database.session_scope() as session:
                step = session.scalars(select(Regression)).one()
                line = finding_line(Renderer(session, "https://bw.example").finding(step, None))
                assert line.endswith(f", confirmed (p={step.p_value:.2g})")
                # A suspected step says so, in the headline too.
                step.state = "suspected"
                suspected = Renderer(session, "https://bw.example").notice(
                    session.scalars(select(Notice)).one(),
                    session.scalars(select(Subscription)).one(),
                    [step],
                )
                assert suspected["findings"][0]["state"] == "suspected"
                assert suspected["headline"].endswith("(suspected)")
                assert ", suspected (p=" in finding_line(suspected["findings"][0])
                session.rollback()
            set_state(database, "suspected")  # as told: the count is the same, nothing planned
            settle(app_client)
            set_state(database, "confirmed")  # before: no notice, the count did not grow
            sweep(database, mailing)
            deliver_due(database, mailing)
            wait_for_mail(recorder, 2)
            (_, confirmed) = hook.wait_for(2)
            assert confirmed.json()["event"] == "confirmed"
            assert confirmed.json()["headline"].startswith("Confirmed: 1 regression")
            set_state(database, "confirmed")  # a retried confirmation changes nothing
            sweep(database, mailing)
            deliver_due(database, mailing)
            settle(app_client)
            assert len(hook.received) == 2
    mails = [parse(envelope) for envelope in recorder.received]
    assert len(mails) == 2
    assert str(mails[1]["Subject"]).strip().startswith("Confirmed: 1 regression")
    for mail in mails:
        text = mail.get_body(("plain",))
        assert text is not None
        assert ", confirmed (p=" in text.get_content()
    with database.session_scope() as session:
        events = session.scalars(select(Notice.event).order_by(Notice.id)).all()
        assert events == ["opened", "confirmed"]


def test_cases_that_start_failing_are_one_notice_and_passing_again_resolves_it(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    with receiving() as hook:
        subscribe(
            app_client,
            database,
            name="failures",
            match={"kind": "failure", "min_rel_change": 0.05},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        for index in range(3):
            failing_nightly(app_client, headers, index, {})
        breaking = {"alexnet": "oom", "bert": "accuracy", "t5": "oom"}
        failing_nightly(app_client, headers, 3, breaking)
        settle(app_client)
        (opened,) = hook.wait_for(1)
        body = opened.json()
        assert body["event"] == "opened"
        assert body["headline"].startswith("3 failures on h100-8 (nightly): ")
        assert sorted((f["model"], f["failure"]) for f in body["findings"]) == [
            ("alexnet", "failed"),
            ("bert", "accuracy"),
            ("t5", "failed"),
        ]
        assert {f["kind"] for f in body["findings"]} == {"failure"}
        oom = next(f for f in body["findings"] if f["model"] == "t5")
        assert oom["reason"] == "CUDA out of memory"
        assert oom["last_passing_run"]["url"].startswith("https://bw.example/runs/")

        failing_nightly(app_client, headers, 4, {})
        settle(app_client)
        events = received_events(hook.wait_for(2))
        assert events == ["opened", "resolved"]


def test_a_silent_machine_is_told_and_its_return_resolves_it(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    with receiving() as hook:
        subscribe(
            app_client,
            database,
            name="fleet",
            match={"kind": "machine_silent"},
            receivers=[{"kind": "webhook", "url": hook.url}],
        )
        start = utcnow() - timedelta(days=3, hours=36)  # the last of 4 runs: 3 days ago
        for index in range(4):
            failing_nightly(app_client, headers, index, {}, start)
        publisher = app_client.app.state.publisher  # type: ignore[attr-defined]
        publisher.publish(SWEEP_SILENCE, {})  # as beat would
        settle(app_client)
        (told,) = hook.wait_for(1)
        body = told.json()
        assert body["event"] == "opened"
        assert body["headline"].startswith("h100-8 (nightly) silent: no run since ")
        (finding,) = body["findings"]
        assert (finding["kind"], finding["expected_every_s"]) == ("machine_silent", 43200.0)
        failing_nightly(app_client, headers, 4, {}, start + timedelta(days=3))
        settle(app_client)
        assert received_events(hook.wait_for(2)) == ["opened", "resolved"]


def test_a_receiver_that_asks_to_wait_is_left_alone_that_long(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    lease = utcnow() + timedelta(minutes=5)
    delivery_id = failed_test_delivery(app_client, database, 503, utcnow())
    with database.session_scope() as session:
        assert delivery_module.claim(session, delivery_id, lease)
    asked = Outcome(ok=False, status=429, retry=True, retry_after_s=600.0)
    now = utcnow()
    with database.session_scope() as session:
        assert (
            delivery_module.record(session, notify_settings, delivery_id, asked, now, lease)
            == "pending"
        )
        waits = session.get_one(Delivery, delivery_id).next_attempt_at - now
        assert timedelta(seconds=600) <= waits < timedelta(seconds=601)


def test_retry_after_reads_seconds_and_dates() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert outbound.retry_after("120", now) == 120.0
    assert outbound.retry_after("Tue, 01 Dec 2026 12:01:30 GMT", now) == 90.0
    assert outbound.retry_after("Tue, 01 Dec 2026 11:00:00 GMT", now) == 0.0  # past: now
    assert outbound.retry_after("soon", now) is None
    assert outbound.retry_after(None, now) is None


def test_a_reminder_past_the_triage_deadline_says_it_is_overdue(
    app_client: TestClient, database: Database, notify_settings: Settings
) -> None:
    # Due as soon as found (Monday 00:00 if found at a weekend), no escalation in between.
    late = notify_settings.model_copy(update={"TRIAGE_DAYS": 0, "NOTIFY_ESCALATE_S": 0.0})
    with receiving() as hook:
        subscribe(app_client, database, receivers=[{"kind": "webhook", "url": hook.url}])
        detect_bert_regression(app_client, database)
        hook.wait_for(1)
        sweep(database, late, after_s=3 * late.NOTIFY_REMIND_S + 60)  # past any weekend
        deliver_due(database, late)
        _, reminder = hook.wait_for(2)
    body = reminder.json()
    assert body["event"] == "reminder"
    assert body["headline"].startswith("Still untriaged, overdue: ")
    assert body["group"]["overdue"] == "triage"
    assert (
        body["group"]["triage_due_at"] >= body["group"]["created_at"]
    )  # Monday 00:00 at a weekend
