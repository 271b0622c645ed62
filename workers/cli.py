"""The ``benchwatch`` command line.

serve, migrate, worker, beat, trigger, run-suite, upload, demo, token, detect.
"""

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import httpx
import uvicorn
from platformdirs import user_data_dir

import app.models  # noqa: F401  (every model registered)
from app.anomalies import service as anomalies_service
from app.anomalies.detectors import DetectorConfig, find_change_points
from app.anomalies.series_file import SeriesFileError, read_series
from app.benchmarks.vocabulary import SUITE_TIERS
from app.core.config import settings
from app.core.db import Database
from app.core.errors import DomainError
from app.core.migrate import upgrade_database
from app.tokens import service as tokens_service
from app.tokens.service import SCOPES
from app.uploads.service import FORMATS, METADATA
from workers.progress import progress_bar


def cmd_serve(args: argparse.Namespace) -> int:
    """Migrate the configured database (unless told not to) and serve the app."""
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
    upgrade_database(settings.DATABASE_URL, args.revision)
    print(f"database at {_safe_url()} is at {args.revision}")
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    """Create a token and print it once."""
    with Database(settings.DATABASE_URL).session_scope() as session:
        token, plain = tokens_service.create_token(
            session,
            args.name,
            args.scope,
            settings.TOKEN_PEPPER.get_secret_value(),
            machine_patterns=args.machine,
        )
        print(plain)
        machines = f" machines={','.join(token.machine_patterns)}" if token.machine_patterns else ""
        print(
            f"token {token.id} {token.name!r} scopes={','.join(token.scopes)}{machines}: "
            "store it now, it is not shown again",
            file=sys.stderr,
        )
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    """List tokens (never their secrets)."""
    with Database(settings.DATABASE_URL).session_scope() as session:
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
    with Database(settings.DATABASE_URL).session_scope() as session:
        for token in tokens_service.revoke_token(session, args.token):
            print(f"revoked token {token.id} {token.name!r}")
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    """Run the change-point detector on a series file and print its findings as JSON."""
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
    database = Database(settings.DATABASE_URL)
    with database.session_scope() as session:
        found = anomalies_service.rescan(session, settings.DETECTOR_THRESHOLDS, machine)
        by_direction: dict[str, int] = {}
        for regression in found.regressions:
            by_direction[regression.direction] = by_direction.get(regression.direction, 0) + 1
    print(json.dumps({"new": by_direction, "reverted": len(found.reverted)}))
    return 0


def cmd_run_suite(args: argparse.Namespace) -> int:
    """Run a tier of the built-in suite here, then store it or post it to a server."""
    import torch  # only this command needs torch: the others start fast without it

    from workers import run_suite

    if args.post and not args.token:
        print("benchwatch run-suite: --post needs --token (or BENCHWATCH_TOKEN)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads or torch.get_num_threads())
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    began, started_at = time.perf_counter(), run_suite.now()
    tier = run_suite.TIERS[args.tier]
    tasks = run_suite.tier_tasks(
        tier,
        only=args.only,
        configs=args.configs.split(",") if args.configs else None,
        precisions=args.precisions.split(",") if args.precisions else None,
    )
    with progress_bar("case") as progress:
        rows = run_suite.run_tasks(tasks, device, tier.plan, progress)
    run_in = run_suite.build_run(
        rows,
        tier=args.tier,
        machine=args.machine,
        channel=args.channel,
        key=args.key,
        started_at=started_at,
    )
    if args.post:
        run_id = run_suite.post(run_in, args.post, args.token)
    else:
        run_id = run_suite.store(run_in, settings)
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
    if not _has_broker("worker"):
        return 2
    from workers.tasks.suite import bench_queue, watch_machine

    queues = [bench_queue(args.machine)] if args.machine else []
    queues += args.queues.split(",") if args.queues else ([] if args.machine else ["default"])
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
            f"{args.machine or 'service'}@%h",
            "--loglevel",
            settings.LOG_LEVEL,
        ]
    )
    return 0


