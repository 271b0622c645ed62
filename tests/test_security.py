"""Issue 12's security points over HTTP: links, headers, sessions, CSRF, who triaged, config."""

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import event, select, update
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.config import DEV_PEPPER, Settings
from app.core.db import Database
from app.main import create_app
from app.runs.models import Run
from app.tokens.auth import SIGN_IN_COOKIE
from app.tokens.models import ApiToken, WebSession
from app.tokens.service import create_token, revoke_token
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import PEPPER, POSTGRES_URL, make_token, serving
from tests.dashboard.test_sign_in import csrf_of, sign_in
from tests.factories import result, run_payload

pytestmark = pytest.mark.both_dialects

HOSTILE_URLS = [
    "javascript:alert(document.cookie)",
    "JavaScript:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "//evil.example/x",
    "/relative/path",
    "https://",
    "http://[::1",
    "https://ci.example/run\x00",
]


def post_run(client: TestClient, headers: dict[str, str], key: str, **fields: Any) -> Any:
    return client.post("/api/v1/runs", json=run_payload(key, [result()], **fields), headers=headers)


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_run_url_that_is_not_http_is_refused_with_its_location(
    client: TestClient, ingest_headers: dict[str, str], url: str
) -> None:
    answer = post_run(client, ingest_headers, "hostile", url=url)
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == ["url"], answer.json()


def test_an_http_run_url_is_kept_and_rendered_as_a_link(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    answer = post_run(client, ingest_headers, "fine", url="https://ci.example/run/1?a=1&b=2")
    assert answer.status_code == 201, answer.text
    page = client.get(f"/runs/{answer.json()['id']}").text
    assert '<a href="https://ci.example/run/1?a=1&amp;b=2" rel="noopener noreferrer">' in page


def test_a_stored_hostile_url_renders_as_text(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    """A row written before the rule (or restored from elsewhere) is checked again on render."""
    run_id = post_run(client, ingest_headers, "old").json()["id"]
    with database.session_scope() as session:
        session.execute(update(Run).where(Run.id == run_id).values(url="javascript:alert(1)"))
    page = client.get(f"/runs/{run_id}").text
    assert "CI job: javascript:alert(1)" in page
    assert 'href="javascript' not in page


@pytest.fixture
def group(client: TestClient, ingest_headers: dict[str, str]) -> int:
    post_history(client, ingest_headers, dynamic_bert_slower)
    groups = client.get("/api/v1/alert-groups").json()["items"]
    assert groups, "the injected regression opened no alert group"
    group_id: int = groups[0]["id"]
    return group_id


def test_a_bug_link_that_is_not_http_is_refused(
    client: TestClient, database: Database, group: int
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'triage')}"}
    for url in HOSTILE_URLS:  # one history for all of them: it takes seconds to build
        change = {"bug_url": url}
        answer = client.patch(f"/api/v1/alert-groups/{group}", json=change, headers=headers)
        assert answer.status_code == 422, url
        assert answer.json()["errors"][0]["field"] == "bug_url"


def test_triage_records_who_and_when(client: TestClient, database: Database, group: int) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'triage', name='alice')}"}
    before = client.get(f"/api/v1/alert-groups/{group}").json()
    assert before["triaged_by"] == ""
    assert before["triaged_at"] is None
    change = {"status": "acknowledged", "bug_url": "https://bugs.example/1"}
    answer = client.patch(f"/api/v1/alert-groups/{group}", json=change, headers=headers)
    assert answer.status_code == 200, answer.text
    stored = client.get(f"/api/v1/alert-groups/{group}").json()
    assert re.fullmatch(r"alice \(token #\d+, API\)", stored["triaged_by"])
    assert stored["triaged_at"] is not None
    member = stored["regressions"][0]
    assert member["triaged_by"] == stored["triaged_by"]
    page = client.get("/alerts?status=acknowledged").text
    assert '<a href="https://bugs.example/1" rel="noopener noreferrer">' in page
    assert "Last triaged by alice" in page


