"""Two-way bug status: a group's GitHub issue, closed or reopened, triages the group.

A group's bug link (``bug_url``) that names a GitHub issue (``https://HOST/OWNER/REPO/issues/N``)
is followed: the issue a GitHub issue receiver opened for the group becomes its link
(``link_opened_issue``), and a person may paste one. GitHub tells benchwatch what happens to
it through its ``issues`` webhook, signed with ``BENCHWATCH_GITHUB_WEBHOOK_SECRET``
(``verify``, ``apply_event``); where no webhook can reach the server, the poll reads each
linked open issue on the configured GitHub (``BENCHWATCH_GITHUB_API_URL``'s host, or github.com
for api.github.com) every ``BENCHWATCH_GITHUB_POLL_S`` (``poll``). Either way:

- closed: the group's findings take ``BENCHWATCH_GITHUB_CLOSED_STATUS`` (``fixed``);
- reopened: they take ``acknowledged`` (the bug is known again, and owned).

Each change is a triage like a person's (audited, by ``github: <login>`` or ``github
(polled)``); a change that finds the group in that status already changes nothing, so a
webhook delivered twice, or a poll after the webhook, acts once. The last state GitHub told is
kept per issue (``IssueState``) and shown beside the bug link.
"""

import hashlib
import hmac
import json
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies import triage
from app.anomalies.models import AlertGroup
from app.anomalies.schemas import TriageUpdate
from app.core.bounds import INT32_MAX
from app.core.config import Settings
from app.core.db import Database, utcnow
from app.notifications import guard, outbound
from app.notifications.models import IssueState

log = logging.getLogger(__name__)
ISSUE_URL = re.compile(
    r"^https?://[A-Za-z0-9.-]{1,253}(?::\d{1,5})?/([A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100})"
    r"/issues/([1-9][0-9]{0,9})$"
)
REOPENED_STATUS = "acknowledged"
POLL_BATCH = 20  # issues read per poll
POLL_TIMEOUT_S = 10.0
API_VERSION = "2022-11-28"


def parse(url: str) -> tuple[str, int] | None:
    """``(owner/repo, number)`` of a GitHub issue's web address; None for anything else.

    A number past what ``issue_state.number`` holds (a 32-bit integer) is no issue's.
    """
    found = ISSUE_URL.match(url or "")
    if found is None or int(found.group(2)) > INT32_MAX:
        return None
    return found.group(1), int(found.group(2))


def verify(secret: str, body: bytes, signature: str) -> bool:
    """Whether ``X-Hub-Signature-256`` is the HMAC-SHA256 of the body under the secret."""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature or "")


def link_opened_issue(session: Session, group_id: int | None, url: str) -> None:
    """The issue a receiver opened for a group becomes its bug link (unless it has one)."""
    if group_id is None or parse(url) is None:
        return
    group = session.get(AlertGroup, group_id)
    if group is not None and not group.bug_url:
        group.bug_url = url
    _told(session, url, "open", "", utcnow())


def apply_event(session: Session, settings: Settings, event: Mapping[str, Any]) -> list[int]:
    """An ``issues`` webhook event: the groups it triaged (``closed``, ``reopened`` only)."""
    action = event.get("action")
    issue = event.get("issue")
    if action not in ("closed", "reopened") or not isinstance(issue, dict):
        return []
    url = str(issue.get("html_url") or "")
    if parse(url) is None:
        return []
    reason = str(issue.get("state_reason") or "")[:32]
    state = "closed" if action == "closed" else "open"
    _told(session, url, state, reason, utcnow())
    sender = event.get("sender")
    login = str((sender if isinstance(sender, dict) else {}).get("login") or "someone")[:100]
    return _triage_groups(session, settings, url, state, f"github: {login}")


def _told(session: Session, url: str, state: str, reason: str, now: datetime) -> bool:
    """Keep what GitHub told of an issue; whether that is a change to act on.

    A state that differs from the one kept is; an issue seen for the first time is when it
    is closed already (it closed before anyone here looked), not when it is open.
    """
    repository, number = parse(url) or ("", 0)
    known = session.scalar(select(IssueState).where(IssueState.url == url))
    if known is None:
        session.add(
            IssueState(
                url=url,
                repository=repository,
                number=number,
                state=state,
                state_reason=reason,
                checked_at=now,
                changed_at=now,
            )
        )
        session.flush()
        return state == "closed"
    changed = known.state != state
    known.state, known.state_reason, known.checked_at = state, reason, now
    if changed:
        known.changed_at = now
    return changed


