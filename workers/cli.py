"""The ``benchwatch`` command line.

serve, migrate, copy, worker, beat, trigger, run-suite, upload, demo, token, detect.

Each command imports what it needs inside its own function, and the parser builds only the
chosen command's options: the commands need very different stacks (torch, scikit-learn, the
web app, the database), and ``benchwatch --help`` or ``benchwatch detect FILE`` should not
wait for the ones they never use.
"""

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.db import Database
    from workers.upload_client import Uploader

DESCRIPTION = "benchwatch: a performance-regression dashboard for PyTorch stacks."
EPILOG = (
    "Settings come from BENCHWATCH_* environment variables or a .env file in the working "
    "directory (the README lists them), e.g. BENCHWATCH_DATABASE_URL (default: a SQLite file "
    "in the user data directory) and BENCHWATCH_BROKER_URL (default: unset, background work "
    "runs in the server). `benchwatch COMMAND --help` describes a command's options."
)
# Fields `benchwatch upload` takes from the CI's environment when no flag gives them
# (workers.upload_client.metadata).
CI_FIELDS = ("commit", "branch", "url", "trigger", "key")
UPLOAD_HELP = {
    "project": "the repository or team the run belongs to: its own histories, and what a "
    "token limited to a project may post (default: $BENCHWATCH_PROJECT, else default)",
    "shard": "this upload's part of a run whose jobs upload under one key (default: in CI, "
    "the job and the files' names, the key being the workflow's)",
    "shards": "how many shards make the run whole: it is detected once they are in "
    "(default: 1; a GitHub matrix: ${{ strategy.job-total }})",
    "base_commit": "a branch's fork point from the default branch, whose run its verdicts "
    "compare with (default: git merge-base of a pull request's head and base, where the "
    "checkout can tell; else the newest default-branch run before it)",
}


def cmd_serve(args: argparse.Namespace) -> int:
    """Migrate the configured database (unless told not to) and serve the app."""
    import uvicorn

    from app.core.config import settings
    from app.core.migrate import upgrade_database

    if not args.no_migrate:
        upgrade_database(settings.DATABASE_URL)
    print(
        f"benchwatch on http://{args.host}:{args.port}  (database: {_safe_url()})", file=sys.stderr
    )
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=settings.LOG_LEVEL.lower(),
        proxy_headers=args.proxy_headers,
        forwarded_allow_ips=args.forwarded_allow_ips,
        # On SIGTERM, requests in flight get this long before they are cancelled: an upload's
        # parse deadline, and time to store what it read. Without it uvicorn waits forever.
        timeout_graceful_shutdown=int(settings.PARSE_TIMEOUT_S) + 10,
    )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Upgrade the configured database to the newest schema."""
    from app.core.config import settings
    from app.core.migrate import upgrade_database

    upgrade_database(settings.DATABASE_URL, args.revision)
    print(f"database at {_safe_url()} is at {args.revision}")
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy a whole database into an empty one, then compare their row counts table by table."""
    from sqlalchemy.exc import DBAPIError

    try:
        return _copy(args)
    except DBAPIError as error:  # unreachable, or a value the target refuses: rolled back
        print(f"benchwatch copy: {type(error.orig).__name__}: {error.orig}", file=sys.stderr)
        return 2


