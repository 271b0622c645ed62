"""A regression of one compile config against another (issue 28 point 5, its last clause):
"on run 41, softmax under config freezing is slower than under config default: which of the
slow config's settings cause it".

The worker's run is the daily tier's softmax operator (fp32, inference, CPU) under several
configs, each latency row with the settings it recorded (``extra.compiler_settings``): the
``freezing`` row compiled with ``inductor.freezing`` (its config's own option) and with
``inductor.cpp.simdlen = 1`` (no SIMD in Inductor's C++ kernels), both rows with the worker's
``TORCHINDUCTOR_COMPILE_THREADS=1`` (one compile process: a probe's start on 2 cores).

- The API: asked once, it stores the case, both sides' settings and what
  differs; asked again, the same one; the page says what it compared. Every refusal is a 4xx
  naming its field (unknown ids, another case, a config a probe cannot express, not slower,
  no latency on the run, another project, an uploaded run).
- The CLI's ``configs:RUN:SLOW:FAST`` queues one through Redis and reproduces it by hand.
- The search with a command that answers by the settings it runs under (no torch): a mode's
  options are among a config's settings (``max_autotune`` against ``default`` names
  ``inductor.max_autotune``), and a difference that does not show is not reproduced.
- One real search (slow): the pip provider's environment, the worker's harness compiling the
  case in each probe under a mix of the two configs' settings (``--options-from-settings``):
  the pre-flight and one ddmin probe name ``inductor.cpp.simdlen``, one build.
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from app.core.command_suites import CommandSuite
from app.core.config import Settings
from app.core.db import Database
from app.dashboard.format import MISSING
from app.localization.configs import SETTABLE_CONFIGS
from app.localization.lifecycle import Costs, ProbeRow
from app.tokens import service as tokens_service
from tests.conftest import PEPPER
from tests.factories import run_payload
from workers import repro
from workers.case_probe import OPTIONS_FROM_SETTINGS
from workers.cli.localize import finding
from workers.config_bisect import config_settings
from workers.localize import Found, Oracle, Search

MACHINE = "cpu-box"
IDENTITY = {
    "suite": "benchwatch-operators",
    "model": "softmax",
    "category": "operator",
    "mode": "inference",
    "precision": "fp32",
    "batch_size": 64,
}
THREADS = {"env.TORCHINDUCTOR_COMPILE_THREADS": "1"}
CULPRIT = "inductor.cpp.simdlen"
SLOW = THREADS | {"inductor.freezing": True, CULPRIT: 1}
PAGE = "/api/v1/localizations"


def latency(
    config: str, value: float | None, settings: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """A latency row of the case under ``config`` with the settings it recorded."""
    row: dict[str, Any] = {**IDENTITY, "config": config, "metric": "latency", "unit": "ms"}
    if value is not None:
        row |= {"value": value, "samples": [value * (1 + 0.002 * (i % 5)) for i in range(10)]}
    if settings:
        row["extra"] = {"compiler_settings": settings}
    return row | fields


ROWS = [
    latency("default", 0.17, THREADS),
    latency("freezing", 0.44, SLOW),
    latency("cpp_wrapper", 0.172, THREADS | {"inductor.cpp_wrapper": True}),  # within 5%
    latency("eager", 0.2),
    latency("dynamic", None, status="failed", reason="boom"),
    latency("default", 0.1, precision="bf16"),
]
# Another run: a model the first run has not, and a config the first did not measure.
OTHER_ROWS = [latency("default", 0.3, model="layer_norm"), latency("max_autotune", 0.5)]


def post(
    client: TestClient, headers: dict[str, str], key: str, rows: list[dict[str, Any]], **fields: Any
) -> int:
    payload = run_payload(key, rows, machine=MACHINE, device="cpu", tier="daily", **fields)
    answer = client.post("/api/v1/runs", json=payload, headers=headers)
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def benchmarks(client: TestClient) -> dict[tuple[str, str, str], int]:
    """Benchmark ids by (model, precision, config)."""
    items = client.get("/api/v1/benchmarks", params={"limit": 100}).raise_for_status().json()
    return {(b["model"], b["precision"], b["config"]): b["id"] for b in items["items"]}


def body(run: int, slow: int, fast: int) -> dict[str, Any]:
    return {"kind": "configs", "run_id": run, "slow_benchmark_id": slow, "fast_benchmark_id": fast}


def test_a_config_slower_than_another_is_queued_once_with_each_configs_settings(
    client: TestClient, worker_headers: dict[str, str], triage_headers: dict[str, str]
) -> None:
    run = post(client, worker_headers, "run-41", ROWS)
    ids = benchmarks(client)
    slow, fast = ids["softmax", "fp32", "freezing"], ids["softmax", "fp32", "default"]
    asked = client.post(PAGE, json=body(run, slow, fast), headers=triage_headers)
    assert asked.status_code == 201, asked.text
    made = asked.json()
    assert (made["finding_kind"], made["finding_id"], made["state"]) == ("configs", slow, "queued")
    assert (made["good_run_id"], made["bad_run_id"]) == (run, run)
    assert (made["regression_id"], made["group_id"], made["machine"]) == (None, None, MACHINE)
    assert made["suite_run_id"] is not None
    case = made["case"]
    assert {k: case[k] for k in IDENTITY} == IDENTITY
    assert (case["config"], case["tier"], case["device"], case["metric"]) == (
        "freezing",
        "daily",
        "cpu",
        "latency",
    )
    assert case["against"] == {"benchmark_id": fast, "config": "default"}
    assert (case["before"], case["after"]) == (0.17, 0.44)
    assert case["rel_change"] == pytest.approx(0.44 / 0.17 - 1)
    good, bad = made["good_environment"], made["bad_environment"]
    assert good["torch"] == bad["torch"] == "2.6.0"
    assert (good["compiler_options"], bad["compiler_options"]) == (THREADS, SLOW)
    assert made["answer"]["environment_diff"] == {
        "config": ["default", "freezing"],
        CULPRIT: [None, 1],
        "inductor.freezing": [None, True],
    }
    again = client.post(PAGE, json=body(run, slow, fast), headers=triage_headers)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == made["id"]
    listed = client.get(PAGE, params={"kind": "configs", "finding_id": slow}).json()
    assert [one["id"] for one in listed["items"]] == [made["id"]]
    assert client.get(PAGE, params={"kind": "regression", "finding_id": slow}).json()["total"] == 0

    page = client.get(f"/localizations/{made['id']}")
    assert page.status_code == 200, page.text
    assert f'<a href="/runs/{run}">freezing slower than default</a>: slower by +158.8%' in page.text
    compared = "config freezing (first bad) against config default (last good), both on "
    assert f'{compared}<a href="/runs/{run}">run {run}</a>' in page.text
    assert "What differs between the two configs&#39; settings" in page.text
    assert f"<td>{CULPRIT}</td><td>{MISSING} → 1</td>" in page.text


def test_each_bad_request_is_refused_naming_its_field(
    client: TestClient,
    database: Database,
    worker_headers: dict[str, str],
    triage_headers: dict[str, str],
    ingest_headers: dict[str, str],
) -> None:
    run = post(client, worker_headers, "run-41", ROWS)
    post(client, worker_headers, "run-42", OTHER_ROWS)
    ids = benchmarks(client)
    freezing, default = ids["softmax", "fp32", "freezing"], ids["softmax", "fp32", "default"]
    refusals: list[tuple[dict[str, Any], int, str, str]] = [
        (body(99999, freezing, default), 404, "run_id", "run 99999 not found"),
        (body(run, 99999, default), 404, "slow_benchmark_id", "benchmark 99999 not found"),
        (body(run, freezing, 99999), 404, "fast_benchmark_id", "benchmark 99999 not found"),
        ({"kind": "configs", "run_id": run}, 422, "slow_benchmark_id", "required for kind configs"),
        ({**body(run, freezing, default), "id": 1}, 422, "id", "not taken for kind configs"),
        ({"kind": "regression", "id": 1, "run_id": run}, 422, "run_id", "not taken"),
        (body(run, freezing, freezing), 422, "fast_benchmark_id", "the slow benchmark itself"),
        (
            body(run, freezing, ids["softmax", "bf16", "default"]),
            422,
            "fast_benchmark_id",
            "precision 'bf16' is not",
        ),
        (
            body(run, freezing, ids["layer_norm", "fp32", "default"]),
            422,
            "fast_benchmark_id",
            "model 'layer_norm' is not",
        ),
        (
            body(run, freezing, ids["softmax", "fp32", "eager"]),
            422,
            "fast_benchmark_id",
            "config eager is not compiled by torch.compile",
        ),
        (body(run, default, freezing), 422, "slow_benchmark_id", "is not slower than"),
        (
            body(run, ids["softmax", "fp32", "cpp_wrapper"], default),
            422,
            "slow_benchmark_id",
            "(+1.2%), within 5%",
        ),
        (
            body(run, ids["softmax", "fp32", "max_autotune"], default),
            422,
            "slow_benchmark_id",
            f"run {run} has no latency result",
        ),
        (
            body(run, ids["softmax", "fp32", "dynamic"], default),
            422,
            "slow_benchmark_id",
            f"on run {run} is failed: boom",
        ),
    ]
    for asked, status, where, said in refusals:
        answer = client.post(PAGE, json=asked, headers=triage_headers)
        assert answer.status_code == status, (asked, answer.text)
        error = answer.json()
        assert error["errors"][0]["loc"] == where, (asked, answer.text)
        assert said in error["detail"] or said in error["errors"][0]["message"], (asked, error)
    # Another project's token; a run uploaded by CI (no worker measures its case).
    with database.session_scope() as session:
        _, nlp = tokens_service.create_token(session, "nlp", ["triage"], PEPPER, project="nlp")
    refused = client.post(
        PAGE, json=body(run, freezing, default), headers={"Authorization": f"Bearer {nlp}"}
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["errors"][0]["loc"] == "run_id"
    uploaded = post(client, ingest_headers, "ci-7", ROWS)
    answer = client.post(PAGE, json=body(uploaded, freezing, default), headers=triage_headers)
    assert answer.status_code == 409, answer.text
    assert f"run {uploaded} comes from ci in tier daily" in answer.json()["detail"]
    assert client.get(PAGE).json()["total"] == 0


def test_the_cli_names_a_configs_pair_as_run_slow_fast() -> None:
    assert finding("configs:41:7:8") == ("configs", 41, 7, 8)
    assert finding("regression:12") == ("regression", 12)
    for text in ("configs:41:7", "configs:41:7:8:9", "configs:0:7:8", "regression:1:2", "configs"):
        with pytest.raises(Exception, match="names no finding"):
            finding(text)


def cli(database: Database, redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    env |= {"BENCHWATCH_DATABASE_URL": database.url, "BENCHWATCH_BROKER_URL": redis_url}
    return subprocess.run(
        [sys.executable, "-m", "workers.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_localize_and_repro_take_a_configs_pair(
    client: TestClient, database: Database, worker_headers: dict[str, str], redis_url: str
) -> None:
    run = post(client, worker_headers, "run-41", ROWS)
    ids = benchmarks(client)
    slow, fast = ids["softmax", "fp32", "freezing"], ids["softmax", "fp32", "default"]
    pair = f"configs:{run}:{slow}:{fast}"
    asked = cli(database, redis_url, "localize", pair)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.splitlines() == ["localization 1 queued"]
    assert f"{pair}: benchwatch-operators/softmax latency on {MACHINE}, sent" in asked.stderr
    again = cli(database, redis_url, "localize", pair)
    assert again.stdout.splitlines() == ["localization 1 queued"], again.stderr
    assert redis.Redis.from_url(redis_url).llen(f"bench.{MACHINE}") == 1

    shown = cli(database, redis_url, "repro", pair)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{pair} on {MACHINE}: benchwatch-operators/softmax latency")
    measure = [line for line in shown.stdout.splitlines() if line.strip().startswith("measure:")]
    assert len(measure) == 2, shown.stdout
    assert all(OPTIONS_FROM_SETTINGS in line for line in measure), measure
    under = [
        json.loads(line.split("under:", 1)[1])
        for line in shown.stdout.splitlines()
        if "under:" in line
    ]
    assert under == [THREADS, SLOW], shown.stdout

    refused = cli(database, redis_url, "localize", f"configs:{run}:{fast}:{slow}")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"benchwatch: benchmark {fast} (default) is not slower"), (
        refused.stderr
    )
    assert len(refused.stderr.strip().splitlines()) == 1


def test_a_configs_own_options_and_mode_are_among_its_settings() -> None:
    assert config_settings("default", "cuda") == {}
    assert config_settings("cpp_wrapper", "cpu") == {"inductor.cpp_wrapper": True}
    assert config_settings("freezing", "cpu") == {"inductor.freezing": True}
    # A mode's options, as torch.compile applies them: CUDA graphs from reduce-overhead on a GPU.
    assert config_settings("cudagraphs", "cpu") == {}
    assert config_settings("cudagraphs", "rocm") == {"inductor.triton.cudagraphs": True}
    assert config_settings("max_autotune_no_cudagraphs", "cpu") == {
        "inductor.max_autotune": True,
        "inductor.coordinate_descent_tuning": True,
    }
    assert config_settings("dynamic", "cpu") == {"dynamo.assume_static_by_default": False}
    assert all(isinstance(config_settings(config, "cpu"), dict) for config in SETTABLE_CONFIGS)


# A command that measures the case under the settings it runs under, without torch: 14 ms
# where inductor.max_autotune is set (or, with FLAT, everywhere 10 ms).
BY_SETTINGS = r"""
import json, os, sys
settings = json.loads(os.environ.get("BENCHWATCH_COMPILER_SETTINGS", "{}"))
case = json.loads(sys.argv[1])
slow = settings.get("inductor.max_autotune") is True and not os.environ.get("FLAT")
level = 14.0 if slow else 10.0
row = {**case, "metric": "latency", "unit": "ms",
       "samples": [level * (1 + 0.001 * i) for i in range(10)]}
