"""The newcomer's path: `benchwatch serve` on the embedded default, a token, a curl-like post."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, inspect

from app.runs.schemas import EXAMPLE_RUN

BENCHWATCH = [sys.executable, "-m", "workers.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BENCHWATCH, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def embedded_env(tmp_path: Path) -> dict[str, str]:
    """No BENCHWATCH_* settings at all; the user data dir points into tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["HOME"] = str(tmp_path)
    return env


@pytest.fixture
def server(embedded_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [*BENCHWATCH, "serve", "--port", str(port)],
        env=embedded_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            process.kill()
            pytest.fail(f"server did not get ready: {(tmp_path / 'serve.log').read_text()}")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_newcomer_flow_on_the_embedded_default(
    server: str, embedded_env: dict[str, str], tmp_path: Path
) -> None:
    database = tmp_path / "data" / "benchwatch" / "benchwatch.db"
    assert database.exists()  # the SQLite file lives in the user's data dir
    created = cli(embedded_env, "token", "create", "--name", "ci", "--scope", "ingest")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("bw_")
    assert "not shown again" in created.stderr

    headers = {"Authorization": f"Bearer {token}"}
    posted = httpx.post(f"{server}/api/v1/runs", json=EXAMPLE_RUN, headers=headers)
    assert posted.status_code == 201, posted.text
    run = httpx.get(f"{server}/api/v1/runs/{posted.json()['id']}").json()
    assert len(run["results"]) == 3
    assert httpx.post(f"{server}/api/v1/runs", json=EXAMPLE_RUN, headers=headers).status_code == 200

    listed = cli(embedded_env, "token", "list")
    assert "ci" in listed.stdout
    assert "active" in listed.stdout
    assert token not in listed.stdout
    revoked = cli(embedded_env, "token", "revoke", "ci")
    assert revoked.returncode == 0
    assert "revoked" in revoked.stdout
    assert httpx.post(f"{server}/api/v1/runs", json=EXAMPLE_RUN, headers=headers).status_code == 401
    assert "revoked" in cli(embedded_env, "token", "list").stdout


def test_only_the_token_hash_is_stored(embedded_env: dict[str, str], tmp_path: Path) -> None:
    assert cli(embedded_env, "migrate").returncode == 0
    token = cli(embedded_env, "token", "create", "--name", "x", "--scope", "admin").stdout.strip()
    raw = (tmp_path / "data" / "benchwatch" / "benchwatch.db").read_bytes()
    assert token.encode() not in raw
    assert token[3:].encode() not in raw


def test_cli_errors_are_clear(embedded_env: dict[str, str]) -> None:
    cli(embedded_env, "migrate")
    missing = cli(embedded_env, "token", "revoke", "nobody")
    assert missing.returncode == 2
    assert "no token with id or name 'nobody'" in missing.stderr
    bad_scope = cli(embedded_env, "token", "create", "--name", "x", "--scope", "root")
    assert bad_scope.returncode != 0
    assert "invalid choice" in bad_scope.stderr


def test_migrate_upgrades_postgres(postgres_url: str) -> None:
    env = {**os.environ, "BENCHWATCH_DATABASE_URL": postgres_url}
    result = cli(env, "migrate")
    assert result.returncode == 0, result.stderr
    engine = create_engine(postgres_url)
    assert {"run", "result", "series", "api_token"} <= set(inspect(engine).get_table_names())
    engine.dispose()