def _triage_groups(
    session: Session, settings: Settings, url: str, state: str, by: str
) -> list[int]:
    """The groups linked to the issue take the status its state calls for (where they lack it)."""
    status = settings.GITHUB_CLOSED_STATUS if state == "closed" else REOPENED_STATUS
    groups = session.scalars(
        select(AlertGroup).where(AlertGroup.bug_url == url).order_by(AlertGroup.id)
    )
    changed = []
    for group in groups:
        if triage.group_status(group) == status:
            continue
        triage.triage(session, triage.GROUP, group.id, TriageUpdate(status=status), by)
        changed.append(group.id)
    return changed


def states_of(session: Session, urls: Sequence[str]) -> dict[str, IssueState]:
    """The known state of each GitHub issue among ``urls`` (one statement)."""
    wanted = sorted({u for u in urls if parse(u)})
    if not wanted:
        return {}
    return {s.url: s for s in session.scalars(select(IssueState).where(IssueState.url.in_(wanted)))}


def poll(database: Database, settings: Settings) -> list[int]:
    """Read the state of linked issues not checked for ``GITHUB_POLL_S``; the groups triaged.

    At most ``POLL_BATCH`` issues a pass, the longest unchecked first; GitHub is asked with no
    database transaction open. An issue GitHub cannot show (404, no token) is marked checked
    and left as it was.
    """
    now = utcnow()
    with database.session_scope() as session:
        stale_before = now - timedelta(seconds=settings.GITHUB_POLL_S)
        urls = _due(session, stale_before, web_host(settings.GITHUB_API_URL))
    read = {url: _read(settings, url) for url in urls}
    changed: list[int] = []
    with database.session_scope() as session:
        for url, found in read.items():
            if found is None:
                _checked(session, url, now)
                continue
            state, reason = found
            if _told(session, url, state, reason, now):
                changed += _triage_groups(session, settings, url, state, "github (polled)")
    return changed


def web_host(api_url: str) -> str:
    """The host of the issues an API serves: github.com for api.github.com, else its own (GHE)."""
    host = (urlsplit(api_url).hostname or "").lower()
    return "github.com" if host == "api.github.com" else host


def _due(session: Session, stale_before: datetime, host: str) -> list[str]:
    """Bug links to issues on ``host``, never read or not since ``stale_before``, open first.

    Only the configured GitHub's issues are read: a link to another host is not sent there.
    """
    linked = select(AlertGroup.bug_url).where(AlertGroup.bug_url.like("http%/issues/%"))
    urls = [
        u
        for u in session.scalars(linked.distinct().limit(10 * POLL_BATCH))
        if parse(u) and (urlsplit(u).hostname or "").lower() == host
    ]
    known = states_of(session, urls)
    due = [
        u
        for u in urls
        if u not in known
        or (known[u].state == "open" and (known[u].checked_at or stale_before) <= stale_before)
    ]
    oldest = datetime.min.replace(tzinfo=stale_before.tzinfo)
    due.sort(key=lambda u: (u in known, (known[u].checked_at if u in known else None) or oldest))
    return due[:POLL_BATCH]


def _checked(session: Session, url: str, now: datetime) -> None:
    known = session.scalar(select(IssueState).where(IssueState.url == url))
    if known is not None:
        known.checked_at = now


def _read(settings: Settings, url: str) -> tuple[str, str] | None:
    """GitHub's state and state reason of the issue; None when it cannot be read."""
    repository, number = parse(url) or ("", 0)
    token = settings.GITHUB_TOKEN.get_secret_value()
    headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        **({"Authorization": f"Bearer {token}"} if token else {}),
    }
    api = settings.GITHUB_API_URL.rstrip("/")
    try:
        answer = outbound.request(
            "GET",
            f"{api}/repos/{repository}/issues/{number}",
            headers=headers,
            allow=guard.AllowList.parse(settings.RECEIVER_ALLOW),
            timeout_s=POLL_TIMEOUT_S,
        )
        if answer.status != 200:
            log.warning("issue %s: GitHub answered %s", url, answer.status)
            return None
        issue = json.loads(answer.body)
        state = issue.get("state")
        if state not in ("open", "closed"):
            return None
        return str(state), str(issue.get("state_reason") or "")[:32]
    except (guard.Refused, guard.DeliveryError, OSError, ValueError) as exc:
        log.warning("issue %s: not read: %s", url, exc)
        return None
