"""Create, list and revoke API tokens; the plain token is shown once and never stored."""

import hashlib
import hmac
import re
import secrets
from datetime import timedelta
from fnmatch import fnmatchcase

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.core.db import utcnow
from app.core.errors import Forbidden, InvalidInput, NotFound
from app.core.names import PROJECT_RULE, is_project_name
from app.tokens.models import ApiToken, WebSession

SCOPES = ("ingest", "triage", "admin", "read", "trigger")
TOKEN_PREFIX = "bw_"
CLI = "benchwatch command line"  # who made or revoked a token, in the audit log
MAX_NAME_LENGTH = 128  # the column's size
SESSION_DAYS = 14  # how long a browser stays signed in
MAX_MACHINE_PATTERNS = 32
MACHINE_PATTERN = re.compile(r"^[A-Za-z0-9_.:+*?\[\]!-]{1,128}$")


def hash_token(token: str, pepper: str) -> str:
    """Keyed hash of a token or session id: what the database stores."""
    return hmac.new(pepper.encode(), token.encode(), hashlib.sha256).hexdigest()


class TokenNotFound(NotFound):
    """No token with this id or name."""

    def __init__(self, ident: str) -> None:
        super().__init__(f"no token with id or name {ident!r}")


class MachineNotAllowed(Forbidden):
    """A token limited to some machines ingested for another one."""

    def __init__(self, token: ApiToken, machine: str) -> None:
        patterns = ", ".join(token.machine_patterns)
        super().__init__(
            f"token {token.name!r} may only ingest for machines matching {patterns}, "
            f"not {machine!r}"
        )


class ProjectNotAllowed(Forbidden):
    """A token limited to one project wrote for another one."""

    def __init__(self, token: ApiToken, project: str, loc: str) -> None:
        super().__init__(
            f"token {token.name!r} may only write for project {token.project!r}, "
            f"not {project!r} (at {loc})",
            errors=[
                {
                    "loc": loc,
                    "field": "project",
                    "message": f"this token is limited to project {token.project!r}",
                }
            ],
        )


def create_token(
    session: Session,
    name: str,
    scopes: list[str],
    pepper: str,
    machine_patterns: list[str] | None = None,
    by: str = CLI,
    project: str | None = None,
) -> tuple[ApiToken, str]:
    """A new token and its plain text (to show once).

    ``machine_patterns`` (globs, e.g. ``h100-*``) limit the machines it may ingest for;
    ``project`` the one project it may write for (None: every one); ``by`` names who made
    it in the audit log.
    """
    if not 1 <= len(name) <= MAX_NAME_LENGTH or not name.isprintable():
        raise InvalidInput(f"a token's name is 1 to {MAX_NAME_LENGTH} printable characters")
    if unknown := sorted(set(scopes) - set(SCOPES)):
        raise InvalidInput(f"unknown scope(s) {unknown}; known: {list(SCOPES)}")
    if not scopes:
        raise InvalidInput(f"a token needs at least one scope of {list(SCOPES)}")
    patterns = sorted(set(machine_patterns or []))
    if len(patterns) > MAX_MACHINE_PATTERNS or not all(map(MACHINE_PATTERN.match, patterns)):
        raise InvalidInput(
            f"at most {MAX_MACHINE_PATTERNS} machine patterns of machine-name characters "
            "and the globs * ? [...]"
        )
    if project is not None and not is_project_name(project):
        raise InvalidInput(f"a project's name is {PROJECT_RULE}")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        name=name,
        prefix=plain[:10],
        token_hash=hash_token(plain, pepper),
        scopes=sorted(set(scopes)),
        machine_patterns=patterns,
        project=project,
        created_at=utcnow(),
    )
    session.add(token)
    session.flush()
    after = audit.fields(token, ("name", "prefix", "scopes", "machine_patterns", "project"))
    audit.record(session, by, "token.create", f"token:{token.id}", {}, after)
    return token, plain


def list_tokens(session: Session) -> list[ApiToken]:
    """Every token, oldest first (revoked ones too)."""
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke_token(session: Session, ident: str, by: str = CLI) -> list[ApiToken]:
    """Revoke the token with this id, or every live token with this name (``by``: who)."""
    query = select(ApiToken).where(ApiToken.revoked_at.is_(None))
    if ident.isdigit():
        query = query.where(ApiToken.id == int(ident))
    else:
        query = query.where(ApiToken.name == ident)
    tokens = list(session.scalars(query))
    if not tokens:
        raise TokenNotFound(ident)
    for token in tokens:
        token.revoked_at = utcnow()
        after = audit.fields(token, ("name", "revoked_at"))
        audit.record(session, by, "token.revoke", f"token:{token.id}", {"revoked_at": None}, after)
    session.flush()
    return tokens


def check_machine(token: ApiToken, machine: str) -> None:
    """403 unless the token may ingest for ``machine`` (no patterns: any machine)."""
    patterns = token.machine_patterns
    if patterns and not any(fnmatchcase(machine, pattern) for pattern in patterns):
        raise MachineNotAllowed(token, machine)


def check_project(token: ApiToken, project: str, loc: str = "project") -> None:
    """403 unless the token may write for ``project`` (no project of its own: any).

    ``loc`` names where the request gave the project, for the error.
    """
    if token.project is not None and token.project != project:
        raise ProjectNotAllowed(token, project, loc)


def open_session(session: Session, token: ApiToken, pepper: str) -> str:
    """Sign a browser in with ``token``: a new session row; returns the id for its cookie.

    Expired sessions are deleted here, the one write that signing in makes anyway, and so are
    the token's earlier sessions: a new sign-in ends the previous one, so that a session left
    open on another machine (or stolen) stops working once its owner signs in again.

    Two sign-ins at once must not both keep theirs: on Postgres each would delete the sessions
    committed before it and neither would see the other's new one, so the token's row is
    locked first and the second waits for the first to commit, then deletes its session.
    (The first use's ``last_used_at`` write locks it too, but a token in use is not touched
    again for a while.) SQLite leaves ``FOR UPDATE`` out: it serialises writers, and a
    transaction's first write waits for the other's commit before it reads.
    """
    now = utcnow()
    session.execute(select(ApiToken.id).where(ApiToken.id == token.id).with_for_update())
    session.execute(
        delete(WebSession).where((WebSession.expires_at <= now) | (WebSession.token_id == token.id))
    )
    secret = secrets.token_urlsafe(32)
    session.add(
        WebSession(
            session_hash=hash_token(secret, pepper),
            token_id=token.id,
            created_at=now,
            expires_at=now + timedelta(days=SESSION_DAYS),
        )
    )
    session.flush()
    return secret


def close_session(session: Session, secret: str, pepper: str) -> None:
    """Sign a browser out: its session row goes (nothing happens for an unknown id)."""
    session.execute(delete(WebSession).where(WebSession.session_hash == hash_token(secret, pepper)))
