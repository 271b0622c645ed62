"""A finished localization's notice: whose finding it is, when it may go, what it says.

``planning`` plans a ``localized`` notice in the transaction that finishes a localization
(who hears of it: see there); ``dispatch`` asks ``readiness`` before sending one, so that it
follows the notice that told its subscription of the group, and hands ``localization_of``
to the ``Renderer`` for the payload.

The culprit is shown as the localization stored it, but for its author: the name alone
(``Jane Doe`` of ``Jane Doe <jane@example.com>``) unless the subscription asked to mention
the author (``mention_author``), which also adds ``mention``, ``@login``, where the culprit
carries a GitHub login (``author_login``): a commit read from a local clone carries a name and
an address only, so no one is mentioned then.
"""

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.models import AggregateFinding, CaseFailure, Regression
from app.localization.models import Localization
from app.notifications.message import LOCALIZED, github_login
from app.notifications.models import Notice
from app.notifications.render import iso
from app.notifications.service import Found

TOLD = ("sent", "digested")  # a notice's states that told its subscription of its group
# The case as a notice names it (the localization's ``case`` holds more: params, tier, ...).
CASE_FIELDS = (
    "suite",
    "model",
    "category",
    "config",
    "precision",
    "mode",
    "batch_size",
    "metric",
    "unit",
    "rel_change",
)
FINDING_TYPES: dict[str, type] = {
    "regression": Regression,
    "failure": CaseFailure,
    "aggregate": AggregateFinding,
}
Readiness = Literal["send", "wait", "cancel"]
_NAMED_ADDRESS = re.compile(r"^(.*?)\s*<[^<>]*>\s*$")


def is_its_finding(localization: Localization, found: Found) -> bool:
    """Whether ``found`` is the finding ``localization`` was asked for."""
    kind = FINDING_TYPES.get(localization.finding_kind)
    return kind is not None and isinstance(found, kind) and found.id == localization.finding_id


def its_finding(localization: Localization, chosen: Sequence[Found]) -> list[Found]:
    """The localization's finding, if it is among ``chosen`` (a subscription's selection)."""
    return [found for found in chosen if is_its_finding(localization, found)]


def readiness(
    session: Session, notice: Notice, now: datetime, carried: Collection[int | None] = ()
) -> tuple[Readiness, Localization | None]:
    """Whether a planned ``localized`` notice goes now, later, or never; and its localization.

    It goes once its subscription was told of the group by an earlier sweep (so that a
    GitHub issue exists to comment on, and a reader hears of the group first), or by a
    notice in the same digest (``carried``: the groups of the digest's other notices). It
    waits while a notice of the group is still planned or was sent by this very sweep; it
    is cancelled when none will tell of the group (the notice that would have was cancelled
    or silenced) or its localization is gone.
    """
    found = session.get(Localization, notice.localization_id) if notice.localization_id else None
    if found is None:
        return "cancel", None
    if notice.group_id in carried:
        return "send", found
    others = session.execute(
        select(Notice.state, Notice.sent_at).where(
            Notice.subscription_id == notice.subscription_id,
            Notice.group_id == notice.group_id,
            Notice.event != LOCALIZED,
        )
    ).all()
    if any(state in TOLD and sent_at is not None and sent_at < now for state, sent_at in others):
        return "send", found
    if any(state == "planned" or state in TOLD for state, _ in others):
        return "wait", found
    return "cancel", found


def author_name(author: str) -> str:
    """An author's name without the address: ``Jane Doe <jane@x>`` and ``jane@x`` lose it."""
    if named := _NAMED_ADDRESS.match(author):
        return named.group(1).strip()
    return "" if "@" in author else author.strip()


def shown_culprit(culprit: Mapping[str, Any], mention_author: bool) -> dict[str, Any]:
    """The culprit as the subscription sees it: the author's address only if it asked."""
    shown = dict(culprit)
    if not mention_author:
        if isinstance(shown.get("author"), str):
            shown["author"] = author_name(shown["author"])
        shown.pop("author_email", None)
    return shown


def localization_of(localization: Localization, mention_author: bool, base: str) -> dict[str, Any]:
    """The payload's ``localization``: the finding, state, culprit, costs, its page."""
    answer = localization.answer or {}
    culprit = answer.get("culprit")
    shown = shown_culprit(culprit, mention_author) if isinstance(culprit, Mapping) else None
    login = github_login(culprit.get("author_login")) if isinstance(culprit, Mapping) else None
    case = localization.case or {}
    return {
        "id": localization.id,
        "url": f"{base}/localizations/{localization.id}",
        "state": localization.state,
        "reason": localization.reason,
        "strategy": answer.get("strategy"),
        "finding": {"kind": localization.finding_kind, "id": localization.finding_id},
        "machine": localization.machine,
        "case": {name: case[name] for name in CASE_FIELDS if case.get(name) is not None},
        "culprit": shown,
        "mention": f"@{login}" if mention_author and login else None,
        "probes": localization.probe_count,
        "repeats": localization.repeats,
        "builds": localization.builds,
        "samples": localization.samples,
        "started_by": localization.started_by,
        "finished_at": iso(localization.finished_at),
    }
