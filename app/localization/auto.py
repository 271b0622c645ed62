"""Localizations that start by themselves: a step confirmed (or suspected) on a measurable series.

With ``BENCHWATCH_LOCALIZE`` at ``confirmed``, each regression that becomes confirmed (recorded
so, or suspected before) is localized; at ``suspected``, each new one as well, suspected or
confirmed. Whatever path records or confirms the step (detection, a confirmation re-run, a
rescan through a server or worker), a session listener notes it as the transaction flushes and,
just before it commits, asks for its localization in the same transaction, as any request
does (``request_localization``: measurable, one at a time, the machine's budget); the worker is
told after the commit. A step with a localization already is left alone; one no worker can
measure is passed over quietly; one over the budget is skipped and logged.

``app.runtime.connect`` installs it with the process's settings; the anomalies domain knows
nothing of it.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event, inspect, select
from sqlalchemy.orm import Session

from app.anomalies.models import Regression
from app.localization.models import Localization
from app.localization.service import BudgetSpent, NotMeasurable, request_localization

log = logging.getLogger(__name__)
NOTED = "benchwatch.localize_steps"
STARTED_BY = "auto"


@dataclass(frozen=True)
class Policy:
    """When localizations start by themselves (``BENCHWATCH_LOCALIZE`` and its budget)."""

    mode: str = "off"  # off | confirmed | suspected
    budget: int = 0
    command_suites: Mapping[str, str] = field(default_factory=dict)  # LOCALIZE_SUITES


_policy = Policy()


def install(policy: Policy) -> None:
    """Start localizations by ``policy`` in every session from now on (the process's one)."""
    global _policy
    _policy = policy
    for name, listener in LISTENERS:
        if not event.contains(Session, name, listener):
            event.listen(Session, name, listener)


def _wanted(regression: Regression, *, new: bool) -> bool:
    """Whether this change of the step starts its localization under the policy."""
    if regression.direction != "regression" or _policy.mode == "off":
        return False
    if regression.state == "confirmed":
        return new or "confirmed" in _changed_to(regression)
    return _policy.mode == "suspected" and new and regression.state == "suspected"


def _changed_to(regression: Regression) -> tuple[Any, ...]:
    return tuple(inspect(regression).attrs["state"].history.added or ())


def _note_steps(session: Session, _context: Any, _instances: Any) -> None:
    if _policy.mode == "off":
        return
    noted: set[Regression] = session.info.setdefault(NOTED, set())
    noted |= {r for r in session.new if isinstance(r, Regression) and _wanted(r, new=True)}
    noted |= {r for r in session.dirty if isinstance(r, Regression) and _wanted(r, new=False)}


def _start_before_commit(session: Session) -> None:
    if not session.info.get(NOTED):
        return
    session.flush()  # the steps' ids, and changes made since the last flush noted
    noted = [r for r in session.info.pop(NOTED, set()) if inspect(r).persistent]
    for regression in sorted(noted, key=lambda r: r.id):
        if session.scalar(
            select(Localization.id).where(Localization.regression_id == regression.id).limit(1)
        ):
            continue
        try:  # refused before anything is written: nothing to undo
            request_localization(
                session,
                "regression",
                regression.id,
                started_by=STARTED_BY,
                budget=_policy.budget,
                command_suites=_policy.command_suites,
            )
        except NotMeasurable:
            log.debug("regression %s: not localized, no worker measures it", regression.id)
        except BudgetSpent as spent:
            log.warning("regression %s: not localized: %s", regression.id, spent)


def _forget(session: Session, previous: Any) -> None:
    if not previous.nested:  # a savepoint's rollback leaves the transaction's steps noted
        session.info.pop(NOTED, None)


LISTENERS = (
    ("before_flush", _note_steps),
    ("before_commit", _start_before_commit),
    ("after_soft_rollback", _forget),
)
