"""Ingest throughput and read latency of a real benchwatch server, on SQLite and on Postgres.

What it measures, end to end through HTTP (a ``benchwatch serve`` subprocess per backend):

1. **Ingest, steady state.** Runs of 2,000 results (250 cases x 8 metrics: speedup,
   abs_latency, compilation_latency, compression_ratio, dynamo_peak_mem, eager_peak_mem,
   accuracy, graph_breaks, with raw samples), each under a new key, posted by several client
   threads. One run first creates the catalog (benchmarks, metrics, series); the timed runs
   reuse those series, as every nightly after the first does. A few untimed runs before them
   warm every server connection (psycopg prepares a statement on its fifth use). Printed:
   results/s over the wall time and p50/p95 latency of one POST.
2. **A year of history (Postgres).** 730 runs 12 hours apart of ~1,400 results on one machine
   and channel (>= 1,000,000 results; every series gets 730 points), posted through the API.
3. **Reads on that year (Postgres).** ``GET /api/v1/series/{id}/points`` over a one-year
   window for many different series, and ``GET /api/v1/summary?machine=`` (alone and against
   a base run), one request at a time: p50/p95 latency.

The Postgres server runs in production mode (a Redis broker; detection tasks are queued for
workers, none of which runs here), so its figures are ingestion alone. The SQLite server runs
the embedded default: detection runs in the server process after each upload, beside it.

Targets are printed beside the figures. Every payload body is serialised before its phase's
clock starts, and the posting threads use the standard library's HTTP client, the lightest
load generator at hand: client and server share this machine's cores, so the figures are a
lower bound of what a server with its own cores does. The client's own CPU time during the
timed phases is printed too.

Run ``.venv/bin/python bench/ingest.py`` (a few minutes) or ``--quick`` (a smaller year).
Postgres: a fresh database ``bw_bench_<random>`` on ``--pg-admin-url``, dropped at the end.
"""

import argparse
import hashlib
import http.client
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

BIN = Path(sys.executable).parent  # the venv's bin: benchwatch lives beside its python
API = "/api/v1"
YEAR_START = datetime(2025, 1, 1, tzinfo=UTC)
INGEST_START = datetime(2024, 1, 1, tzinfo=UTC)
INGEST_MACHINE = "a100-ingest"
YEAR_MACHINE = "h100-8"
TARGET_INGEST = 50_000  # results/s via HTTP on Postgres
TARGET_SERIES_P95_MS = 50.0
TARGET_SUMMARY_P95_MS = 300.0

SUITES = {
    "torchbench": [
        "resnet50", "BERT_pytorch", "hf_T5", "mobilenet_v2", "densenet121",
        "timm_efficientnet", "vgg16", "squeezenet1_1", "dlrm", "yolov3",
    ],
    "huggingface": [
        "BertForMaskedLM", "GPT2ForSequenceClassification", "T5ForConditionalGeneration",
        "AlbertForMaskedLM", "DistilBertForMaskedLM", "RobertaForCausalLM",
        "BartForConditionalGeneration", "ElectraForCausalLM", "MobileBertForMaskedLM",
        "XLNetLMHeadModel",
    ],
    "timm_models": [
        "adv_inception_v3", "beit_base_patch16_224", "convnext_base",
        "deit_base_distilled_patch16_224", "mobilevit_s", "resnest101e",
        "swin_base_patch4_window7_224", "vit_base_patch16_224", "tf_efficientnet_b0", "lcnet_050",
    ],
}  # fmt: skip
CONFIGS = ("default", "cudagraphs", "dynamic")
PRECISIONS = ("amp", "bf16")
MODES = ("inference", "training")
METRICS_PER_CASE = 8
WARM_UP_RUNS = 12  # untimed, after the first: every pooled server connection used a few times
FAILURES = ("eager_fail_to_run", "fail_to_run", "OOM")


@dataclass(frozen=True)
class Sizes:
    """How much work one invocation does."""

    ingest_runs: int  # timed 2,000-result runs per backend (after the warm-up runs)
    year_runs: int  # 12-hourly runs of the Postgres history
    year_cases: int  # cases per history run (x 8 metrics = results per run)
    series_queries: int
    summary_queries: int