def _copy(args: argparse.Namespace) -> int:
    import app.models  # noqa: F401  (every table in Base.metadata)
    from app.benchmarks.models import CatalogGeneration
    from app.core import copy as copying
    from app.core.db import Base
    from workers.progress import progress_bar

    # The target's migration fills catalog_generation with a token of its own: servers that
    # remember ids by the source's token must not take them for the target's.
    keep = (CatalogGeneration.__tablename__,)
    source, target = _hide_password(args.source), _hide_password(args.target)
    if not args.verify_only:
        print(f"copying {source} to {target}", file=sys.stderr)

        def copied(table: "copying.TableCopied") -> None:
            print(
                f"{table.table:<20} {table.rows:>12,} rows  {table.seconds:8.1f} s  "
                f"{table.rows_per_s:>10,.0f} rows/s",
                flush=True,
            )

        with progress_bar("row") as progress:
            done = copying.copy_database(
                args.source,
                args.target,
                Base.metadata,
                keep=keep,
                progress=progress,
                on_table=copied,
            )
        seconds = sum(t.seconds for t in done)
        print(f"copied {sum(t.rows for t in done):,} rows in {len(done)} tables in {seconds:.1f} s")
    mismatches = copying.verify(args.source, args.target, Base.metadata, keep=keep)
    for m in mismatches:
        print(
            f"benchwatch copy: table {m.table} has {m.source:,} rows in the source and "
            f"{m.target:,} in the target",
            file=sys.stderr,
        )
    if mismatches:
        print(
            "benchwatch copy: the row counts differ: was the source written to during the copy? "
            "Stop the servers and workers that use it, empty the target and copy again",
            file=sys.stderr,
        )
        return 1
    print(f"verified: every table has as many rows in {target} as in {source}")
    return 0


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def cmd_retention(args: argparse.Namespace) -> int:
    """Clear old samples and delete old branch runs, as the retention settings say."""
    from app.core.config import settings
    from app.core.db import Database
    from app.corrections.retention import apply_retention

    samples_days = settings.RETAIN_SAMPLES_DAYS if args.samples_days is None else args.samples_days
    branch_days = (
        settings.RETAIN_BRANCH_RUNS_DAYS if args.branch_runs_days is None else args.branch_runs_days
    )
    if not samples_days and not branch_days:
        print(
            "benchwatch retention: nothing to do: BENCHWATCH_RETAIN_SAMPLES_DAYS and "
            "BENCHWATCH_RETAIN_BRANCH_RUNS_DAYS are 0 (keep forever)"
        )
        return 0
    database = Database(settings.DATABASE_URL)
    try:
        swept = apply_retention(database, samples_days, branch_days, dry_run=args.dry_run)
    finally:
        database.dispose()
    would = "would be " if args.dry_run else ""
    if swept.samples_cutoff is not None:
        print(
            f"samples of results measured before {swept.samples_cutoff:%Y-%m-%d %H:%M} UTC: "
            f"{swept.samples_cleared:,} {would}cleared (the values stay)"
        )
    if swept.branch_cutoff is not None:
        print(
            f"branch runs started before {swept.branch_cutoff:%Y-%m-%d %H:%M} UTC: "
            f"{swept.runs_deleted:,} {would}deleted, with {swept.results_deleted:,} results"
        )
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    """Create a token and print it once."""
    from app.core.config import settings
    from app.tokens import service as tokens_service

    with _database().session_scope() as session:
        token, plain = tokens_service.create_token(
            session,
            args.name,
            args.scope,
            settings.TOKEN_PEPPER.get_secret_value(),
            machine_patterns=args.machine,
            project=args.project,
        )
        print(plain)
        machines = f" machines={','.join(token.machine_patterns)}" if token.machine_patterns else ""
        project = f" project={token.project}" if token.project else ""
        print(
            f"token {token.id} {token.name!r} scopes={','.join(token.scopes)}{machines}{project}: "
            "store it now, it is not shown again",
            file=sys.stderr,
        )
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    """List tokens (never their secrets)."""
    from app.tokens import service as tokens_service

    with _database().session_scope() as session:
        print(
            f"{'id':>4}  {'name':<20} {'prefix':<12} {'scopes':<24} {'created':<20} "
            f"{'last used':<20} status"
        )
        for t in tokens_service.list_tokens(session):
            used = t.last_used_at.strftime("%Y-%m-%d %H:%M") if t.last_used_at else "never"
            status = "revoked" if t.revoked_at else "active"
            print(
                f"{t.id:>4}  {t.name:<20} {t.prefix + '…':<12} {','.join(t.scopes):<24} "
                f"{t.created_at:%Y-%m-%d %H:%M}{'':<4} {used:<20} {status}"
            )
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    """Revoke a token by id, or every live token of a name."""
    from app.tokens import service as tokens_service

    with _database().session_scope() as session:
        for token in tokens_service.revoke_token(session, args.token):
            print(f"revoked token {token.id} {token.name!r}")
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    """Run the change-point detector on a series file and print its findings as JSON."""
    from dataclasses import asdict

    from app.anomalies.detectors import DetectorConfig, find_change_points
    from app.anomalies.series_file import SeriesFileError, read_series

    if args.all:
        return _rescan(args.machine)
    if args.file is None:
        print("benchwatch detect: give a FILE, or --all to rescan the database", file=sys.stderr)
        return 2
    try:
        series = read_series(Path(args.file))
    except SeriesFileError as exc:
        print(f"benchwatch detect: {exc}", file=sys.stderr)
        return 1
    config = DetectorConfig(
        min_segment=args.min_segment,
        max_p_value=args.max_p_value,
        min_rel_change=args.min_rel_change,
        window=args.window,
        noise_multiple=args.noise_multiple,
        min_rel_floor=args.min_rel_floor,
    )
    found = []
    for change in find_change_points(series.values, config):
        point = asdict(change)
        if series.timestamps is not None:
            point["timestamp"] = series.timestamps[change.index]
        found.append(point)
    print(json.dumps({"points": len(series.values), "change_points": found}, indent=2))
    return 0


