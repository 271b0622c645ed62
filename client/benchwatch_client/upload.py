"""Uploads: send result files to a benchwatch server from any CI job.

Run metadata comes from flags or, when absent, from the CI's environment (GitHub Actions,
GitLab CI, Jenkins, Buildkite): commit, branch, job URL, and an idempotency key. In a CI
that runs a workflow of jobs, the key is the workflow's (its run id and attempt) and each
job's upload is a shard of it (the job and the files it sends), so the shard jobs of one
workflow make one run and a retried step never stores anything twice; ``--shards N`` says
how many uploads make the run whole. A pull request's upload names its own branch and head
commit (not GitHub's merge commit) and, where git can tell, its fork point (merge base).
The machine's name comes from the flag, else the files, else the CI runner's name, else
this host's name; the run records where each field came from. Exit codes CI can act on:
0 stored, 1 rejected input, 2 server unreachable (or detection did not finish), 3
regressions found (with ``--fail-on-regression``: a pull request's verdicts at once, the
default branch's detection when it finishes).
"""

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchwatch_client.fields import DEFAULT_MACHINE, PROVENANCE
from benchwatch_client.text import is_http_url

OK, REJECTED, UNREACHABLE, REGRESSED = 0, 1, 2, 3
CHUNK = 256 * 1024


# Variables that name the CI runner (GitHub Actions, GitLab CI, Buildkite, Jenkins), in the
# order they are asked: the machine's name when neither a flag nor the files give one.
RUNNER_VARIABLES = ("RUNNER_NAME", "CI_RUNNER_DESCRIPTION", "BUILDKITE_AGENT_NAME", "NODE_NAME")
HOST_NAME = "this host's name"


@dataclass(frozen=True)
class CiRun:
    """What a CI system's environment says about the job, and the variables it read."""

    system: str
    commit: str
    branch: str
    url: str
    key: str
    # field -> the variables it came from, for the run's provenance
    sources: Mapping[str, str] = field(default_factory=dict)
    workflow: str = ""  # the key of the workflow the job is part of ("": no such thing)
    job: str = ""  # the job within it: its uploads are shards of the workflow's run
    base_commit: str = ""  # a pull request's fork point, where the CI says it
    default_branch: str = ""  # the repository's, where the CI says it


def ci_run(env: Mapping[str, str]) -> CiRun | None:
    """The CI job this process runs in, from its environment variables; None outside CI."""
    get = env.get
    if get("GITHUB_ACTIONS") == "true":
        return _github(env)
    if get("GITLAB_CI") == "true":
        pipeline = f"gitlab-{get('CI_PIPELINE_ID', '')}"
        key = f"{pipeline}-{get('CI_JOB_ID', '')}"
        # A merge request pipeline names its source branch; a branch pipeline, its branch.
        branch_from = "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"
        if not get(branch_from):
            branch_from = "CI_COMMIT_REF_NAME"
        sources = _sources(
            "CI_COMMIT_SHA",
            branch_from,
            "CI_JOB_URL",
            "CI_PIPELINE_ID, CI_JOB_ID",
            "GITLAB_CI",
        )
        return CiRun(
            "gitlab",
            get("CI_COMMIT_SHA", ""),
            get(branch_from, ""),
            get("CI_JOB_URL", ""),
            key,
            sources,
            workflow=pipeline,
            job=get("CI_JOB_NAME") or get("CI_JOB_ID", ""),
            base_commit=get("CI_MERGE_REQUEST_DIFF_BASE_SHA", ""),
            default_branch=get("CI_DEFAULT_BRANCH", ""),
        )
    if get("BUILDKITE") == "true":
        build = f"buildkite-{get('BUILDKITE_BUILD_ID', '')}"
        key = f"{build}-{get('BUILDKITE_JOB_ID', '')}-{get('BUILDKITE_RETRY_COUNT', '0')}"
        commit, branch = get("BUILDKITE_COMMIT", ""), get("BUILDKITE_BRANCH", "")
        sources = _sources(
            "BUILDKITE_COMMIT",
            "BUILDKITE_BRANCH",
            "BUILDKITE_BUILD_URL",
            "BUILDKITE_BUILD_ID, BUILDKITE_JOB_ID, BUILDKITE_RETRY_COUNT",
            "BUILDKITE",
        )
        return CiRun(
            "buildkite",
            commit,
            branch,
            get("BUILDKITE_BUILD_URL", ""),
            key,
            sources,
            workflow=build,
            job=f"{get('BUILDKITE_JOB_ID', '')}-{get('BUILDKITE_RETRY_COUNT', '0')}",
        )
    if get("JENKINS_URL") and get("BUILD_NUMBER"):
        key = f"jenkins-{get('JOB_NAME', '')}-{get('BUILD_NUMBER', '')}".replace("/", "-")
        branch = get("BRANCH_NAME") or get("GIT_BRANCH", "")
        branch_from = "BRANCH_NAME" if get("BRANCH_NAME") else "GIT_BRANCH"
        sources = _sources(
            "GIT_COMMIT", branch_from, "BUILD_URL", "JOB_NAME, BUILD_NUMBER", "JENKINS_URL"
        )
        return CiRun("jenkins", get("GIT_COMMIT", ""), branch, get("BUILD_URL", ""), key, sources)
    return None