FULL = Sizes(ingest_runs=120, year_runs=730, year_cases=175, series_queries=200, summary_queries=50)
QUICK = Sizes(ingest_runs=8, year_runs=36, year_cases=175, series_queries=50, summary_queries=20)


@dataclass(frozen=True)
class Case:
    """One benchmark case, with the typical values of its metrics."""

    suite: str
    model: str
    config: str
    precision: str
    mode: str
    batch_size: int
    speedup: float
    latency_ms: float
    compile_s: float
    peak_gb: float
    compression: float
    steps_at: int | None  # run index from which the case is 8% slower (None: never)


@dataclass
class Figure:
    """One row of the final table."""

    backend: str
    what: str
    figure: str
    target: str = ""
    verdict: str = ""


# --- payloads -------------------------------------------------------------------------------


def make_cases(count: int) -> list[Case]:
    """``count`` distinct cases spread over every suite x config x precision x mode."""
    keys = [
        (suite, model, config, precision, mode)
        for suite, models in SUITES.items()
        for model in models
        for config in CONFIGS
        for precision in PRECISIONS
        for mode in MODES
    ]
    if count > len(keys):
        raise ValueError(f"at most {len(keys)} distinct cases, asked for {count}")
    random.Random(7).shuffle(keys)
    return [_case(*key) for key in keys[:count]]


def _case(suite: str, model: str, config: str, precision: str, mode: str) -> Case:
    rng = random.Random(f"{suite}/{model}/{config}/{precision}/{mode}")
    eager_gb = rng.uniform(2.0, 60.0)
    compression = rng.uniform(0.8, 1.6)
    return Case(
        suite=suite,
        model=model,
        config=config,
        precision=precision,
        mode=mode,
        batch_size=rng.choice((1, 8, 16, 32, 64, 128)),
        speedup=rng.uniform(0.8, 2.5),
        latency_ms=rng.uniform(0.5, 200.0),
        compile_s=rng.uniform(10.0, 180.0),
        peak_gb=eager_gb / compression,
        compression=compression,
        steps_at=rng.randrange(100, 700) if rng.random() < 0.05 else None,
    )


def case_results(case: Case, index: int, rng: random.Random) -> list[dict[str, Any]]:
    """The 8 result rows of one case in the ``index``-th run (about 2% fail to run)."""
    ident = {
        "suite": case.suite,
        "model": case.model,
        "mode": case.mode,
        "precision": case.precision,
        "config": case.config,
        "batch_size": case.batch_size,
    }
    if rng.random() < 0.02:
        reason = rng.choice(FAILURES)
        failed = [
            {**ident, "metric": m, "status": "failed", "reason": reason}
            for m in ("speedup", "abs_latency", "compilation_latency", "compression_ratio")
        ]
        skipped = [
            {**ident, "metric": m, "status": "skipped", "reason": "model did not run"}
            for m in ("dynamo_peak_mem", "eager_peak_mem", "graph_breaks")
        ]
        return [*failed, *skipped, {**ident, "metric": "accuracy", "text_value": reason}]
    slow = 1.08 if case.steps_at is not None and index >= case.steps_at else 1.0
    latency = [
        round(rng.gauss(case.latency_ms * slow, case.latency_ms * 0.02), 4) for _ in range(10)
    ]
    speedup = [round(rng.gauss(case.speedup / slow, case.speedup * 0.02), 4) for _ in range(5)]
    accuracy = "pass" if rng.random() > 0.03 else rng.choice(("fail_accuracy", "eager_variation"))
    peak = round(rng.gauss(case.peak_gb, case.peak_gb * 0.005), 3)
    return [
        {**ident, "metric": "speedup", "samples": [max(s, 0.01) for s in speedup]},
        {**ident, "metric": "abs_latency", "samples": [max(v, 0.001) for v in latency]},
        {**ident, "metric": "compilation_latency", "value": round(rng.gauss(case.compile_s, 2), 2)},
        {**ident, "metric": "compression_ratio", "value": round(case.compression, 3)},
        {**ident, "metric": "dynamo_peak_mem", "value": peak},
        {**ident, "metric": "eager_peak_mem", "value": round(peak * case.compression, 3)},
        {**ident, "metric": "accuracy", "text_value": accuracy},
        {**ident, "metric": "graph_breaks", "value": float(rng.choice((0, 0, 0, 1, 2)))},
    ]