def _rescan(machine: str | None) -> int:
    from app.anomalies import service as anomalies_service
    from app.core.config import settings

    with _database().session_scope() as session:
        found = anomalies_service.rescan(session, settings.DETECTOR_THRESHOLDS, machine)
        by_direction: dict[str, int] = {}
        for regression in found.regressions:
            by_direction[regression.direction] = by_direction.get(regression.direction, 0) + 1
    print(json.dumps({"new": by_direction, "reverted": len(found.reverted)}))
    return 0


def cmd_run_suite(args: argparse.Namespace) -> int:
    """Run a tier of the built-in suite here, then store it or post it to a server."""
    from workers.pinning import apply_pinning, plan_pinning

    if args.post and not args.token:
        print("benchwatch run-suite: --post needs --token (or BENCHWATCH_TOKEN)", file=sys.stderr)
        return 2
    try:
        planned = plan_pinning(args.pin, source="--pin")
    except ValueError as error:
        print(f"benchwatch run-suite: {error}", file=sys.stderr)
        return 2
    # Before torch starts its threads, so that they inherit the cores (as in a shard's child).
    pinning = apply_pinning(planned)
    import torch

    import app.models  # noqa: F401  (every model registered, for storing the run)
    from app.core.config import settings
    from workers import run_suite
    from workers.measurements import run_measurements
    from workers.progress import progress_bar
    from workers.tiers import TIERS, tier_measurements

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    began, started_at = time.perf_counter(), run_suite.now()
    tier = TIERS[args.tier]
    measurements = tier_measurements(
        tier,
        only=args.only,
        configs=args.configs.split(",") if args.configs else None,
        precisions=args.precisions.split(",") if args.precisions else None,
    )
    with progress_bar("case") as progress:
        rows = run_measurements(measurements, device, tier.plan, pinning, progress)
    run_in = run_suite.build_run(
        rows,
        tier=args.tier,
        machine=args.machine,
        channel=args.channel,
        key=args.key,
        started_at=started_at,
    )
    # Kept until it is stored: a server or database that refuses it loses no measurement.
    saved = run_suite.save(run_in)
    try:
        run_id = (
            run_suite.post(run_in, args.post, args.token)
            if args.post
            else run_suite.store(run_in, settings)
        )
    except Exception as exc:
        print(
            f"benchwatch run-suite: the run was measured but not stored "
            f"({type(exc).__name__}: {exc}); its {len(run_in.results)} results are in {saved}: "
            f"send them with `benchwatch upload {saved} --format native`",
            file=sys.stderr,
        )
        return 1
    saved.unlink()
    skipped = sum(r.status == "skipped" for r in run_in.results)
    failed = sum(r.status == "failed" for r in run_in.results)
    print(
        f"run {run_id} ({run_in.key}): {len(rows)} results, {failed} failed, {skipped} "
        f"skipped, in {time.perf_counter() - began:.0f} s"
    )
    for result in run_in.results:
        if result.status == "failed":
            print(f"  failed: {result.model} {result.config} {result.precision}: {result.reason}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Run a Celery worker: a machine's benchmark queue, the service queues, or both."""
    if args.metrics_address is not None and args.metrics_port is None:
        print("benchwatch worker: --metrics-address needs --metrics-port", file=sys.stderr)
        return 2
    if not _has_broker("worker"):
        return 2
    if args.machine:  # a bad core list stops the worker here, not each of its shards later
        from app.core.config import settings
        from workers.pinning import plan_pinning

        try:
            plan_pinning(settings.PIN_CORES)
        except ValueError as error:
            print(f"benchwatch worker: {error}", file=sys.stderr)
            return 2
    if args.metrics_port is None:
        return _worker(args)
    import shutil

    # First, before any module declares a metric and before the pool forks: every process
    # of the worker then writes its figures where the main process's scrapes read them.
    from app.core import metrics

    try:
        made = metrics.share_with_children()
    except ValueError as error:
        print(f"benchwatch worker: {error}", file=sys.stderr)
        return 2
    try:
        address = args.metrics_address or "127.0.0.1"
        try:
            metrics.serve(args.metrics_port, address)
        except OSError as error:
            print(
                f"benchwatch worker: cannot serve metrics on {address} port "
                f"{args.metrics_port}: {error.strerror or error}",
                file=sys.stderr,
            )
            return 2
        host = f"[{address}]" if ":" in address else address
        print(
            f"benchwatch worker: metrics on http://{host}:{args.metrics_port}/metrics "
            f"({metrics.MULTIPROC_DIR}={os.environ[metrics.MULTIPROC_DIR]})",
            file=sys.stderr,
        )
        return _worker(args)
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def _worker(args: argparse.Namespace) -> int:
    from app.core.config import settings
    from app.jobs import SERVICE_QUEUES, bench_queue
    from workers.tasks.suite import watch_machine

    queues = [bench_queue(args.machine)] if args.machine else []
    queues += args.queues.split(",") if args.queues else ([] if args.machine else [*SERVICE_QUEUES])
    if args.machine:
        watch_machine(args.machine)
    from workers.celery_app import celery_app

    celery_app.worker_main(
        [
            "worker",
            "--queues",
            ",".join(queues),
            "--concurrency",
            str(args.concurrency),
            "--hostname",
            f"{args.machine or 'service'}@{args.node or settings.NODE or '%h'}",
            "--loglevel",
            settings.LOG_LEVEL,
        ]
    )
    return 0


def cmd_beat(args: argparse.Namespace) -> int:
    """Run Celery beat: the detection and notice sweeps, the suites (BENCHWATCH_SCHEDULES)."""
    from app.core.config import settings

    if not _has_broker("beat"):
        return 2
    if not settings.SCHEDULES:
        print(
            "benchwatch beat: no suite schedules, only the detection and notice sweeps; set "
            'BENCHWATCH_SCHEDULES, e.g. \'[{"machine": "h100-a", "tier": "daily", '
            '"cron": "0 */12 * * *"}]\'',
            file=sys.stderr,
        )
    from workers.celery_app import celery_app

    for schedule in settings.SCHEDULES:
        print(f"{schedule.machine}: {schedule.tier} tier at '{schedule.cron}'", file=sys.stderr)
    celery_app.start(["beat", "--schedule", args.schedule_file, "--loglevel", settings.LOG_LEVEL])
    return 0


def cmd_trigger(args: argparse.Namespace) -> int:
    """Queue a suite run on a machine now, as its schedule would."""
    if not _has_broker("trigger"):
        return 2
    from app.jobs import START_SUITE, bench_queue
    from workers.celery_app import celery_app

    sent = celery_app.send_task(
        START_SUITE,
        kwargs={
            "machine": args.machine,
            "tier": args.tier,
            "channel": args.channel,
            "trigger": "manual",
            "models": args.models.split(",") if args.models else None,
        },
        queue=bench_queue(args.machine),
    )
    print(f"queued a {args.tier} suite run on {bench_queue(args.machine)} (task {sent.id})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Load the demo history into the configured database and run detection on it."""
    from app import demo
    from app.core.config import settings
    from app.core.migrate import upgrade_database
    from workers.progress import progress_bar

    upgrade_database(settings.DATABASE_URL)
    print(f"loading {args.days} days of demo runs into {_safe_url()}", file=sys.stderr)
    with progress_bar("run") as progress:
        runs = demo.load(_database(), days=args.days, progress=progress)
    if not runs:
        print("the demo history is already loaded")
        return 0
    print(f"loaded {runs} demo runs and ran detection; `benchwatch serve` and open the dashboard")
    return 0


def cmd_upload(args: argparse.Namespace) -> int:
    """Upload result files as one run; exit 0 stored, 1 rejected, 2 unreachable, 3 regressed."""
    import httpx

    from app.uploads.service import METADATA
    from workers import upload_client as client
    from workers.progress import progress_bar

    files = [Path(name) for name in args.files]
    if missing := [str(f) for f in files if not f.is_file()]:
        print(f"benchwatch upload: no such file: {', '.join(missing)}", file=sys.stderr)
        return client.REJECTED
    flags = {name: getattr(args, name) for name in METADATA}
    fields = client.metadata(flags, files, client.environment())
    if args.dry_run:
        return _dry_run(files, args.format, fields)
    if not args.server or not args.token:
        print(
            "benchwatch upload: give --server and --token (or BENCHWATCH_SERVER, BENCHWATCH_TOKEN)",
            file=sys.stderr,
        )
        return client.REJECTED
    uploader = client.Uploader(args.server, args.token, retries=args.retries)
    try:
        with progress_bar("B", in_bytes=True) as progress:
            response = uploader.send(files, fields, args.format, progress)
    except httpx.TransportError as error:
        print(f"benchwatch upload: {args.server} is unreachable: {error}", file=sys.stderr)
        return client.UNREACHABLE
    if response.status_code >= 500:
        print(f"benchwatch upload: the server failed ({response.status_code})", file=sys.stderr)
        return client.UNREACHABLE
    if response.status_code >= 400:
        client.print_errors(response.json())
        return client.REJECTED
    run = response.json()
    state = "stored" if response.status_code == 201 else "already stored (a retry)"
    print(f"run {run['id']} {state}: key {run['key']}, {run['coverage']['attempted']} cases")
    for line in client.describe_sources(run, only=("machine.name",)):
        print(line)
    if run.get("status") == "partial":
        expected = run.get("expected_shards") or "?"
        print(f"run {run['id']} waits for its other shards ({expected} expected)")
    if not args.fail_on_regression:
        return client.OK
    return _gate(args, uploader, run)


def _gate(args: argparse.Namespace, uploader: "Uploader", run: dict[str, Any]) -> int:
    """--fail-on-regression: a branch's verdicts at once, else the detection's regressions."""
    from workers import upload_client as client

    if "@" in run["channel"]:  # a branch's run, kept apart from the default branch
        from workers import gate_report

        verdicts = uploader.verdicts_of(run["id"])
        if verdicts is None:
            print("benchwatch upload: the server gave no verdicts", file=sys.stderr)
            return client.UNREACHABLE
        return gate_report.run_gate(verdicts, gate_report.gate_options(args), os.environ)
    if run.get("status") == "partial":
        print("the default branch's detection runs once every shard is in: nothing to gate yet")
        return client.OK
    found = uploader.regressions_of(run["id"], args.wait)
    if found is None:
        print(
            f"benchwatch upload: detection did not finish within {args.wait:.0f} s", file=sys.stderr
        )
        return client.UNREACHABLE
    if not found:
        print("no regressions")
        return client.OK
    print(f"{len(found)} regression(s) first seen in run {run['id']}:")
    for regression in found:
        print(client.describe_regression(regression))
    return client.REGRESSED


def _dry_run(files: list[Path], fmt: str, fields: dict[str, str]) -> int:
    """Parse and validate here, print where each field comes from and the run, send nothing."""
    from app.uploads.base import UploadFile
    from app.uploads.service import BadUpload, build_run
    from workers.upload_client import OK, REJECTED, describe_sources, print_errors

    try:
        run_in = build_run([UploadFile(f.name, f.read_bytes()) for f in files], fmt, fields)
    except BadUpload as error:
        print_errors({"detail": error.detail, "errors": error.errors})
        return REJECTED
    summary = run_in.model_dump(mode="json", exclude={"results"}, exclude_none=True)
    summary["results"] = len(run_in.results)
    summary["first_results"] = [
        r.model_dump(mode="json", exclude_none=True) for r in run_in.results[:3]
    ]
    for line in describe_sources(summary):
        print(line)
    print(json.dumps(summary, indent=2))
    return OK


def _has_broker(command: str) -> bool:
    from app.core.config import settings

    if not settings.BROKER_URL:
        print(
            f"benchwatch {command}: set BENCHWATCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
            "without a broker, `benchwatch serve` runs background work itself",
            file=sys.stderr,
        )
    return bool(settings.BROKER_URL)


def _database() -> "Database":
    """The configured database, with every model registered (their relationships need it)."""
    import app.models  # noqa: F401
    from app.core.config import settings
    from app.core.db import Database

    return Database(settings.DATABASE_URL)


def _safe_url() -> str:
    from sqlalchemy.engine import make_url

    from app.core.config import settings

    return make_url(settings.DATABASE_URL).render_as_string(hide_password=True)


def _serve_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port", type=int, default=8000, help="port to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--workers", type=int, default=1, help="uvicorn worker processes (default: %(default)s)"
    )
    serve.add_argument(
        "--no-migrate", action="store_true", help="do not migrate on start (default: migrate)"
    )
    serve.add_argument(
        "--proxy-headers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="believe X-Forwarded-Proto/-For from --forwarded-allow-ips (the scheme marks the "
        "sign-in cookie Secure) (default: %(default)s)",
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        default=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
        help="comma-separated addresses of the reverse proxies to believe ('*': any) "
        "(default: $FORWARDED_ALLOW_IPS, else 127.0.0.1)",
    )


def _migrate_options(migrate: argparse.ArgumentParser) -> None:
    migrate.add_argument(
        "revision",
        nargs="?",
        default="head",
        help="schema revision to reach (default: %(default)s)",
    )


def _retention_options(retention: argparse.ArgumentParser) -> None:
    retention.add_argument(
        "--dry-run",
        action="store_true",
        help="count what would go; change nothing (default: off, the pass changes)",
    )
    for option, setting in (
        ("--samples-days", "BENCHWATCH_RETAIN_SAMPLES_DAYS"),
        ("--branch-runs-days", "BENCHWATCH_RETAIN_BRANCH_RUNS_DAYS"),
    ):
        retention.add_argument(
            option,
            type=_days,
            metavar="DAYS",
            help=f"0 keeps forever (default: ${setting}, else 0)",
        )


def _days(text: str) -> int:
    days = int(text)
    if days < 0:
        raise argparse.ArgumentTypeError("days are 0 or more")
    return days


def _copy_options(copy: argparse.ArgumentParser) -> None:
    copy.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="URL",
        help="the database to copy, at the newest schema, e.g. sqlite:////path/benchwatch.db "
        "(stop the servers and workers that write to it first)",
    )
    copy.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="URL",
        help="an empty database, migrated here first, e.g. "
        "postgresql+psycopg://user:password@host/benchwatch",
    )
    copy.add_argument(
        "--verify-only",
        action="store_true",
        help="copy nothing, only compare the row counts of each table (default: off)",
    )


