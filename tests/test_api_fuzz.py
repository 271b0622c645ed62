"""The JSON API fuzzed against its own OpenAPI schema (schemathesis, in process, on SQLite).

Every operation gets generated valid and invalid requests, with a token for the writes, on a
database that holds a history with regressions; no answer may be a 5xx, and each must be
declared by its operation with the schema it declares. The stateful test chains operations
through the ids they answer (a posted run read back, a listed group patched).

CI runs a fixed, derandomized budget: the same inputs on every run, so a larger one there
only repeats more of what passed, and it is kept small for the suite's ten minutes. By hand,
for longer and at random (before a release, or after changing a schema):
``BENCHWATCH_FUZZ_EXAMPLES=300 BENCHWATCH_FUZZ_RANDOM=1 .venv/bin/pytest tests/test_api_fuzz.py``
"""

import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.stateful.state_machine import StepInput, StepOutput
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from app.anomalies.jobs import sweep_silence
from app.core.config import Settings
from app.core.db import Database, utcnow
from app.core.migrate import upgrade_database
from app.main import create_app
from tests.anomalies.test_failures import nightly as failing_nightly
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import NO_SWEEPS, PEPPER, make_token

EXAMPLES = int(os.environ.get("BENCHWATCH_FUZZ_EXAMPLES", "20"))
RANDOM = os.environ.get("BENCHWATCH_FUZZ_RANDOM", "") not in ("", "0")
STATEFUL_EXAMPLES = max(1, EXAMPLES // 2)


@schemathesis.check
def no_undeclared_server_error(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """A 500 is a bug; another 5xx is an answer when its operation declares it.

    Schemathesis' own ``not_a_server_error`` refuses every 5xx, yet a declared 503 (no broker
    for a trigger, no turn free to compute verdicts, a rate limit's) is what the API promises.
    """
    status = response.status_code
    declared = case.operation.definition.raw.get("responses", {})
    if status == 500 or (status > 500 and str(status) not in declared):
        raise AssertionError(f"{case.operation.label} answered an undeclared {status}")
    return None


CHECKS = (
    "no_undeclared_server_error",
    "status_code_conformance",
    "response_schema_conformance",
    "positive_data_acceptance",
    "negative_data_rejection",
    "unsupported_method",
)
CONFIG: dict[str, Any] = {
    "generation": {
        "max-examples": EXAMPLES,
        "deterministic": not RANDOM,
        "database": "none",  # no example database in the repository
        # Every request carries the test's token (reads are public anyway): a case that drops
        # the Authorization header would be sent with it, and read as an invalid one accepted.
        "with-security-parameters": False,
    },
    "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
    "suppress-health-check": ["too_slow", "filter_too_much", "data_too_large"],
}
# Requests the schema calls valid that an operation refuses for what a schema cannot say: a
# cursor the server did not give out, a file whose format it cannot tell, a query that must
# name a machine or a run, a command suite the server is not configured with, an end before
# its start, a receiver's URL the server may not send to, a field that goes with another, a
# row the body names that does not fit. Every other operation must take every request its
# schema calls valid (``refusals_allowed``).
SUBSCRIPTION_WRITES = (
    ("POST", "/api/v1/subscriptions"),
    ("PATCH", "/api/v1/subscriptions/{subscription_id}"),
    ("PUT", "/api/v1/subscriptions/{subscription_id}"),
)
SEMANTIC_REFUSALS = (
    ("GET", "/api/v1/runs"),  # cursor
    ("GET", "/api/v1/runs/{run_id}"),  # results_cursor
    ("POST", "/api/v1/uploads"),  # the files' format
    ("GET", "/api/v1/summary"),  # a machine or a run_id
    ("POST", "/api/v1/suite-runs"),  # BENCHWATCH_COMMAND_SUITES
    ("POST", "/api/v1/silences"),  # ends_at after starts_at and now
    ("POST", "/api/v1/annotations"),  # ends_at after at
    # A kernel profile names a case of the run's results; a precision is one of the known
    # ones, in any case and by any alias (an enum would have to list every spelling).
    ("POST", "/api/v1/runs"),
    ("GET", "/api/v1/compare"),  # base_config and new_config together, without config
    ("POST", "/api/v1/regressions"),  # first_bad_run_id has a result of the series
    ("PATCH", "/api/v1/regressions/{regression_id}/position"),  # likewise
    # related_group_id goes with the statuses duplicate and downstream
    ("PATCH", "/api/v1/regressions/{regression_id}"),
    ("PATCH", "/api/v1/failures/{failure_id}"),
    ("PATCH", "/api/v1/alert-groups/{group_id}"),
    ("POST", "/api/v1/backtests"),  # a threshold's key names a detector and what it selects
    ("POST", "/api/v1/triage"),  # exactly one of ids, regressions or groups
    ("POST", "/api/v1/localizations"),  # the fields of its kind, and no other
    # A receiver's URL: an Apprise scheme BENCHWATCH_APPRISE_SCHEMES allows, a host the SSRF
    # guard can read, that resolves to a public address or one BENCHWATCH_RECEIVER_ALLOW
    # allows. The rest of these bodies is fuzzed below (test_subscription_writes_...).
    *SUBSCRIPTION_WRITES,
)
# Where the schema says less than the server checks: gaps to close, not rules a schema
# cannot state. JSON Schema calls 3.0 an integer, which the strict models refuse; a
# revision's pattern is not declared.
SCHEMA_GAPS = (
    ("PUT", "/api/v1/series/{series_id}/sensitivity"),  # an integer sent as 3.0
    ("POST", "/api/v1/compare-reruns"),  # likewise, and a model name of spaces (stripped)
    ("GET", "/api/v1/revisions/{revision}"),  # the revision's pattern
)
SPARED = frozenset(SEMANTIC_REFUSALS + SCHEMA_GAPS)


def refusals_allowed(case: schemathesis.Case) -> list[Any]:
    """The checks a case is spared: the acceptance of valid data, where ``SPARED``.

    Given to each call, not set per operation in the config: schemathesis joins an
    operation entry's filters by "or" (an entry of ``include-method: GET`` and an
    ``include-path`` spared every GET; the entries together, 68 operations of 70), and it
    matched every case against each entry.
    """
    spared = (case.operation.method.upper(), case.operation.path) in SPARED
    return [positive_data_acceptance] if spared else []


if not RANDOM:
    CONFIG["seed"] = 20261201


def hypothesis_settings(max_examples: int) -> hypothesis.settings:
    """Bounded, reproducible in CI, and free of Hypothesis' example database."""
    return hypothesis.settings(
        max_examples=max_examples,
        derandomize=not RANDOM,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def openapi_document() -> dict[str, Any]:
    """The schema under test, as the app serves it (no database is opened to build it)."""
    settings = Settings(DATABASE_URL="sqlite://", TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    application = create_app(settings)
    document = application.openapi()
    application.state.database.dispose()
    return document


# Built at import: schemathesis parametrizes the test by operation when it is collected.
schema = schemathesis.openapi.from_dict(
    openapi_document(), config=schemathesis.Config.from_dict(CONFIG)
)

URL_RECEIVERS = ("webhook", "slack", "apprise")


def subscription_writes_document() -> dict[str, Any]:
    """The subscription writes' schema, its receivers those that send to no URL.

    What is left (rules, names, timing, e-mail, GitHub and feed receivers) the API must take
    whenever the schema calls it valid: the semantic refusal above is the URLs' alone.
    """
    document = openapi_document()
    writes = {(method.lower(), path) for method, path in SUBSCRIPTION_WRITES}
    document["paths"] = {
        path: {method: op for method, op in operations.items() if (method, path) in writes}
        for path, operations in document["paths"].items()
        if path in {path for _, path in writes}
    }
    for model in ("SubscriptionCreate", "SubscriptionUpdate"):
        receivers = document["components"]["schemas"][model]["properties"]["receivers"]
        kinds = (receivers if "items" in receivers else receivers["anyOf"][0])["items"]
        mapping = kinds["discriminator"]["mapping"]
        dropped = {mapping.pop(kind) for kind in URL_RECEIVERS}
        kinds["oneOf"] = [one for one in kinds["oneOf"] if one["$ref"] not in dropped]
    return document


# Only the writes are in that document: no other method of their paths is an unsupported one.
WRITES_CONFIG = {
    **CONFIG,
    "checks": {**CONFIG["checks"], "unsupported_method": {"enabled": False}},
}
subscription_writes = schemathesis.openapi.from_dict(
    subscription_writes_document(), config=schemathesis.Config.from_dict(WRITES_CONFIG)
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str]:
    """A SQLite database holding a history with a regression, failing cases, a silent machine
    and a subscription, and a token that may write (the subscription routes need ``admin``)."""
    path: Path = tmp_path_factory.mktemp("fuzz") / "benchwatch.db"
    url = f"sqlite:///{path}"
    upgrade_database(url)
    settings = Settings(DATABASE_URL=url, TOKEN_PEPPER=PEPPER, BROKER_URL=None, **NO_SWEEPS)
    database = Database(url)
    token = make_token(database, "ingest", "triage", "admin", name="fuzz")
    database.dispose()
    application = create_app(settings)
    with TestClient(application) as client:
        headers = {"Authorization": f"Bearer {token}"}
        post_history(client, headers, dynamic_bert_slower)
        start = utcnow() - timedelta(days=5)  # recent nightlies, the last 3 days ago
        for index in range(5):  # then three cases start failing
            breaking = {"alexnet": "oom", "bert": "accuracy", "t5": "oom"} if index == 4 else {}
            failing_nightly(client, headers, index, breaking, start)
        # A subscription to read, change and delete (their routes take an admin token).
        body = {"name": "seed", "receivers": [{"kind": "email", "to": ["a@b.example"]}]}
        assert client.post("/api/v1/subscriptions", json=body, headers=headers).status_code == 201
    application.state.database.dispose()
    database = Database(url)
    assert sweep_silence(database) == 1  # no run for 3 days: the machine is silent
    database.dispose()
    return settings, token


@pytest.fixture
def app_and_headers(seeded: tuple[Settings, str]) -> tuple[Any, dict[str, str]]:
    """A fresh app on the seeded database (each test's lifespan ends with it) and a token."""
    settings, token = seeded
    return create_app(settings), {"Authorization": f"Bearer {token}"}


@schema.parametrize()
@hypothesis.settings(hypothesis_settings(EXAMPLES))
def test_every_answer_is_declared_and_no_5xx(
    case: schemathesis.Case, app_and_headers: tuple[Any, dict[str, str]]
) -> None:
    application, headers = app_and_headers
    case.call_and_validate(app=application, headers=headers, excluded_checks=refusals_allowed(case))


@subscription_writes.parametrize()
@hypothesis.settings(hypothesis_settings(EXAMPLES))
def test_subscription_writes_take_what_their_schema_calls_valid(
    case: schemathesis.Case, app_and_headers: tuple[Any, dict[str, str]]
) -> None:
    application, headers = app_and_headers
    case.call_and_validate(app=application, headers=headers)


@pytest.mark.slow
def test_stateful_sequences_answer_no_5xx(seeded: tuple[Settings, str], tmp_path: Path) -> None:
    settings, token = seeded
    headers = {"Authorization": f"Bearer {token}"}
    # Each scenario starts from the same database: a copy of the seeded one as it is now.
    # Hypothesis replays a scenario to shrink it, and a replay on a database the earlier
    # scenarios changed (a run posted, a finding triaged, a run invalidated) draws other
    # rules: it reports the test flaky instead of the answer it found.
    pristine = tmp_path / "pristine.db"
    _copy_sqlite(settings.DATABASE_URL.removeprefix("sqlite:///"), pristine)
    scenarios = iter(range(1_000_000))

    class Sequences(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            path = tmp_path / f"scenario-{next(scenarios)}.db"
            _copy_sqlite(pristine, path)
            url = f"sqlite:///{path}"
            self.application = create_app(settings.model_copy(update={"DATABASE_URL": url}))

        def teardown(self) -> None:
            # The scenario's app ends with it: schemathesis keeps an app's lifespan (its
            # sweepers, its in-process jobs) running until the test ends, and twenty of them
            # sweeping copies at once slowed every later scenario.
            shutdown_lifespans()
            self.application.state.database.dispose()

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"app": self.application, "headers": headers}

        def step(self, input: StepInput) -> StepOutput:
            self.refilled = negation_refilled(input)
            return super().step(input)  # type: ignore[no-any-return]

        def validate_response(
            self,
            response: schemathesis.Response,
            case: schemathesis.Case,
            additional_checks: list[Any] | None = None,
            **kwargs: Any,
        ) -> None:
            excluded = refusals_allowed(case)
            if self.refilled:
                excluded.append(negative_data_rejection)
            case.validate_response(
                response,
                additional_checks=additional_checks,
                excluded_checks=excluded,
                transport_kwargs=kwargs or None,
                recorder=self.recorder,
            )

    Sequences.run(settings=hypothesis_settings(STATEFUL_EXAMPLES))


def negation_refilled(step: StepInput) -> bool:
    """Whether a link put values from an earlier response into a negative case's body.

    The negation may be the very field the link filled (a required name removed, then set
    from the created subscription's): the request the server gets is then valid, and its
    acceptance no bug. Such a step is judged by every check but the negative data's (a CI
    run failed on PUT /subscriptions/{id} so: its body held every required field).
    """
    meta = step.case.meta
    return (
        meta is not None
        and meta.generation.mode.is_negative
        and any(location == ParameterLocation.BODY for location, _ in step.applied_parameters)
    )


def _copy_sqlite(source: str | Path, target: Path) -> None:
    """A consistent copy of a SQLite database (the backup API, not a file copy)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/api/v1/runs", "GET, POST"),  # two routes: Starlette named POST alone
        ("PATCH", "/api/v1/runs/1", "GET, DELETE"),
        ("POST", "/api/v1/series/1", "GET"),
    ],
)
def test_a_405_names_every_method_of_its_path(method: str, path: str, allow: str) -> None:
    settings = Settings(DATABASE_URL="sqlite://", TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    application = create_app(settings)
    with TestClient(application) as client:
        response = client.request(method, path)
    application.state.database.dispose()
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["error"] == "MethodNotAllowed"


def test_every_operation_declares_the_databases_503() -> None:
    # Any route reads the database, so any may answer 503 (unavailable, statement timeout).
    document = openapi_document()
    missing = [
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        if path.startswith("/api/")
        for method, operation in operations.items()
        if "503" not in operation["responses"]
    ]
    assert missing == []
    verdicts = document["paths"]["/api/v1/runs/{run_id}/verdicts"]["get"]["responses"]
    assert "statement" in verdicts["503"]["description"]  # a route's own 503 says all of it


def test_only_the_spared_operations_may_refuse_valid_data() -> None:
    results = schema.get_all_operations()
    operations = {(op.method.upper(), op.path) for op in (r.ok() for r in results)}
    assert not SPARED - operations, "a spared operation is not in the schema (renamed?)"
    machines = schema["/api/v1/machines"]["GET"].Case()
    assert refusals_allowed(machines) == []
    runs = schema["/api/v1/runs"]["POST"].Case()
    assert refusals_allowed(runs) == [positive_data_acceptance]