run = {"key": "probe", "machine": {"name": "cpu-box", "device": "cpu"},
       "environment": {"channel": "probe"}, "results": [row]}
with open(os.path.join(os.environ["BENCHWATCH_OUTPUT_DIR"], "case.json"), "w") as out:
    json.dump(run, out)
"""


def search(
    config: Settings,
    case: dict[str, Any],
    good: dict[str, Any],
    bad: dict[str, Any],
    suite: CommandSuite,
) -> tuple[Found, list[ProbeRow]]:
    rows: list[ProbeRow] = []

    def report(row: ProbeRow, costs: Costs) -> None:
        rows.append(row)

    oracle = Oracle(repro.measuring(suite, MACHINE, config), case)
    return Search(oracle, good, bad, {}, report).run(), rows


def configs_case(slow: str, fast: str, tier: str = "daily") -> dict[str, Any]:
    return {
        **IDENTITY,
        "config": slow,
        "params": {},
        "tier": tier,
        "metric": "latency",
        "unit": "ms",
        "higher_is_better": False,
        "device": "cpu",
        "against": {"benchmark_id": 2, "config": fast},
    }


def test_a_modes_options_are_bisected_and_a_difference_that_does_not_show_is_not_reproduced(
    tmp_path: Path,
) -> None:
    script = tmp_path / "by_settings.py"
    script.write_text(BY_SETTINGS)
    case = configs_case("max_autotune", "default")
    identity = json.dumps({k: case[k] for k in (*IDENTITY, "config")})
    config = Settings(ENV_CACHE=str(tmp_path / "envs"))
    recorded = {"torch": "2.6.0", "compiler_options": THREADS}
    both = {
        "good": {"config": "default", "settings": THREADS},
        "bad": {
            "config": "max_autotune",
            "settings": THREADS | config_settings("max_autotune", "cpu"),
        },
    }

    def by_settings(**env: str) -> CommandSuite:
        command = [sys.executable, str(script), identity]
        return CommandSuite(command=command, env=env, outputs=["case.json"], format="native")

    found, rows = search(config, case, recorded, recorded, by_settings())
    assert found.state == "culprit_found", (found.reason, found.answer)
    # ddmin over the mode's three options (recorded on neither row) named the one that slows.
    assert found.answer["culprit"] == {
        "kind": "setting",
        "names": ["inductor.max_autotune"],
        "values": {"inductor.max_autotune": [None, True]},
    }
    assert found.answer["configs"] == both
    assert {row.strategy for row in rows} == {"settings"}
    assert found.costs.builds == 1

    found, rows = search(config, case, recorded, recorded, by_settings(FLAT="1"))
    assert found.state == "not_reproduced", (found.reason, found.answer)
    assert found.answer["configs"] == both
    assert found.answer["preflight"]["reproduced"] is False
    assert [row.outcome for row in rows] == ["reference", "reference"]
    # Two configs whose settings are the same here: nothing to bisect, said so.
    found, rows = search(
        config, configs_case("cudagraphs", "default"), recorded, recorded, by_settings()
    )
    assert found.state == "inconclusive", found.reason
    assert found.reason.startswith("configs default and cudagraphs compile with the same settings")
    assert rows == []


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_slow_configs_setting_is_named_by_compiling_the_case_under_each_mix(
    client: TestClient,
    worker_headers: dict[str, str],
    triage_headers: dict[str, str],
    tmp_path: Path,
) -> None:
    run = post(client, worker_headers, "run-41", ROWS[:2])
    ids = benchmarks(client)
    slow, fast = ids["softmax", "fp32", "freezing"], ids["softmax", "fp32", "default"]
    made = client.post(PAGE, json=body(run, slow, fast), headers=triage_headers).json()
    case, good, bad = made["case"], made["good_environment"], made["bad_environment"]
    config = Settings(ENV_CACHE=str(tmp_path / "envs"))
    suite = repro.suite_of(case, config)
    assert isinstance(suite, CommandSuite), suite
    assert OPTIONS_FROM_SETTINGS in suite.command

    found, rows = search(config, case, good, bad, suite)

    probes = [(row.label, row.outcome, round(statistics.median(row.samples), 3)) for row in rows]
    # Every probe in the output before any assertion: a failure's captured stdout shows
    # them all, where its message cuts them at a few hundred characters.
    print(f"\nconfigs bisection: {probes}; costs {found.costs}")  # noqa: T201
    assert found.state == "culprit_found", (found.reason, probes)
    assert found.answer["culprit"] == {
        "kind": "setting",
        "names": [CULPRIT],
        "values": {CULPRIT: [None, 1]},
    }, probes
    assert found.answer["configs"]["bad"] == {"config": "freezing", "settings": SLOW}
    judged = {row.label: row.outcome for row in rows if row.outcome != "reference"}
    assert judged[f"good with {CULPRIT} from bad"] == "bad", probes
    references = {
        row.label: statistics.median(row.samples) for row in rows if row.outcome == "reference"
    }
    assert references["first bad (reference)"] > 1.5 * references["last good (reference)"], probes
    assert found.costs.builds == 1
    assert found.costs.probe_count == len(judged) <= 2, probes