def _detect_options(detect: argparse.ArgumentParser) -> None:
    from app.anomalies.detectors import DetectorConfig

    detect.add_argument(
        "file",
        nargs="?",
        help="CSV with a 'value' column (and optional 'timestamp'), or a JSON list of numbers; "
        "null/blank is a missing point (default: none, give FILE or --all)",
    )
    detect.add_argument(
        "--all",
        action="store_true",
        help="rescan every stored series instead of reading a file, with the thresholds of "
        "BENCHWATCH_DETECTOR_THRESHOLDS (default: off)",
    )
    detect.add_argument(
        "--machine", help="with --all: only this machine's series (default: every machine)"
    )
    defaults = DetectorConfig()
    for flag, kind, default, text in (
        (
            "--min-rel-change",
            float,
            defaults.min_rel_change,
            "smallest relative step reported on a noisy series",
        ),
        (
            "--noise-multiple",
            float,
            defaults.noise_multiple,
            "on a quiet series, the smallest step in noise sigmas",
        ),
        (
            "--min-rel-floor",
            float,
            defaults.min_rel_floor,
            "however quiet the series, no smaller step (a timing's floor)",
        ),
        ("--max-p-value", float, defaults.max_p_value, "confirmation test threshold"),
        ("--min-segment", int, defaults.min_segment, "points a new level must hold"),
        ("--window", int, defaults.window, "points each side used to confirm a step"),
    ):
        detect.add_argument(
            flag, type=kind, default=default, help=f"with FILE: {text} (default: %(default)s)"
        )