def run_body(key: str, machine: str, started_at: datetime, cases: list[Case], index: int) -> bytes:
    """The JSON body of one run of ``cases`` (the ``index``-th of its machine)."""
    rng = random.Random(key)
    payload = {
        "key": key,
        "machine": {
            "name": machine,
            "device": "cuda",
            "arch": "NVIDIA H100 80GB HBM3",
            "gpu_count": 8,
            "hostname": "node01",
        },
        "environment": {
            "channel": "nightly",
            "torch": f"2.6.0.dev{started_at:%Y%m%d}+cu124",
            "packages": {"triton": "3.1.0", "numpy": "2.1.2"},
        },
        "trigger": "schedule",
        "tier": "daily",
        "commit": hashlib.sha1(key.encode()).hexdigest()[:12],
        "branch": "main",
        "started_at": started_at.isoformat(),
        "finished_at": (started_at + timedelta(hours=3)).isoformat(),
        "results": [row for case in cases for row in case_results(case, index, rng)],
    }
    return json.dumps(payload, separators=(",", ":")).encode()


# --- the server under test ------------------------------------------------------------------


@dataclass
class Server:
    """A running ``benchwatch serve`` and an ingest token for it."""

    url: str
    token: str


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def service_env(database_url: str, broker_url: str | None) -> dict[str, str]:
    """The environment of the server and CLI: this database and broker, quiet logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    env.update(
        BENCHWATCH_DATABASE_URL=database_url,
        BENCHWATCH_LOG_LEVEL="WARNING",
        BENCHWATCH_TOKEN_PEPPER=secrets.token_hex(16),  # Postgres refuses the development one
    )
    if broker_url:
        env["BENCHWATCH_BROKER_URL"] = broker_url
    return env


@contextmanager
def running_server(
    database_url: str, workers: int, workdir: Path, broker_url: str | None = None
) -> Iterator[Server]:
    """Serve ``database_url`` on a free port until the block ends, then stop it."""
    port = free_port()
    env = service_env(database_url, broker_url)
    log = (workdir / f"serve-{port}.log").open("wb")
    command = [str(BIN / "benchwatch"), "serve", "--port", str(port), "--workers", str(workers)]
    process = subprocess.Popen(
        command, env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, workdir / f"serve-{port}.log")
        yield Server(url, create_token(env, workdir))
    finally:
        stop(process)
        log.close()


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> None:
    """Poll /readyz until it answers 200; fail early if the server exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not ready after {timeout:.0f} s:\n{log.read_text()}")


