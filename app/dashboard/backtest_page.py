"""The backtest page: thresholds tried over stored history before they are set (``triage``).

The form posts as the annotations form does (``access.form_actor``); its thresholds are the
JSON ``BENCHWATCH_DETECTOR_THRESHOLDS`` takes, checked by the API's own schema and by the
detectors, and a refused form comes back as typed with why. The report is
``anomalies.backtest``'s: what the proposal keeps, adds and removes, and the precision against
triage labels now and with it.
"""

import json
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from fastapi import Form
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.anomalies import backtest
from app.anomalies.schemas import BacktestRequest
from app.benchmarks.service import SeriesFilter
from app.core.errors import describe
from app.dashboard.queries import machine_names

EXAMPLE = '{"suite:torchbench": {"min_rel_change": 0.05}}'


@dataclass(frozen=True)
class BacktestForm:
    """The backtest form as typed."""

    thresholds: str = ""
    machine: str = ""
    suite: str = ""
    model: str = ""
    metric: str = ""


def backtest_form(
    thresholds: Annotated[str, Form(max_length=20_000)] = "",
    machine: Annotated[str, Form(max_length=256)] = "",
    suite: Annotated[str, Form(max_length=256)] = "",
    model: Annotated[str, Form(max_length=256)] = "",
    metric: Annotated[str, Form(max_length=256)] = "",
) -> BacktestForm:
    """Dependency: the posted backtest form."""
    return BacktestForm(thresholds, machine, suite, model, metric)


def run(
    session: Session, form: BacktestForm, configured: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """The report of the form's backtest, or why it was refused."""
    try:
        proposed = json.loads(form.thresholds or "{}")
    except json.JSONDecodeError as exc:
        return None, f"thresholds: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    select = {k: v.strip() for k, v in asdict(form).items() if k != "thresholds" and v.strip()}
    try:
        request = BacktestRequest.model_validate({"thresholds": proposed, "select": select})
    except ValidationError as exc:
        error = describe(dict(exc.errors()[0]))
        return None, f"{error.get('loc') or 'thresholds'}: {error['message']}"
    where = SeriesFilter(**request.select.model_dump())
    try:
        report = backtest.backtest(session, request.thresholds, configured, where)
    except ValueError as exc:
        return None, str(exc)
    return report.as_dict(), ""


def page_context(
    session: Session,
    may_run: bool,
    form: BacktestForm | None = None,
    report: dict[str, Any] | None = None,
    error: str = "",
) -> dict[str, Any]:
    """What the page shows: the form (as typed), and the report or the refusal."""
    return {
        "may_run": may_run,
        "form": form or BacktestForm(),
        "example": EXAMPLE,
        "machines": machine_names(session, None),
        "report": report,
        "error": error,
    }