def _run_suite_options(suite: argparse.ArgumentParser) -> None:
    from app.benchmarks.vocabulary import SUITE_TIERS
    from app.core.cpu_cores import SETTING as PIN_SETTING

    suite.add_argument(
        "--tier", choices=SUITE_TIERS, default="smoke", help="which cases (default: %(default)s)"
    )
    suite.add_argument("--machine", help="machine name (default: from the hardware)")
    suite.add_argument(
        "--channel", default="nightly", help="release channel (default: %(default)s)"
    )
    suite.add_argument("--key", help="idempotency key (default: machine, tier and time)")
    suite.add_argument("--only", help="only cases whose name contains this (default: all)")
    suite.add_argument(
        "--configs", help="comma-separated subset, e.g. eager,default (default: the tier's)"
    )
    suite.add_argument(
        "--precisions", help="comma-separated subset, e.g. fp32,bf16 (default: the tier's)"
    )
    suite.add_argument(
        "--threads",
        type=int,
        help="torch intra-op threads (default: one per pinned core, else torch's)",
    )
    suite.add_argument(
        "--pin",
        metavar="CORES",
        type=_pin_cores,
        default=os.environ.get(PIN_SETTING, "off"),
        help=f"pin to cores as a worker's shard does: auto, off or a list such as 1-3 "
        f"(default: ${PIN_SETTING}, else off: a run here uses every core)",
    )
    suite.add_argument(
        "--post",
        metavar="URL",
        help="post to this server instead of storing (default: store in BENCHWATCH_DATABASE_URL)",
    )
    suite.add_argument(
        "--token",
        default=os.environ.get("BENCHWATCH_TOKEN"),
        # the value is a secret: the help names the variable, never shows its value
        help="with --post: a token with scope ingest (default: $BENCHWATCH_TOKEN)",
    )


