"""The benchmark workers' commands: run-suite, worker, beat and trigger."""

import argparse
import os
import re
import sys
import time
from pathlib import Path

from workers.cli.common import Command, has_broker


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
    if not has_broker("worker"):
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

    if not has_broker("beat"):
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
    if not has_broker("trigger"):
        return 2
    from app.core.command_suites import command_tier
    from app.jobs import START_SUITE, bench_queue
    from workers.celery_app import celery_app

    tier = command_tier(args.command) if args.command else args.tier
    sent = celery_app.send_task(
        START_SUITE,
        kwargs={
            "machine": args.machine,
            "tier": tier,
            "channel": args.channel,
            "trigger": "manual",
            "models": args.models.split(",") if args.models else None,
        },
        queue=bench_queue(args.machine),
    )
    print(f"queued a {tier} suite run on {bench_queue(args.machine)} (task {sent.id})")
    return 0


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


def _command_name(text: str) -> str:
    """A command suite's name as ``--command`` takes it (the worker knows its suites)."""
    from app.core.command_suites import NAME_PATTERN

    if not re.fullmatch(NAME_PATTERN, text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: 1 to 24 letters, digits or _ . + -")
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
    which = trigger.add_mutually_exclusive_group()
    which.add_argument(
        "--tier", choices=SUITE_TIERS, default="smoke", help="which cases (default: %(default)s)"
    )
    which.add_argument(
        "--command",
        type=_command_name,
        help="run this command suite of the worker's BENCHWATCH_COMMAND_SUITES instead of a "
        "tier (default: none, the tier)",
    )
    trigger.add_argument(
        "--channel", default="nightly", help="release channel (default: %(default)s)"
    )
    trigger.add_argument(
        "--models", help="only these cases, comma-separated, e.g. resnet,bert (default: all)"
    )


COMMANDS: dict[str, Command] = {
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
}