def create_token(env: dict[str, str], workdir: Path) -> str:
    """A new ingest token, as the CLI prints it."""
    command = [str(BIN / "benchwatch"), "token", "create", "--name", "bench", "--scope", "ingest"]
    done = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn shuts its workers down gracefully), SIGKILL the group if it hangs."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # our own session: the server and its workers
        process.wait(timeout=10)


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A fresh, empty database ``bw_bench_<random>``, dropped when the block ends."""
    name = f"bw_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    server = admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- load -----------------------------------------------------------------------------------


@dataclass
class Load:
    """What a batch of POSTs achieved."""

    results: int
    seconds: float
    latencies_ms: list[float]
    client_cpu_s: float  # this process's CPU time while posting (all threads)

    @property
    def rate(self) -> float:
        """Results stored per second of wall time."""
        return self.results / self.seconds


def post_runs(server: Server, body_of: Callable[[int], bytes], count: int, threads: int) -> Load:
    """POST ``count`` runs from ``threads`` client threads; each must answer 201.

    The load generator shares the server's two cores, so it is kept light: the standard
    library's ``http.client`` (a POST of 0.3 MiB costs it about a third of httpx's CPU), and a
    new connection per POST, so that the kernel spreads the requests over the server's
    workers (kept-alive connections stick to the worker that accepted them, 3:1 at times).
    """
    host, port = server.url.removeprefix("http://").split(":")
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}

    def post(index: int) -> tuple[int, float]:
        body = body_of(index)
        began = time.perf_counter()
        connection = http.client.HTTPConnection(host, int(port), timeout=300)
        try:
            connection.request("POST", f"{API}/runs", body=body, headers=headers)
            response = connection.getresponse()
            text = response.read()
        finally:
            connection.close()
        elapsed = (time.perf_counter() - began) * 1000
        if response.status != 201:
            raise RuntimeError(f"POST run {index}: {response.status} {text[:500]!r}")
        return json.loads(text)["result_count"], elapsed

    began, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(post, range(count)))
    seconds = time.perf_counter() - began
    client_cpu = time.process_time() - cpu
    return Load(sum(n for n, _ in done), seconds, [ms for _, ms in done], client_cpu)


def timed_gets(url: str, paths: list[str], warmup: int = 5) -> list[float]:
    """Latency (ms) of each GET, one at a time, after ``warmup`` untimed ones."""
    latencies = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for path in paths[:warmup]:
            client.get(path).raise_for_status()
        for path in paths:
            began = time.perf_counter()
            response = client.get(path)
            latencies.append((time.perf_counter() - began) * 1000)
            response.raise_for_status()
    return latencies


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def p50_p95(latencies: list[float]) -> str:
    """``p50 X ms, p95 Y ms``."""
    return f"p50 {percentile(latencies, 50):.1f} ms, p95 {percentile(latencies, 95):.1f} ms"


def verdict(ok: bool) -> str:
    """The table's verdict word."""
    return "ok" if ok else "MISSED"


# --- phases ---------------------------------------------------------------------------------