def _worker_options(worker: argparse.ArgumentParser) -> None:
    worker.add_argument(
        "--machine",
        help="run this machine's suite shards (queue bench.MACHINE) (default: none)",
    )
    worker.add_argument(
        "--queues",
        help="service queues to consume too, comma-separated "
        "(default: 'default,notify' without --machine, none with it)",
    )
    worker.add_argument(
        "--concurrency", type=int, default=1, help="worker processes (default: %(default)s)"
    )
    worker.add_argument(
        "--node",
        type=_node,
        help="this node's name: several nodes with one --machine serve it as a pool, each "
        "result records its node (default: $BENCHWATCH_NODE, else the host name)",
    )
    worker.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve the counts of this worker's processes at http://ADDRESS:PORT/metrics "
        "in the Prometheus format (docs/metrics.md) (default: not served)",
    )
    worker.add_argument(
        "--metrics-address",
        type=_ip_address,
        metavar="ADDRESS",
        help="with --metrics-port: the address to listen on, e.g. 0.0.0.0 for every "
        "interface (default: 127.0.0.1, this host only)",
    )


def _node(name: str) -> str:
    """A node name as ``--node`` takes it (it ends the worker's Celery name, ``machine@node``)."""
    from app.core.config import NODE_PATTERN

    if not re.fullmatch(NODE_PATTERN, name):
        raise argparse.ArgumentTypeError(f"{name!r}: 1 to 64 letters, digits or _ . - characters")
    return name