def test_a_signed_in_browser_triages_with_its_session_and_csrf_value(
    client: TestClient, database: Database, group: int
) -> None:
    client.follow_redirects = False
    token = make_token(database, "triage", name="bob")
    sign_in(client, token, "/alerts")
    cookie = client.cookies[SIGN_IN_COOKIE]
    assert token not in cookie  # the cookie holds a session id ...
    with database.session_scope() as session:  # ... whose hash alone is stored
        stored = session.scalars(select(WebSession.session_hash)).all()
    assert len(stored) == 1
    assert cookie not in stored[0]
    endpoint = f"/api/v1/alert-groups/{group}"
    change = {"status": "acknowledged"}
    assert client.patch(endpoint, json=change).status_code == 403  # no CSRF value
    wrong = {"X-CSRF-Token": "0" * 64}
    assert client.patch(endpoint, json=change, headers=wrong).status_code == 403
    right = {"X-CSRF-Token": csrf_of(client, "/alerts")}
    answer = client.patch(endpoint, json=change, headers=right)
    assert answer.status_code == 200, answer.text
    assert re.fullmatch(r"bob \(token #\d+, dashboard session #\d+\)", answer.json()["triaged_by"])
    # another browser's CSRF value does not fit this session
    other = TestClient(client.app, follow_redirects=False)
    sign_in(other, make_token(database, "triage", name="carol"))
    stolen = {"X-CSRF-Token": csrf_of(other)}
    assert client.patch(endpoint, json=change, headers=stolen).status_code == 403


def test_a_session_acts_with_its_tokens_scopes_and_dies_with_it(
    client: TestClient, database: Database, group: int
) -> None:
    client.follow_redirects = False
    sign_in(client, make_token(database, "read", name="reader"))
    csrf = {"X-CSRF-Token": csrf_of(client)}
    endpoint = f"/api/v1/alert-groups/{group}"
    denied = client.patch(endpoint, json={"status": "acknowledged"}, headers=csrf)
    assert denied.status_code == 403
    assert "lacks the scope 'triage'" in denied.json()["detail"]
    with database.session_scope() as session:
        revoke_token(session, "reader")
    assert "Sign out" not in client.get("/").text
    assert client.patch(endpoint, json={"status": "new"}, headers=csrf).status_code == 401


def test_the_session_cookie_is_secure_when_a_trusted_proxy_reports_https(
    live_server: str, database: Database
) -> None:
    """uvicorn believes X-Forwarded-Proto from --forwarded-allow-ips (127.0.0.1 by default)."""
    form = {"token": make_token(database, "read"), "next": "/"}
    plain = httpx.post(f"{live_server}/login", data=form)
    assert "secure" not in plain.headers["set-cookie"].lower()
    proxied = httpx.post(f"{live_server}/login", data=form, headers={"X-Forwarded-Proto": "https"})
    assert proxied.status_code == 303
    assert "; secure" in proxied.headers["set-cookie"].lower()


def test_a_link_from_another_site_finds_the_strict_cookie(
    client: TestClient, database: Database
) -> None:
    """SameSite=Strict holds the cookie back on a cross-site arrival: the form looks again."""
    client.follow_redirects = False
    cross = {"Sec-Fetch-Site": "cross-site"}
    form = client.get("/login?next=/alerts", headers=cross).text
    assert '<meta http-equiv="refresh" content="0; url=/login?next=%2Falerts&amp;again=1">' in form
    assert "http-equiv" not in client.get("/login?next=/alerts&again=1", headers=cross).text
    assert "http-equiv" not in client.get("/login?next=/alerts").text  # typed, or same site
    sign_in(client, make_token(database, "read"))
    back = client.get("/login?next=/alerts&again=1")
    assert back.status_code == 303
    assert back.headers["location"] == "/alerts"


PAGES = ["/", "/alerts", "/compare", "/series", "/login", "/runs/1", "/api/v1/runs", "/healthz"]


@pytest.mark.parametrize("path", PAGES)
def test_every_answer_carries_the_security_headers(
    client: TestClient, ingest_headers: dict[str, str], path: str
) -> None:
    post_run(client, ingest_headers, "headers")
    answer = client.get(path)
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "strict-origin-when-cross-origin"


