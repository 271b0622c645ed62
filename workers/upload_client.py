"""``benchwatch upload``: send result files to a benchwatch server from any CI job.

Run metadata comes from flags or, when absent, from the CI's environment (GitHub Actions,
GitLab CI, Jenkins, Buildkite): commit, branch, job URL, and an idempotency key made of the
CI run id, attempt and job, so a retried step never stores the run twice. Exit codes CI can
act on: 0 stored, 1 rejected input, 2 server unreachable (or detection did not finish), 3
regressions found (with ``--fail-on-regression``).
"""

import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.core.urls import is_http_url

OK, REJECTED, UNREACHABLE, REGRESSED = 0, 1, 2, 3
CHUNK = 256 * 1024


@dataclass(frozen=True)
class CiRun:
    """What a CI system's environment says about the job."""

    system: str
    commit: str
    branch: str
    url: str
    key: str


def ci_run(env: Mapping[str, str]) -> CiRun | None:
    """The CI job this process runs in, from its environment variables; None outside CI."""
    get = env.get
    if get("GITHUB_ACTIONS") == "true":
        url = f"{get('GITHUB_SERVER_URL', '')}/{get('GITHUB_REPOSITORY', '')}/actions/runs/"
        run_id = get("GITHUB_RUN_ID", "")
        key = f"gha-{run_id}-{get('GITHUB_RUN_ATTEMPT', '1')}-{get('GITHUB_JOB', '')}"
        return CiRun("github", get("GITHUB_SHA", ""), get("GITHUB_REF_NAME", ""), url + run_id, key)
    if get("GITLAB_CI") == "true":
        key = f"gitlab-{get('CI_PIPELINE_ID', '')}-{get('CI_JOB_ID', '')}"
        branch = get("CI_COMMIT_REF_NAME", "")
        return CiRun("gitlab", get("CI_COMMIT_SHA", ""), branch, get("CI_JOB_URL", ""), key)
    if get("BUILDKITE") == "true":
        job = f"{get('BUILDKITE_BUILD_ID', '')}-{get('BUILDKITE_JOB_ID', '')}"
        key = f"buildkite-{job}-{get('BUILDKITE_RETRY_COUNT', '0')}"
        commit, branch = get("BUILDKITE_COMMIT", ""), get("BUILDKITE_BRANCH", "")
        return CiRun("buildkite", commit, branch, get("BUILDKITE_BUILD_URL", ""), key)
    if get("JENKINS_URL") and get("BUILD_NUMBER"):
        key = f"jenkins-{get('JOB_NAME', '')}-{get('BUILD_NUMBER', '')}".replace("/", "-")
        branch = get("BRANCH_NAME") or get("GIT_BRANCH", "")
        return CiRun("jenkins", get("GIT_COMMIT", ""), branch, get("BUILD_URL", ""), key)
    return None


def metadata(
    flags: dict[str, str | None], files: list[Path], env: Mapping[str, str]
) -> dict[str, str]:
    """Run metadata: flags first, then the CI's environment."""
    fields = {name: value for name, value in flags.items() if value}
    ci = ci_run(env)
    if ci is not None:
        fields.setdefault("commit", ci.commit)
        fields.setdefault("branch", ci.branch)
        if is_http_url(ci.url):  # inferred, so left out when the CI's variables make no link
            fields.setdefault("url", ci.url)
        fields.setdefault("trigger", "ci")
        names = hashlib.sha256("\0".join(sorted(f.name for f in files)).encode()).hexdigest()
        fields.setdefault("key", f"{ci.key}-{names[:8]}")  # several uploads per job may differ
    return {name: value for name, value in fields.items() if value}


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


def describe_regression(regression: dict[str, Any]) -> str:
    """One line per regression for a CI log."""
    series = regression["series"]
    benchmark, metric = series["benchmark"], series["metric"]["name"]
    return (
        f"  {benchmark['suite']}/{benchmark['model']} {benchmark['config']} "
        f"{benchmark['precision']} {benchmark['mode']}: {metric} "
        f"{regression['rel_change']:+.1%} ({regression['before']:.4g} -> {regression['after']:.4g})"
    )


def print_errors(body: dict[str, Any]) -> None:
    """The server's explanation of a rejected upload."""
    print(f"rejected: {body.get('detail', body)}", file=sys.stderr)
    for error in body.get("errors", []):
        print(f"  {json.dumps(error)}", file=sys.stderr)


def environment() -> Mapping[str, str]:
    """This process's environment variables (a seam for tests)."""
    return os.environ