def _pin_cores(text: str) -> str:
    """A pinning as ``--pin`` takes it (``app.core.cpu_cores.parse_pin_cores``)."""
    from app.core.cpu_cores import parse_pin_cores

    try:
        parse_pin_cores(text, "--pin")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _port(text: str) -> int:
    """A TCP port number as ``--metrics-port`` takes it."""
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:20]!r}: a port number from 1 to 65535")
    return int(text)


def _ip_address(text: str) -> str:
    """An IPv4 or IPv6 address as ``--metrics-address`` takes it (no host names)."""
    import ipaddress

    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text[:60]!r}: an IP address, e.g. 127.0.0.1, 0.0.0.0 or ::"
        ) from None


def _beat_options(beat: argparse.ArgumentParser) -> None:
    from platformdirs import user_data_dir

    beat.add_argument(
        "--schedule-file",
        default=str(Path(user_data_dir("benchwatch", appauthor=False)) / "celerybeat-schedule"),
        help="where beat keeps the last run times (default: %(default)s)",
    )


def _trigger_options(trigger: argparse.ArgumentParser) -> None:
    from app.benchmarks.vocabulary import SUITE_TIERS

    trigger.add_argument("--machine", required=True, help="machine whose queue runs the suite")
    trigger.add_argument(
        "--tier", choices=SUITE_TIERS, default="smoke", help="which cases (default: %(default)s)"
    )
    trigger.add_argument(
        "--channel", default="nightly", help="release channel (default: %(default)s)"
    )
    trigger.add_argument(
        "--models", help="only these cases, comma-separated, e.g. resnet,bert (default: all)"
    )


def _upload_options(upload: argparse.ArgumentParser) -> None:
    from app.uploads.service import FORMATS, METADATA

    upload.add_argument("files", nargs="+", metavar="FILE", help="result files, one run")
    upload.add_argument(
        "--server",
        default=os.environ.get("BENCHWATCH_SERVER"),
        help="the server's URL (default: $BENCHWATCH_SERVER)",
    )
    upload.add_argument(
        "--token",
        default=os.environ.get("BENCHWATCH_TOKEN"),
        # the value is a secret: the help names the variable, never shows its value
        help="a token with scope ingest (default: $BENCHWATCH_TOKEN)",
    )
    upload.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="format of the files (default: %(default)s, told by their content)",
    )
    upload.add_argument(
        "--dry-run", action="store_true", help="parse and validate, send nothing (default: off)"
    )
    upload.add_argument(
        "--retries",
        type=int,
        default=5,
        help="retries on connection errors and 5xx (default: %(default)s)",
    )
    upload.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 3 on a regression: a branch's (pull request's) verdicts against the "
        "default branch at once, the default branch's detection when it finishes (default: off)",
    )
    upload.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait for detection (default: %(default)s)",
    )
    from workers.gate_report import add_gate_arguments  # here: it imports httpx

    add_gate_arguments(upload)
    metadata = upload.add_argument_group("run metadata", "each sets a field of the run")
    for name in METADATA:
        source = "from the CI job, else from the files" if name in CI_FIELDS else "from the files"
        if name in UPLOAD_HELP:
            metadata.add_argument(f"--{name.replace('_', '-')}", dest=name, help=UPLOAD_HELP[name])
            continue
        if name == "machine":
            source = (
                "the host the files name, else the CI runner's name (RUNNER_NAME, "
                "CI_RUNNER_DESCRIPTION, BUILDKITE_AGENT_NAME, NODE_NAME), else this host's; "
                "with the device as a suffix"
            )
        metadata.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            help=f"the run's {name.replace('_', ' ')} (default: {source})",
        )