@pytest.mark.parametrize("path", ["/", "/alerts", "/compare", "/series", "/login", "/runs/1"])
def test_pages_have_no_inline_script(
    client: TestClient, ingest_headers: dict[str, str], path: str
) -> None:
    post_run(client, ingest_headers, "inline")
    page = client.get(path).text
    for tag in re.findall(r"<script\b[^>]*>", page):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert not re.search(r"\son[a-z]+=", page), "an inline event handler"


def test_the_api_docs_run_under_the_policy(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert re.findall(r"<script>", docs.text) == []
    assert '<script src="/docs/start.js"></script>' in docs.text
    policy = docs.headers["content-security-policy"]
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in policy
    start = client.get("/docs/start.js")
    assert start.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle" in start.text
    assert "/openapi.json" in start.text


def test_the_dashboard_keeps_no_token_in_page_storage() -> None:
    from app.dashboard.shell import FRONTEND

    script = (FRONTEND / "static" / "app.js").read_text()
    assert "localStorage.setItem" not in script
    assert "Authorization" not in script


@pytest.mark.parametrize(
    "changes",
    [
        {"DATABASE_URL": POSTGRES_URL},
        {"BROKER_URL": "redis://127.0.0.1:6379/15"},
    ],
)
def test_a_production_configuration_refuses_the_development_pepper(
    settings: Settings, changes: dict[str, str]
) -> None:
    config = settings.model_copy(update={**changes, "TOKEN_PEPPER": SecretStr(DEV_PEPPER)})
    with pytest.raises(ValueError, match="BENCHWATCH_TOKEN_PEPPER is the development value"):
        create_app(config)


def test_the_embedded_configuration_starts_on_the_development_pepper(tmp_path: Path) -> None:
    application = create_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path}/embedded.db"))
    assert application.state.settings.TOKEN_PEPPER.get_secret_value() == DEV_PEPPER
    application.state.database.dispose()


@pytest.fixture
def database_down(settings: Settings) -> Iterator[TestClient]:
    """The app on a Postgres address where nothing listens (a database outage)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # a port that is ours and never listens
    port = sock.getsockname()[1]
    url = f"postgresql+psycopg://postgres:secret-pw@127.0.0.1:{port}/benchwatch"
    application = create_app(settings.model_copy(update={"DATABASE_URL": url}))
    try:
        with TestClient(application, raise_server_exceptions=False) as client:
            yield client
    finally:
        sock.close()
        application.state.database.dispose()


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/alert-groups", "/", "/alerts"])
def test_a_database_outage_answers_503_with_retry_after(
    database_down: TestClient, path: str
) -> None:
    answer = database_down.get(path)
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["error"] == "DatabaseUnavailable"


def test_readyz_tells_an_anonymous_caller_nothing_about_the_outage(
    database_down: TestClient,
) -> None:
    answer = database_down.get("/readyz")
    assert answer.status_code == 503
    text = answer.text
    assert answer.json()["checks"]["database"].startswith("error: the database does not answer")
    for secret in ("secret-pw", "127.0.0.1", "OperationalError", "refused"):
        assert secret not in text


def test_private_reads_make_no_write(
    settings: Settings, database: Database, ingest_headers: dict[str, str]
) -> None:
    """A private server's reader takes no row lock and no SQLite write lock."""
    application = create_app(settings.model_copy(update={"PUBLIC_READ": False}))
    read = {"Authorization": f"Bearer {make_token(database, 'read', name='reader')}"}
    written: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not statement.lstrip().upper().startswith(("SELECT", "PRAGMA")):
            written.append(statement)

    with TestClient(application, follow_redirects=False) as client:
        assert post_run(client, ingest_headers, "private").status_code == 201
        event.listen(application.state.database.engine, "before_cursor_execute", note)
        try:
            assert client.get("/api/v1/runs", headers=read).status_code == 200
            assert client.get("/", headers=read).status_code == 200
            sign_in(client, make_token(database, "read", name="browser"))
            written.clear()  # signing in writes its session, once
            assert client.get("/alerts").status_code == 200
            assert client.get("/api/v1/runs").status_code == 200
        finally:
            event.remove(application.state.database.engine, "before_cursor_execute", note)
    application.state.database.dispose()
    assert written == []
    with database.session_scope() as session:
        reader = session.scalar(select(ApiToken).where(ApiToken.name == "reader"))
        assert reader is not None
        assert reader.last_used_at is None