def _github(env: Mapping[str, str]) -> CiRun:
    """GitHub Actions: on a pull request, its own branch and head commit, and its base."""
    get = env.get
    url = f"{get('GITHUB_SERVER_URL', '')}/{get('GITHUB_REPOSITORY', '')}/actions/runs/"
    run_id = get("GITHUB_RUN_ID", "")
    workflow = f"gha-{run_id}-{get('GITHUB_RUN_ATTEMPT', '1')}"
    # GITHUB_SHA and GITHUB_REF_NAME are a test merge commit and "<n>/merge" on a pull
    # request: its head commit and branch are in the event and GITHUB_HEAD_REF.
    event = _event(env)
    pull = event.get("pull_request") or {}
    head = str((pull.get("head") or {}).get("sha") or "")
    commit, commit_from = (
        (head, "GITHUB_EVENT_PATH pull_request.head.sha")
        if head
        else (
            get("GITHUB_SHA", ""),
            "GITHUB_SHA",
        )
    )
    branch_from = "GITHUB_HEAD_REF" if get("GITHUB_HEAD_REF") else "GITHUB_REF_NAME"
    sources = _sources(
        commit_from,
        branch_from,
        "GITHUB_SERVER_URL, GITHUB_REPOSITORY, GITHUB_RUN_ID",
        "GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, GITHUB_JOB",
        "GITHUB_ACTIONS",
    )
    base = str((pull.get("base") or {}).get("sha") or "")
    return CiRun(
        "github",
        commit,
        get(branch_from, ""),
        url + run_id,
        f"{workflow}-{get('GITHUB_JOB', '')}",
        sources,
        workflow=workflow,
        job=get("GITHUB_JOB", ""),
        base_commit=merge_base(commit, base) if commit and base else "",
        default_branch=_default_branch(event),
    )


def _default_branch(event: dict[str, Any]) -> str:
    """The repository's default branch, as GitHub's event says it ("" when it does not)."""
    repository = event.get("repository")
    branch = repository.get("default_branch") if isinstance(repository, dict) else None
    return branch if isinstance(branch, str) else ""


def _event(env: Mapping[str, str]) -> dict[str, Any]:
    """The GitHub event that started the workflow (empty when it cannot be read)."""
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        with open(path, "rb") as handle:
            event = json.loads(handle.read(10 * 1024 * 1024))
    except (OSError, ValueError):
        return {}
    return event if isinstance(event, dict) else {}


SHA = re.compile(r"[0-9a-fA-F]{7,64}")