def _demo_options(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--days", type=int, default=90, help="days of 12-hourly runs (default: %(default)s)"
    )


def _token_options(token: argparse.ArgumentParser) -> None:
    from app.tokens.service import SCOPES

    commands = token.add_subparsers(dest="token_command", required=True)
    create = commands.add_parser("create", help="create a token and print it once")
    create.add_argument("--name", required=True, help="a name to list and revoke it by")
    create.add_argument(
        "--scope",
        action="append",
        choices=SCOPES,
        required=True,
        help="what it may do; repeat for several scopes",
    )
    create.add_argument(
        "--machine",
        action="append",
        default=[],
        metavar="PATTERN",
        help="ingest only for machines matching this glob (e.g. 'h100-*'); repeat for several "
        "(default: any machine)",
    )
    create.add_argument(
        "--project",
        help="write only for this project: its runs, and triage of its alerts "
        "(default: every project)",
    )
    create.set_defaults(func=cmd_token_create)
    commands.add_parser("list", help="list tokens (never their secrets)").set_defaults(
        func=cmd_token_list
    )
    revoke = commands.add_parser("revoke", help="revoke a token by id, or all of a name")
    revoke.add_argument("token", help="token id or name")
    revoke.set_defaults(func=cmd_token_revoke)


Options = Callable[[argparse.ArgumentParser], None]
# name: (one-line help, what runs it, what adds its options)
COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], int] | None, Options]] = {
    "serve": ("run the API (migrates the database first)", cmd_serve, _serve_options),
    "migrate": ("upgrade the database schema", cmd_migrate, _migrate_options),
    "copy": (
        "copy a whole database into an empty one (e.g. SQLite to Postgres) and verify it",
        cmd_copy,
        _copy_options,
    ),
    "retention": (
        "clear old raw samples and delete old branch runs (BENCHWATCH_RETAIN_*)",
        cmd_retention,
        _retention_options,
    ),
    "detect": ("find steps in a series (CSV or JSON file)", cmd_detect, _detect_options),
    "run-suite": ("run a tier of the built-in suite here", cmd_run_suite, _run_suite_options),
    "worker": (
        "run a Celery worker (needs BENCHWATCH_BROKER_URL)",
        cmd_worker,
        _worker_options,
    ),
    "beat": (
        "schedule suite runs (BENCHWATCH_SCHEDULES; needs BENCHWATCH_BROKER_URL)",
        cmd_beat,
        _beat_options,
    ),
    "trigger": (
        "queue a suite run on a machine now (needs BENCHWATCH_BROKER_URL)",
        cmd_trigger,
        _trigger_options,
    ),
    "upload": ("upload result files to a server as one run", cmd_upload, _upload_options),
    "demo": ("load a realistic demo history (labelled as such)", cmd_demo, _demo_options),
    "token": ("manage API tokens", None, _token_options),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every command, and the options of ``command`` (None: of all).

    A command's options are added only when it is the one asked for, because some need
    imports (numpy, the web app, the database models) that the others should not pay for.
    """
    parser = argparse.ArgumentParser(prog="benchwatch", description=DESCRIPTION, epilog=EPILOG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (text, func, add_options) in COMMANDS.items():
        sub = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        if func is not None:
            sub.set_defaults(func=func)
        if command is None or command == name:
            add_options(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``benchwatch`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((arg for arg in argv if not arg.startswith("-")), "")
    args = build_parser(command).parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except Exception as exc:
        # Imported here, not on top: app.core.errors brings in FastAPI, which most commands
        # never use; one that can raise a DomainError has imported it already.
        from app.core.errors import DomainError

        if not isinstance(exc, DomainError):
            raise
        print(f"benchwatch: {exc.detail}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
