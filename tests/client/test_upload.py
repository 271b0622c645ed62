"""`benchwatch upload`'s client side: CI metadata, the multipart body, retries that never
duplicate (against a local flaky server)."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from benchwatch_client.upload import Uploader, ci_run, metadata, multipart

GITHUB = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_SHA": "3f2c9e1",
    "GITHUB_REF_NAME": "main",
    "GITHUB_SERVER_URL": "https://github.example",
    "GITHUB_REPOSITORY": "org/repo",
    "GITHUB_RUN_ID": "123",
    "GITHUB_RUN_ATTEMPT": "2",
    "GITHUB_JOB": "bench",
}


@pytest.mark.parametrize(
    ("env", "system", "commit", "key"),
    [
        (GITHUB, "github", "3f2c9e1", "gha-123-2-bench"),
        (
            {"GITLAB_CI": "true", "CI_COMMIT_SHA": "abc", "CI_PIPELINE_ID": "7", "CI_JOB_ID": "9"},
            "gitlab",
            "abc",
            "gitlab-7-9",
        ),
        (
            {
                "JENKINS_URL": "http://j",
                "BUILD_NUMBER": "41",
                "JOB_NAME": "perf/nightly",
                "GIT_COMMIT": "def",
            },
            "jenkins",
            "def",
            "jenkins-perf-nightly-41",
        ),
        (
            {
                "BUILDKITE": "true",
                "BUILDKITE_COMMIT": "0a1",
                "BUILDKITE_BUILD_ID": "b",
                "BUILDKITE_JOB_ID": "j",
                "BUILDKITE_RETRY_COUNT": "1",
            },
            "buildkite",
            "0a1",
            "buildkite-b-j-1",
        ),
    ],
)
def test_ci_systems_are_recognised(env: dict[str, str], system: str, commit: str, key: str) -> None:
    found = ci_run(env)
    assert found is not None
    assert (found.system, found.commit, found.key) == (system, commit, key)


def test_flags_win_over_the_ci_and_the_key_names_the_files(tmp_path: Path) -> None:
    files = [tmp_path / "a.csv", tmp_path / "b.json"]
    fields = metadata({"branch": "release/2.6", "machine": "h100-8", "tier": None}, files, GITHUB)
    assert fields["branch"] == "release/2.6"
    assert fields["commit"] == "3f2c9e1"
    assert fields["url"] == "https://github.example/org/repo/actions/runs/123"
    assert fields["key"] == "gha-123-2"  # the workflow's run: each job's upload is a shard
    assert fields["shard"].startswith("bench-")
    assert fields["shards"] == "1"
    assert "tier" not in fields
    other = metadata({}, [tmp_path / "c.csv"], GITHUB)
    assert other["shard"] != fields["shard"]  # two uploads of one job do not collide
    declared = metadata({"shards": "4", "key": "mine"}, files, GITHUB)
    assert (declared["key"], declared["shards"]) == ("mine", "4")
    assert "shard" not in declared  # a key of one's own: no workflow to be a shard of
    # outside CI nothing is invented: the host's name is only a default for the machine's name
    assert metadata({}, files, {}, host="box") == {
        "default_machine": "box",
        "provenance": json.dumps({"default_machine": "this host's name"}),
    }


def test_the_project_comes_from_the_flag_else_the_ci_variable(tmp_path: Path) -> None:
    files = [tmp_path / "a.csv"]
    env = {**GITHUB, "BENCHWATCH_PROJECT": "vision"}
    fields = metadata({}, files, env)
    assert fields["project"] == "vision"
    assert json.loads(fields["provenance"])["project"] == "BENCHWATCH_PROJECT"
    assert metadata({"project": "speech"}, files, env)["project"] == "speech"
    assert "project" not in metadata({}, files, GITHUB)


def test_the_multipart_body_carries_fields_and_files(tmp_path: Path) -> None:
    data = tmp_path / "perf.csv"
    data.write_bytes(b"dev,name\ncuda,BERT\n" * 1000)
    seen: list[int] = []
    content_type, size, chunks = multipart(
        [data], {"machine": "h100-8"}, lambda s, t: seen.append(s)
    )
    body = b"".join(chunks)
    assert len(body) == size
    assert seen[-1] == size
    assert b'name="machine"\r\n\r\nh100-8\r\n' in body
    assert b'filename="perf.csv"' in body
    assert content_type.startswith("multipart/form-data; boundary=")


class Flaky(BaseHTTPRequestHandler):
    """Fails the first requests with 503, then stores the upload."""

    failures = 2
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append(body)
        if len(type(self).bodies) <= type(self).failures:
            self.send_response(503)
            self.end_headers()
            return
        answer = json.dumps({"id": 1, "key": "k", "coverage": {"attempted": 1}}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky_server() -> Iterator[str]:
    Flaky.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_5xx_is_retried_with_the_same_key(flaky_server: str, tmp_path: Path) -> None:
    data = tmp_path / "perf.csv"
    data.write_text("dev,name\n")
    uploader = Uploader(flaky_server, "token", retries=3, backoff_s=0.01)
    response = uploader.send([data], {"key": "gha-1-1-bench"}, "auto")
    assert response.status_code == 201
    assert len(Flaky.bodies) == 3
    assert all(b'name="key"\r\n\r\ngha-1-1-bench' in body for body in Flaky.bodies)


def test_giving_up_after_the_retries_returns_the_last_answer(
    flaky_server: str, tmp_path: Path
) -> None:
    data = tmp_path / "perf.csv"
    data.write_text("dev,name\n")
    response = Uploader(flaky_server, "token", retries=1, backoff_s=0.01).send([data], {}, "auto")
    assert response.status_code == 503
    assert len(Flaky.bodies) == 2


def test_a_ci_link_is_sent_only_when_the_variables_make_an_http_one() -> None:
    """GitHub Actions without GITHUB_SERVER_URL would give '/org/repo/...': the server refuses
    a link that is not http(s), so the client leaves it out instead of failing the upload."""
    partial = {k: v for k, v in GITHUB.items() if k != "GITHUB_SERVER_URL"}
    assert "url" not in metadata({}, [], partial)
    assert metadata({}, [], GITHUB)["url"].startswith("https://github.example/")