def test_a_token_needs_a_printable_name_within_its_column(settings: Settings) -> None:
    from app.core.errors import InvalidInput
    from app.tokens.service import create_token

    database = Database(settings.DATABASE_URL)
    try:
        with database.session_scope() as session:
            for name in ("x" * 129, "", "nul\x00name", "line\nbreak"):
                with pytest.raises(InvalidInput, match="printable"):
                    create_token(session, name, ["read"], PEPPER)
    finally:
        database.dispose()


def test_a_token_limited_to_machine_patterns_ingests_for_those_alone(
    client: TestClient, database: Database
) -> None:
    with database.session_scope() as session:
        _, plain = create_token(session, "ci-h100", ["ingest"], PEPPER, ["h100-*", "gb200-?"])
    headers = {"Authorization": f"Bearer {plain}"}
    assert post_run(client, headers, "ok", machine="h100-8").status_code == 201
    assert post_run(client, headers, "ok2", machine="gb200-1").status_code == 201
    refused = post_run(client, headers, "no", machine="mi300x-1")
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "token 'ci-h100' may only ingest for machines matching gb200-?, h100-*, not 'mi300x-1'"
    )
    assert client.get("/api/v1/runs", params={"machine": "mi300x-1"}).json()["items"] == []
    upload = client.post(
        "/api/v1/uploads",
        params={"machine": "mi300x-1", "filename": "run.json"},
        content=json.dumps(run_payload("up", [result()], machine="mi300x-1")),
        headers={**headers, "Content-Type": "application/json"},
    )
    assert upload.status_code == 403, upload.text
    assert "not 'mi300x-1'" in upload.json()["detail"]


@pytest.mark.parametrize("patterns", [["bad pattern"], ["x" * 129], [f"m{n}" for n in range(33)]])
def test_machine_patterns_are_checked_when_the_token_is_made(
    database: Database, patterns: list[str]
) -> None:
    from app.core.errors import InvalidInput

    with database.session_scope() as session, pytest.raises(InvalidInput, match="machine patterns"):
        create_token(session, "ci", ["ingest"], PEPPER, patterns)


WRITE_ROUTES = [
    ("POST", "/api/v1/runs"),
    ("POST", "/api/v1/uploads"),
    ("PATCH", "/api/v1/regressions/1"),
    ("PATCH", "/api/v1/alert-groups/1"),
    ("POST", "/login"),
    ("POST", "/logout"),
]


class BodyMeter:
    """ASGI middleware: how many body bytes the application asked for, in all."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.read = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counted() -> Message:
            message = await receive()
            self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counted, send)


@pytest.mark.parametrize(("method", "path"), WRITE_ROUTES)
def test_an_anonymous_40_mb_write_is_refused_at_once(
    settings: Settings, method: str, path: str
) -> None:
    """Over real HTTP: the server answers before it reads, parses or stores 40 MB."""
    application = create_app(settings)
    meter = BodyMeter(application)
    body = b'{"key": "' + b"x" * (40 * 1024 * 1024) + b'"}'
    headers = {"Content-Type": "application/json"}
    try:
        with serving(meter) as url:
            answer = httpx.request(method, url + path, content=body, headers=headers, timeout=60)
    finally:
        application.state.database.dispose()
    if path.startswith("/api/"):
        assert answer.status_code == 401, answer.text[:200]
    else:  # the sign-in forms are at most 64 KiB: refused by their declared length
        assert answer.status_code == 413, answer.text[:200]
    assert meter.read < 1024 * 1024, f"{method} {path} read {meter.read:,} bytes before answering"