def merge_base(head: str, base: str) -> str:
    """Where ``head`` forked from ``base``, as the checkout's git says ("" when it cannot).

    A shallow checkout (GitHub's default) has no history to tell: the server then compares
    with the newest default-branch run before the upload.
    """
    if not (SHA.fullmatch(head) and SHA.fullmatch(base)):
        return ""
    try:
        found = subprocess.run(
            ["git", "merge-base", head, base],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    answer = found.stdout.strip()
    return answer if found.returncode == 0 and SHA.fullmatch(answer) else ""


def _sources(commit: str, branch: str, url: str, key: str, trigger: str) -> dict[str, str]:
    return {
        "commit": commit,
        "branch": branch,
        "url": url,
        "key": f"{key} and the file names",
        "trigger": trigger,
    }


PROJECT_VARIABLE = "BENCHWATCH_PROJECT"  # the project of a CI's uploads, without --project


def metadata(
    flags: dict[str, str | None],
    files: list[Path],
    env: Mapping[str, str],
    host: str | None = None,
) -> dict[str, str]:
    """Run metadata: flags first, then the CI's environment; and where each field came from.

    The machine's name, when no flag gives it, is left to the files (the server reads the
    name they give) with the CI runner's name, else ``host`` (default: this host's), as the
    ``default_machine`` for files that name none. ``provenance`` says where each field sent
    came from.
    """
    fields = {name: value for name, value in flags.items() if value}
    said = {name: f"flag --{name.replace('_', '-')}" for name in fields}
    ci = ci_run(env)
    if ci is not None:
        names = hashlib.sha256("\0".join(sorted(f.name for f in files)).encode()).hexdigest()
        found = {
            "commit": ci.commit,
            "branch": ci.branch,
            # inferred, so left out when the CI's variables make no link
            "url": ci.url if is_http_url(ci.url) else "",
            "trigger": "ci",
            "base_commit": ci.base_commit,
            "default_branch": ci.default_branch,
        }
        if ci.workflow and "key" not in fields:
            # One run per workflow: each job's upload (its files) is a shard of it.
            found["key"] = ci.workflow
            found["shard"] = shard_name(f"{ci.job}-{names[:8]}")
            ci_sources = {**ci.sources, "shard": "the CI job and the file names"}
        else:
            found["key"] = f"{ci.key}-{names[:8]}"  # several uploads per job may differ
            ci_sources = dict(ci.sources)
        ci_sources.setdefault("base_commit", "git merge-base of the pull request's head and base")
        if ci.system == "gitlab":
            ci_sources["base_commit"] = "CI_MERGE_REQUEST_DIFF_BASE_SHA"
        ci_sources["default_branch"] = {
            "github": "GITHUB_EVENT_PATH repository.default_branch",
            "gitlab": "CI_DEFAULT_BRANCH",
        }.get(ci.system, "")
        for name, value in found.items():
            if value and name not in fields:
                fields[name], said[name] = value, ci_sources[name]
    if fields.get("shard") and not fields.get("shards"):
        fields["shards"], said["shards"] = "1", "default (1: give --shards for more)"
    if "project" not in fields and (project := env.get(PROJECT_VARIABLE, "").strip()):
        fields["project"], said["project"] = project, PROJECT_VARIABLE  # set once per CI
    if "machine" not in fields:
        runner = next((v for v in RUNNER_VARIABLES if env.get(v, "").strip()), None)
        default = env[runner].strip() if runner else (host or socket.gethostname()).strip()
        if default:
            fields[DEFAULT_MACHINE], said[DEFAULT_MACHINE] = default, runner or HOST_NAME
    if said:
        fields[PROVENANCE] = json.dumps(said)
    return fields


def shard_name(text: str) -> str:
    """A shard's name as the server takes it: letters, digits and ``_.:+-``, at most 128."""
    name = re.sub(r"[^A-Za-z0-9_.:+\-]+", "-", text).strip("-")[:128]
    return name if name and name[0].isalnum() else f"job-{name}"[:128]


def multipart(
    files: list[Path], fields: dict[str, str], progress: Callable[[int, int], None] | None
) -> tuple[str, int, Iterator[bytes]]:
    """A multipart/form-data body as chunks (its content type and size), reporting progress."""
    boundary = uuid.uuid4().hex
    parts: list[bytes | Path] = []
    for name, value in fields.items():
        parts.append(_part_head(boundary, f'name="{name}"') + value.encode() + b"\r\n")
    for path in files:
        head = f'name="file"; filename="{path.name}"\r\nContent-Type: application/octet-stream'
        parts += [_part_head(boundary, head), path, b"\r\n"]
    parts.append(f"--{boundary}--\r\n".encode())
    total = sum(p.stat().st_size if isinstance(p, Path) else len(p) for p in parts)

    def chunks() -> Iterator[bytes]:
        sent = 0
        for part in parts:
            for chunk in _chunks_of(part):
                sent += len(chunk)
                if progress is not None:
                    progress(sent, total)
                yield chunk

    return f"multipart/form-data; boundary={boundary}", total, chunks()


def _part_head(boundary: str, disposition: str) -> bytes:
    return f"--{boundary}\r\nContent-Disposition: form-data; {disposition}\r\n\r\n".encode()


def _chunks_of(part: bytes | Path) -> Iterator[bytes]:
    if isinstance(part, bytes):
        yield part
        return
    with part.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            yield chunk


@dataclass(frozen=True)
class Uploader:
    """Talks to one server with one token; retries what is safe to retry."""

    server: str
    token: str
    retries: int = 5
    backoff_s: float = 1.0
    transport: httpx.BaseTransport | None = None

    def client(self) -> httpx.Client:
        """An HTTP client for the server, with the token."""
        return httpx.Client(
            base_url=self.server.rstrip("/"),
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx.Timeout(60.0, read=600.0),
            transport=self.transport,
        )

    def run_url(self, run_id: int) -> str:
        """The run's page on the server."""
        return f"{self.server.rstrip('/')}/runs/{run_id}"

    def send(
        self,
        files: list[Path],
        fields: dict[str, str],
        fmt: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> httpx.Response:
        """POST the upload; connection errors and 5xx are retried with backoff (same key)."""
        with self.client() as client:
            for attempt in range(self.retries + 1):
                content_type, size, body = multipart(files, fields, progress)
                try:
                    response = client.post(
                        "/api/v1/uploads",
                        params={"format": fmt},
                        content=body,
                        headers={"Content-Type": content_type, "Content-Length": str(size)},
                    )
                except httpx.TransportError:
                    if attempt == self.retries:
                        raise
                else:
                    if response.status_code < 500 or attempt == self.retries:
                        return response
                time.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    def verdicts_of(self, run_id: int) -> Any:
        """The run's verdicts against the default branch (None: the server gave none).

        A 503 (the server is computing as many verdicts as it will at once) is asked again
        with the upload's backoff, or after its ``Retry-After`` where that is longer.
        """
        with self.client() as client:
            for attempt in range(self.retries + 1):
                response = client.get(f"/api/v1/runs/{run_id}/verdicts")
                if response.status_code != 503 or attempt == self.retries:
                    break
                time.sleep(max(self.backoff_s * 2**attempt, _retry_after(response)))
        return response.json() if response.status_code == 200 else None

    def regressions_of(self, run_id: int, wait_s: float) -> list[dict[str, Any]] | None:
        """Regressions this run's detection confirmed; None if it did not run within wait_s."""
        deadline = time.monotonic() + wait_s
        with self.client() as client:
            while client.get(f"/api/v1/runs/{run_id}").json().get("detected_at") is None:
                if time.monotonic() > deadline:
                    return None
                time.sleep(2.0)
            found = client.get(
                "/api/v1/regressions",
                params={"found_by_run_id": run_id, "direction": "regression", "limit": 500},
            )
            items: list[dict[str, Any]] = found.json()["items"]
            return items


def _retry_after(response: httpx.Response) -> float:
    """The seconds a 503 asks the client to wait (0: it names none, or not as seconds)."""
    try:
        return min(float(response.headers.get("Retry-After", "0")), 60.0)
    except ValueError:
        return 0.0


def describe_regression(regression: dict[str, Any]) -> str:
    """One line per regression for a CI log."""
    series = regression["series"]
    benchmark, metric = series["benchmark"], series["metric"]["name"]
    state = regression.get("state", "confirmed")
    return (
        f"  {benchmark['suite']}/{benchmark['model']} {benchmark['config']} "
        f"{benchmark['precision']} {benchmark['mode']}: {metric} "
        f"{regression['rel_change']:+.1%} ({regression['before']:.4g} -> {regression['after']:.4g})"
        + ("" if state == "confirmed" else f" [{state}]")
    )


def describe_sources(run: Mapping[str, Any], only: tuple[str, ...] = ()) -> list[str]:
    """Each recorded field of a run (a dry run's or the server's answer) and where it came from.

    ``only``: these fields (default: all that ``extra.provenance`` names).
    """
    sources: Mapping[str, str] = run.get("extra", {}).get("provenance", {})
    lines = []
    for path, source in sources.items():
        if only and path not in only:
            continue
        value: Any = run
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        lines.append(f"{path} = {'' if value is None else value}  (from {source})")
    return lines


def print_errors(body: dict[str, Any]) -> None:
    """The server's explanation of a rejected upload."""
    print(f"rejected: {body.get('detail', body)}", file=sys.stderr)
    for error in body.get("errors", []):
        print(f"  {json.dumps(error)}", file=sys.stderr)


def environment() -> Mapping[str, str]:
    """This process's environment variables (a seam for tests)."""
    return os.environ
