"""The default branch is known, not guessed (issue 26 point 8).

A run's upload may say its repository's default branch (``default_branch``, which
``benchwatch upload`` reads from the CI); it wins over BENCHWATCH_DEFAULT_BRANCHES' guess. A
run stored as a branch says why, on the API and the run page. Two branch names never share a
branch channel.
"""

import json
import logging
from pathlib import Path

import pytest
from benchwatch_client.upload import ci_run, metadata
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.main import create_app
from app.runs.branches import branch_channel
from tests.conftest import PEPPER
from tests.factories import example_run
from tests.uploads.test_api import PERF, PERF_NAME, upload


def post(client: TestClient, headers: dict[str, str], key: str, **fields: str) -> dict[str, str]:
    response = client.post("/api/v1/runs", json=example_run(key=key, **fields), headers=headers)
    assert response.status_code == 201, response.text
    body: dict[str, str] = response.json()
    return body


def test_a_master_repository_keeps_its_mainline_when_the_upload_says_so(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    said = post(client, ingest_headers, "said", branch="master", default_branch="master")
    assert (said["channel"], said["branch_reason"]) == ("nightly", "")
    # Without it, the configured guess ("main") keeps master apart, and the run says why.
    guessed = post(client, ingest_headers, "guessed", branch="master")
    assert guessed["channel"] == "nightly@master"
    assert "'main'" in guessed["branch_reason"]
    assert "BENCHWATCH_DEFAULT_BRANCHES" in guessed["branch_reason"]
    pr = post(client, ingest_headers, "pr", branch="refs/heads/fix", default_branch="master")
    assert pr["channel"] == "nightly@fix"
    assert "'master', the repository's default branch" in pr["branch_reason"]
    # main is a branch of a repository whose default is master
    main = post(client, ingest_headers, "main", branch="main", default_branch="master")
    assert main["channel"] == "nightly@main"
    page = client.get(f"/runs/{guessed['id']}").text
    assert 'id="branch-reason"' in page
    assert "BENCHWATCH_DEFAULT_BRANCHES" in page
    assert 'id="branch-reason"' not in client.get(f"/runs/{said['id']}").text


def test_the_reason_fits_its_column_whatever_the_names(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    control = "\x01" * 256  # repr writes each as 4 characters
    run = post(client, ingest_headers, "odd", branch=control, default_branch=control[:-1])
    assert run["branch_reason"].startswith("branch '\\x01")
    assert len(run["branch_reason"]) <= 512


def test_an_upload_field_says_the_default_branch(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    files = [(PERF_NAME, PERF.read_bytes())]
    status, run = upload(client, ingest_headers, files, branch="develop", default_branch="develop")
    assert status == 201, run
    assert (run["channel"], run["branch_reason"]) == ("nightly", "")


def test_feature_slash_x_and_feature_dash_x_never_share_a_channel(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    slash = post(client, ingest_headers, "slash", branch="feature/x")
    dash = post(client, ingest_headers, "dash", branch="feature-x")
    assert slash["channel"] != dash["channel"]
    assert dash["channel"] == "nightly@feature-x"  # a name a channel can hold stays as it is
    assert slash["channel"].startswith("nightly@feature-x-")
    names = ["a/b", "a-b", "a b", "a_b", "a--b", "a//b", "-a-b", "x" * 300, "x" * 301]
    channels = {branch_channel("nightly", name) for name in names}
    assert len(channels) == len(names)
    assert all(len(c) <= 64 for c in channels)


def test_the_upload_client_reads_the_default_branch_from_the_ci(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "master"}}))
    github = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SHA": "abc1234",
        "GITHUB_REF_NAME": "master",
        "GITHUB_RUN_ID": "7",
        "GITHUB_EVENT_PATH": str(event),
    }
    found = ci_run(github)
    assert found is not None
    assert found.default_branch == "master"
    gitlab = {"GITLAB_CI": "true", "CI_COMMIT_REF_NAME": "develop", "CI_DEFAULT_BRANCH": "develop"}
    found = ci_run(gitlab)
    assert found is not None
    assert found.default_branch == "develop"
    fields = metadata({}, [tmp_path / "a.csv"], github)
    assert fields["default_branch"] == "master"
    provenance = json.loads(fields["provenance"])
    assert provenance["default_branch"] == "GITHUB_EVENT_PATH repository.default_branch"
    # An event whose repository is not an object says nothing.
    event.write_text(json.dumps({"repository": "master"}))
    found = ci_run(github)
    assert found is not None
    assert found.default_branch == ""


def test_branch_retention_on_a_guessed_default_branch_warns_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def start(**changes: object) -> list[str]:
        caplog.clear()
        settings = Settings(DATABASE_URL="sqlite://", TOKEN_PEPPER=PEPPER, BROKER_URL=None)
        with caplog.at_level(logging.WARNING, logger="app.runs.branches"):
            create_app(settings.model_copy(update=changes)).state.database.dispose()
        return [r.getMessage() for r in caplog.records if r.name == "app.runs.branches"]

    assert any("guessed" in m for m in start(RETAIN_BRANCH_RUNS_DAYS=14))
    assert start(RETAIN_BRANCH_RUNS_DAYS=0) == []
    assert start(RETAIN_BRANCH_RUNS_DAYS=14, DEFAULT_BRANCHES={"*": "master"}) == []
