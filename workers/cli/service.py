"""The service's commands: serve, migrate, copy, retention, token, detect and demo."""

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from workers.cli.common import Command, open_database, safe_url


def cmd_serve(args: argparse.Namespace) -> int:
    """Migrate the configured database (unless told not to) and serve the app."""
    import uvicorn

    from app.core.config import settings
    from app.core.migrate import upgrade_database

    if not args.no_migrate:
        upgrade_database(settings.DATABASE_URL)
    print(
        f"benchwatch on http://{args.host}:{args.port}  (database: {safe_url()})", file=sys.stderr
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
    print(f"database at {safe_url()} is at {args.revision}")
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
    database = open_database()
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

    with open_database().session_scope() as session:
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

    with open_database().session_scope() as session:
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

    with open_database().session_scope() as session:
        for token in tokens_service.revoke_token(session, args.token):
            print(f"revoked token {token.id} {token.name!r}")
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    """Run the step and shape detectors on a series file and print their findings as JSON."""
    from dataclasses import asdict, fields

    from app.anomalies.detectors import ChangePoint, DetectorConfig, find_change_points
    from app.anomalies.series_file import SeriesFileError, read_series
    from app.anomalies.shapes import find_shape_changes

    if args.backtest is not None:
        return _backtest(args)
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
    config = DetectorConfig(**{f.name: getattr(args, f.name) for f in fields(DetectorConfig)})
    steps = find_change_points(series.values, config)
    shapes = find_shape_changes(series.values, steps=[change.index for change in steps])

    def described(change: ChangePoint) -> dict[str, Any]:
        point = asdict(change)
        if series.timestamps is not None:
            point["timestamp"] = series.timestamps[change.index]
        return point

    print(
        json.dumps(
            {
                "points": len(series.values),
                "change_points": [described(change) for change in steps],
                "shape_changes": [described(change) for change in shapes],
            },
            indent=2,
        )
    )
    return 0


def _backtest(args: argparse.Namespace) -> int:
    """Replay thresholds over the stored history of the selected series; print the report."""
    from app.anomalies import backtest
    from app.benchmarks.service import SeriesFilter
    from app.core.config import settings

    try:
        proposed = json.loads(args.backtest)
        if not isinstance(proposed, dict):
            raise ValueError("expected a JSON object of threshold keys")
        where = SeriesFilter(
            machine=args.machine, suite=args.suite, model=args.model, metric=args.metric
        )
        with open_database().session_scope() as session:
            report = backtest.backtest(session, proposed, settings.DETECTOR_THRESHOLDS, where)
    except ValueError as exc:  # bad JSON, or a key or field no detector knows
        print(f"benchwatch detect --backtest: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.as_dict(), indent=2))
    return 0


def _rescan(machine: str | None) -> int:
    from app.anomalies import service as anomalies_service
    from app.core.config import settings

    with open_database().session_scope() as session:
        found = anomalies_service.rescan(session, settings.DETECTOR_THRESHOLDS, machine)
        by_direction: dict[str, int] = {}
        for regression in found.regressions:
            by_direction[regression.direction] = by_direction.get(regression.direction, 0) + 1
    print(json.dumps({"new": by_direction, "reverted": len(found.reverted)}))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Load the demo history into the configured database and run detection on it."""
    from app import demo
    from app.core.config import settings
    from app.core.migrate import upgrade_database
    from workers.progress import progress_bar

    upgrade_database(settings.DATABASE_URL)
    print(f"loading {args.days} days of demo runs into {safe_url()}", file=sys.stderr)
    with progress_bar("run") as progress:
        runs = demo.load(open_database(), days=args.days, progress=progress)
    if not runs:
        print("the demo history is already loaded")
        return 0
    print(f"loaded {runs} demo runs and ran detection; `benchwatch serve` and open the dashboard")
    return 0


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
        "--backtest",
        metavar="THRESHOLDS",
        help="replay these thresholds (JSON shaped like BENCHWATCH_DETECTOR_THRESHOLDS, over "
        "it) on the stored series chosen by --machine/--suite/--model/--metric and report "
        "what they would find against what was found and triaged (default: off)",
    )
    detect.add_argument(
        "--machine",
        help="with --all or --backtest: only this machine's series (default: every machine)",
    )
    for name in ("suite", "model", "metric"):
        detect.add_argument(
            f"--{name}", help=f"with --backtest: only this {name}'s series (default: any)"
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
        (
            "--small-noise-multiple",
            float,
            defaults.small_noise_multiple,
            "a step under the minimum effect, down to this many sigmas, ...",
        ),
        ("--small-points", int, defaults.small_points, "... where both levels hold this many"),
    ):
        detect.add_argument(
            flag, type=kind, default=default, help=f"with FILE: {text} (default: %(default)s)"
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


COMMANDS: dict[str, Command] = {
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
    "demo": ("load a realistic demo history (labelled as such)", cmd_demo, _demo_options),
    "token": ("manage API tokens", None, _token_options),
}
