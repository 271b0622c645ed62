"""Replay a subscription's rules over stored findings: what it would have been told of.

The backtest of a subscription (``anomalies.backtest`` replays thresholds): the steps among
the newest ``MAX_FINDINGS`` its rules select (withdrawn suspicions aside), with their triage
labels, so that a rule can be tried before it is saved. It reads, and writes nothing.
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies import sensitivity
from app.anomalies.backtest import Tally
from app.anomalies.models import Regression
from app.notifications.matching import compile_subscription
from app.notifications.service import finding_of

MAX_FINDINGS = 5000  # the newest stored steps a replay reads


def replay(
    session: Session, match: Mapping[str, Any], exclude: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """How many stored steps a subscription's rules select, and how they were triaged."""
    matcher = compile_subscription(match, exclude)
    tally = Tally()
    untriaged = 0
    query = select(Regression).order_by(Regression.id.desc()).limit(MAX_FINDINGS)
    for regression in session.scalars(query):
        if regression.state == "withdrawn" or not matcher.matches(finding_of(regression)):
            continue
        label = sensitivity.label_of(regression.status, regression.triaged_by, regression.detector)
        tally.count(label)
        untriaged += label is None
    return {**asdict(tally), "untriaged": untriaged, "precision": tally.precision}