def bench_ingest(server: Server, backend: str, sizes: Sizes, threads: int) -> list[Figure]:
    """Warm-up run, then timed 2,000-result runs with new keys on the same series."""
    cases = make_cases(2_000 // METRICS_PER_CASE)
    tag = secrets.token_hex(3)

    def body(index: int) -> bytes:
        at = INGEST_START + timedelta(hours=12 * index)
        return run_body(f"ingest-{tag}-{index}", INGEST_MACHINE, at, cases, index)

    warm = post_runs(server, body, 1, 1)
    post_runs(server, lambda index: body(1 + index), WARM_UP_RUNS, threads)
    first = 1 + WARM_UP_RUNS
    bodies = [body(i) for i in range(first, first + sizes.ingest_runs)]
    load = post_runs(server, bodies.__getitem__, len(bodies), threads)
    mib = sum(map(len, bodies)) / len(bodies) / 2**20
    print(
        f"  [{backend}] warm-up run (creates the catalog): {warm.latencies_ms[0]:.0f} ms; "
        f"{len(bodies)} runs x 2,000 results ({mib:.2f} MiB each), {threads} threads: "
        f"{load.rate:,.0f} results/s, {p50_p95(load.latencies_ms)}; "
        f"client CPU {load.client_cpu_s:.1f} s of {load.seconds:.1f} s",
        flush=True,
    )
    target = backend == "postgres"
    return [
        Figure(
            backend,
            f"ingest, steady state ({len(bodies)} x 2,000 results)",
            f"{load.rate:,.0f} results/s",
            f">= {TARGET_INGEST:,} results/s" if target else "",
            verdict(load.rate >= TARGET_INGEST) if target else "",
        ),
        Figure(backend, "  latency of one POST (2,000 results)", p50_p95(load.latencies_ms)),
        Figure(backend, "  first run (creates the catalog)", f"{warm.latencies_ms[0]:.0f} ms"),
    ]


def fill_year(server: Server, sizes: Sizes, threads: int) -> list[Figure]:
    """Post a year of 12-hourly runs on one machine and channel."""
    cases = make_cases(sizes.year_cases)
    tag = secrets.token_hex(3)

    def body(index: int) -> bytes:
        at = YEAR_START + timedelta(hours=12 * index)
        return run_body(f"nightly-{tag}-{index}", YEAR_MACHINE, at, cases, index)

    bodies = [body(i) for i in range(sizes.year_runs)]  # built before the clock starts
    load = post_runs(server, bodies.__getitem__, len(bodies), threads)
    per_run = load.results // sizes.year_runs
    print(
        f"  [postgres] history: {sizes.year_runs} runs x {per_run:,} results = "
        f"{load.results:,} results in {load.seconds:.0f} s: {load.rate:,.0f} results/s, "
        f"{p50_p95(load.latencies_ms)}; client CPU {load.client_cpu_s:.1f} s",
        flush=True,
    )
    return [
        Figure(
            "postgres",
            f"history fill ({sizes.year_runs} runs x {per_run:,} = {load.results:,} results)",
            f"{load.rate:,.0f} results/s in {load.seconds:.0f} s",
            f">= {TARGET_INGEST:,} results/s",
            verdict(load.rate >= TARGET_INGEST),
        ),
        Figure(
            "postgres", f"  latency of one POST ({per_run:,} results)", p50_p95(load.latencies_ms)
        ),
    ]


def series_ids(url: str, machine: str) -> list[int]:
    """Every series id of a machine, through the catalog API."""
    ids: list[int] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for page in range(1, 1_000):
            query: dict[str, str | int] = {"machine": machine, "limit": 500, "page": page}
            items = client.get(f"{API}/series", params=query).raise_for_status().json()["items"]
            ids += [item["id"] for item in items]
            if len(items) < 500:
                break
    return ids


def bench_series(url: str, sizes: Sizes) -> list[Figure]:
    """One-year point queries over many different series."""
    ids = series_ids(url, YEAR_MACHINE)
    rng = random.Random(11)
    picked = rng.sample(ids, min(len(ids), sizes.series_queries))
    picked += rng.choices(ids, k=sizes.series_queries - len(picked))
    since, until = YEAR_START.isoformat(), (YEAR_START + timedelta(days=365)).isoformat()
    window = httpx.QueryParams(since=since, until=until)
    paths = [f"{API}/series/{i}/points?{window}" for i in picked]
    latencies = timed_gets(url, paths)
    with httpx.Client(base_url=url, timeout=60) as client:
        total = client.get(paths[0]).raise_for_status().json()["total"]
    p95 = percentile(latencies, 95)
    print(
        f"  [postgres] series points, 1 year ({total} points), {len(paths)} requests over "
        f"{len(set(picked))} of {len(ids)} series: {p50_p95(latencies)}",
        flush=True,
    )
    return [
        Figure(
            "postgres",
            f"series points, 1 year ({total} points/series, {len(paths)} queries)",
            p50_p95(latencies),
            f"p95 <= {TARGET_SERIES_P95_MS:.0f} ms",
            verdict(p95 <= TARGET_SERIES_P95_MS),
        )
    ]


def bench_summary(url: str, sizes: Sizes) -> list[Figure]:
    """The dashboard summary of the newest run, alone and against a run a week older."""
    with httpx.Client(base_url=url, timeout=60) as client:
        runs = client.get(f"{API}/runs", params={"machine": YEAR_MACHINE, "limit": 15})
        items = runs.raise_for_status().json()["items"]
        summary = client.get(f"{API}/summary", params={"machine": YEAR_MACHINE}).json()
    base_id = items[-1]["id"]
    plain = f"{API}/summary?machine={YEAR_MACHINE}"
    figures = []
    for label, path in (("", plain), (" vs a base run", f"{plain}&base_run_id={base_id}")):
        latencies = timed_gets(url, [path] * sizes.summary_queries)
        p95 = percentile(latencies, 95)
        print(f"  [postgres] summary{label}: {p50_p95(latencies)}", flush=True)
        figures.append(
            Figure(
                "postgres",
                f"summary{label} ({sizes.summary_queries} queries)",
                p50_p95(latencies),
                f"p95 <= {TARGET_SUMMARY_P95_MS:.0f} ms",
                verdict(p95 <= TARGET_SUMMARY_P95_MS),
            )
        )
    print_summary_sample(summary)
    return figures


def print_summary_sample(summary: dict[str, Any]) -> None:
    """A few groups of the summary, to show it aggregates real metrics."""
    groups = summary["groups"]
    print(
        f"  summary of run {summary['run']['id']}: {len(groups)} suite x config x precision x mode"
    )
    for group in groups[:4]:
        new = group["new"]
        print(
            f"    {group['suite']:<12} {group['config']:<10} {group['precision']:<4} "
            f"{group['mode']:<9} pass {new['pass_count']}/{new['total_count']}  "
            f"geomean {new['geomean_speedup']:.2f}x  compile {new['mean_compile_time_s']:.0f} s  "
            f"compression {new['mean_compression_ratio']:.2f}x  "
            f"peak {new['mean_peak_memory_gb']:.1f} GB"
        )


# --- main -----------------------------------------------------------------------------------


def run_sqlite(sizes: Sizes, args: argparse.Namespace, workdir: Path) -> list[Figure]:
    """Steady-state ingest on a fresh SQLite file."""
    url = f"sqlite:///{workdir / 'bench.db'}"
    began = time.perf_counter()
    with running_server(url, args.workers, workdir) as server:
        figures = bench_ingest(server, "sqlite", sizes, args.threads)
    print(f"  [sqlite] done in {time.perf_counter() - began:.0f} s", flush=True)
    return figures


@contextmanager
def queued_tasks_dropped(broker_url: str) -> Iterator[None]:
    """Empty the broker's Redis database before and after (no worker consumes the tasks)."""
    client = redis.Redis.from_url(broker_url)
    client.flushdb()
    try:
        yield
    finally:
        client.flushdb()
        client.close()


def run_postgres(sizes: Sizes, args: argparse.Namespace, workdir: Path) -> list[Figure]:
    """Steady-state ingest, a year of history, then reads, on a fresh Postgres database."""
    began = time.perf_counter()
    with (
        postgres_database(args.pg_admin_url) as url,
        queued_tasks_dropped(args.broker_url),
        running_server(url, args.workers, workdir, args.broker_url) as server,
    ):
        figures = bench_ingest(server, "postgres", sizes, args.threads)
        figures += fill_year(server, sizes, args.threads)
        figures += bench_series(server.url, sizes)
        figures += bench_summary(server.url, sizes)
    print(f"  [postgres] done in {time.perf_counter() - began:.0f} s", flush=True)
    return figures


def print_table(figures: list[Figure]) -> None:
    """The final table: backend, measurement, figure, target, verdict."""
    widths = [max(len(getattr(f, c)) for f in figures) for c in ("backend", "what", "figure")]
    widths = [
        max(w, len(h)) for w, h in zip(widths, ("backend", "measurement", "figure"), strict=True)
    ]
    header = ("backend", "measurement", "figure", "target", "")
    rows = [header] + [(f.backend, f.what, f.figure, f.target, f.verdict) for f in figures]
    for row in rows:
        cells = [f"{cell:<{width}}" for cell, width in zip(row, [*widths, 18], strict=False)]
        print("  ".join([*cells, row[4]]).rstrip())


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a small history, fewer queries")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--threads", type=int, default=4, help="client threads posting runs")
    parser.add_argument(
        "--broker-url",
        default="redis://127.0.0.1:6379/14",
        help="Postgres runs in production mode: detection tasks go to this Redis database "
        "(emptied before and after; no worker runs, so ingest is measured alone)",
    )
    parser.add_argument(
        "--pg-admin-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="a Postgres role that may CREATE and DROP DATABASE",
    )
    return parser.parse_args()


def main() -> int:
    """Run the chosen backends and print the table."""
    args = parse_args()
    sizes = QUICK if args.quick else FULL
    began = time.perf_counter()
    print(f"benchwatch ingest bench ({'quick' if args.quick else 'full'}): {sizes}", flush=True)
    print(f"  {os.cpu_count()} CPUs, {args.workers} server workers, {args.threads} client threads")
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bw-bench-") as tmp:
        if args.backend in ("sqlite", "both"):
            figures += run_sqlite(sizes, args, Path(tmp))
        if args.backend in ("postgres", "both"):
            figures += run_postgres(sizes, args, Path(tmp))
    print()
    print_table(figures)
    client_cpu = sum(os.times()[:2])
    print(f"\nelapsed {time.perf_counter() - began:.0f} s (client CPU {client_cpu:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