def cmd_beat(args: argparse.Namespace) -> int:
    """Run Celery beat: the detection sweep and the suite schedules (BENCHWATCH_SCHEDULES)."""
    if not _has_broker("beat"):
        return 2
    if not settings.SCHEDULES:
        print(
            "benchwatch beat: no suite schedules, only the detection sweep; set "
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
    from workers.celery_app import celery_app
    from workers.tasks.suite import START_SUITE, bench_queue

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

    upgrade_database(settings.DATABASE_URL)
    print(f"loading {args.days} days of demo runs into {_safe_url()}", file=sys.stderr)
    with progress_bar("run") as progress:
        runs = demo.load(Database(settings.DATABASE_URL), days=args.days, progress=progress)
    if not runs:
        print("the demo history is already loaded")
        return 0
    print(f"loaded {runs} demo runs and ran detection; `benchwatch serve` and open the dashboard")
    return 0


def cmd_upload(args: argparse.Namespace) -> int:
    """Upload result files as one run; exit 0 stored, 1 rejected, 2 unreachable, 3 regressed."""
    from workers import upload_client as client

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
    if not args.fail_on_regression:
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
    """Parse and validate here, print what would be sent, send nothing."""
    from app.uploads.base import UploadFile
    from app.uploads.service import BadUpload, build_run
    from workers.upload_client import OK, REJECTED, print_errors

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
    print(json.dumps(summary, indent=2))
    return OK


def _has_broker(command: str) -> bool:
    if not settings.BROKER_URL:
        print(
            f"benchwatch {command}: set BENCHWATCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
            "without a broker, `benchwatch serve` runs background work itself",
            file=sys.stderr,
        )
    return bool(settings.BROKER_URL)


def _safe_url() -> str:
    from sqlalchemy.engine import make_url

    return make_url(settings.DATABASE_URL).render_as_string(hide_password=True)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="benchwatch", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the API (migrates the database first)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.add_argument("--no-migrate", action="store_true", help="do not migrate on start")
    serve.add_argument(
        "--proxy-headers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="believe X-Forwarded-Proto/-For from --forwarded-allow-ips (the scheme marks the "
        "sign-in cookie Secure)",
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        default=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
        help="comma-separated addresses of the reverse proxies to believe ('*': any)",
    )
    serve.set_defaults(func=cmd_serve)

    migrate = commands.add_parser("migrate", help="upgrade the database schema")
    migrate.add_argument("revision", nargs="?", default="head")
    migrate.set_defaults(func=cmd_migrate)

    detect = commands.add_parser("detect", help="find steps in a series (CSV or JSON file)")
    detect.add_argument(
        "--all", action="store_true", help="rescan every stored series instead of reading a file"
    )
    detect.add_argument("--machine", help="with --all: only this machine's series")
    detect.add_argument(
        "file",
        nargs="?",
        help="CSV with a 'value' column (and optional 'timestamp'), "
        "or a JSON list of numbers; null/blank is a missing point",
    )
    defaults = DetectorConfig()
    for flag, kind, default, text in (
        ("--min-rel-change", float, defaults.min_rel_change, "smallest relative step reported"),
        ("--max-p-value", float, defaults.max_p_value, "confirmation test threshold"),
        ("--min-segment", int, defaults.min_segment, "points a new level must hold"),
        ("--window", int, defaults.window, "points each side used to confirm a step"),
    ):
        detect.add_argument(flag, type=kind, default=default, help=f"{text} (default %(default)s)")
    detect.set_defaults(func=cmd_detect)

    suite = commands.add_parser("run-suite", help="run a tier of the built-in suite here")
    suite.add_argument("--tier", choices=SUITE_TIERS, default="smoke")
    suite.add_argument("--machine", help="machine name (default: from the hardware)")
    suite.add_argument("--channel", default="nightly")
    suite.add_argument("--key", help="idempotency key (default: machine, tier and time)")
    suite.add_argument("--only", help="only cases whose name contains this")
    suite.add_argument("--configs", help="comma-separated subset, e.g. eager,default")
    suite.add_argument("--precisions", help="comma-separated subset, e.g. fp32,bf16")
    suite.add_argument("--threads", type=int, help="torch intra-op threads")
    suite.add_argument("--post", metavar="URL", help="post to this server instead of storing")
    suite.add_argument("--token", default=os.environ.get("BENCHWATCH_TOKEN"))
    suite.set_defaults(func=cmd_run_suite)

    worker = commands.add_parser("worker", help="run a Celery worker (needs a broker)")
    worker.add_argument("--machine", help="run this machine's suite shards (queue bench.MACHINE)")
    worker.add_argument(
        "--queues",
        help="service queues to consume too, comma-separated "
        "(default: 'default' without --machine, none with it)",
    )
    worker.add_argument("--concurrency", type=int, default=1)
    worker.set_defaults(func=cmd_worker)

    beat = commands.add_parser("beat", help="schedule suite runs (BENCHWATCH_SCHEDULES)")
    beat.add_argument(
        "--schedule-file",
        default=str(Path(user_data_dir("benchwatch", appauthor=False)) / "celerybeat-schedule"),
        help="where beat keeps the last run times",
    )
    beat.set_defaults(func=cmd_beat)

    trigger = commands.add_parser("trigger", help="queue a suite run on a machine now")
    trigger.add_argument("--machine", required=True)
    trigger.add_argument("--tier", choices=SUITE_TIERS, default="smoke")
    trigger.add_argument("--channel", default="nightly")
    trigger.add_argument("--models", help="only these cases, comma-separated (e.g. resnet,bert)")
    trigger.set_defaults(func=cmd_trigger)

    upload = commands.add_parser("upload", help="upload result files to a server as one run")
    upload.add_argument("files", nargs="+", metavar="FILE")
    upload.add_argument("--server", default=os.environ.get("BENCHWATCH_SERVER"))
    upload.add_argument("--token", default=os.environ.get("BENCHWATCH_TOKEN"))
    upload.add_argument("--format", default="auto", choices=FORMATS)
    for name in METADATA:
        upload.add_argument(f"--{name.replace('_', '-')}", dest=name)
    upload.add_argument("--dry-run", action="store_true", help="parse and validate, send nothing")
    upload.add_argument("--retries", type=int, default=5, help="on connection errors and 5xx")
    upload.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="wait for detection; exit 3 on a regression",
    )
    upload.add_argument("--wait", type=float, default=600.0, help="seconds to wait for detection")
    upload.set_defaults(func=cmd_upload)

    demo = commands.add_parser("demo", help="load a realistic demo history (labelled as such)")
    demo.add_argument("--days", type=int, default=90, help="days of 12-hourly runs")
    demo.set_defaults(func=cmd_demo)

    token = commands.add_parser("token", help="manage API tokens").add_subparsers(
        dest="token_command", required=True
    )
    create = token.add_parser("create", help="create a token and print it once")
    create.add_argument("--name", required=True)
    create.add_argument(
        "--scope", action="append", choices=SCOPES, required=True, help="repeat for several scopes"
    )
    create.add_argument(
        "--machine",
        action="append",
        default=[],
        metavar="PATTERN",
        help="ingest only for machines matching this glob (e.g. 'h100-*'); repeat for several",
    )
    create.set_defaults(func=cmd_token_create)
    token.add_parser("list", help="list tokens").set_defaults(func=cmd_token_list)
    revoke = token.add_parser("revoke", help="revoke a token by id, or all of a name")
    revoke.add_argument("token", help="token id or name")
    revoke.set_defaults(func=cmd_token_revoke)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``benchwatch`` console script."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except DomainError as exc:
        print(f"benchwatch: {exc.detail}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
