"""The demo history's shape: recent enough that only its silent channel is silent."""

import random
from datetime import UTC, datetime, timedelta

import numpy as np

from app.anomalies.detectors import find_change_points
from app.anomalies.shapes import find_shape_changes
from app.demo import MODELS, SILENT, SILENT_DAYS, _case_rows, _flaky, points


def test_only_the_silent_channel_stops_and_the_rest_is_fresh() -> None:
    now = datetime(2026, 12, 1, 15, 20, tzinfo=UTC)
    history = points(90, now)
    newest: dict[tuple[str, str], datetime] = {}
    for point in history:
        newest[point.machine.name, point.channel] = point.at
    for pair, at in newest.items():
        if pair == SILENT:
            assert now - at > timedelta(days=SILENT_DAYS)
        else:
            assert timedelta(0) <= now - at < timedelta(hours=12)
    assert points(8, now)[-1].at == max(newest.values())  # a short history: no silence


def test_the_flaky_case_fails_every_other_run_late_in_the_history() -> None:
    history = [p for p in points(90, datetime(2026, 12, 1, tzinfo=UTC)) if p.channel == "2.13"]
    h100 = [p for p in history if p.machine.name == "demo-h100"]
    failing = [p.index for p in h100 if _flaky(p, "gcn", "cudagraphs", "amp")]
    assert failing
    assert all(i % 2 == 1 and i // 2 >= 80 for i in failing)
    assert not any(_flaky(p, "gcn", "cudagraphs", "bf16") for p in h100)


def latency_of(machine: str, channel: str, model: str, config: str, precision: str) -> np.ndarray:
    """One case's latency over the demo history, as its runs carry it."""
    history = points(90, datetime(2026, 12, 1, tzinfo=UTC))
    values = []
    for point in history:
        if (point.machine.name, point.channel) != (machine, channel):
            continue
        rng = random.Random(f"{machine}/{channel}/{point.index}")  # as run_payload draws
        rows = [row for m in MODELS for row in _case_rows(point, rng, *m)]
        case = (model, config, precision, "latency")
        values.append(
            next(
                r["value"]
                for r in rows
                if (r["model"], r["config"], r["precision"], r["metric"]) == case
            )
        )
    return np.array(values)


def test_the_demo_history_holds_a_noise_change_and_a_bimodal_one() -> None:
    noisy = latency_of("demo-h100", "2.12", "dlrm", "eager", "fp32")
    split = latency_of("demo-mi300x", "2.13", "lstm", "max_autotune", "bf16")
    for values, kind, day in ((noisy, "noise", 55), (split, "bimodal", 65)):
        assert find_change_points(values) == []  # neither moves its level
        ((found, at),) = [(c.kind, c.index) for c in find_shape_changes(values)]
        assert found == kind
        assert abs(at - 2 * day) <= 8  # two runs a day


def test_one_nightly_moves_both_machines_and_its_sha_names_it() -> None:
    """From day 82 the default config of the convolutional models is 12% slower on both
    machines' nightly, whose first slow runs carry one torch git sha."""
    from app.demo import CONVOLUTIONAL, REVISION_DAY, _environment

    for machine in ("demo-h100", "demo-mi300x"):
        values = latency_of(machine, "nightly", "resnet", "default", "bf16")
        at = 2 * REVISION_DAY  # two runs a day
        assert np.median(values[at : at + 10]) / np.median(values[at - 10 : at]) > 1.08
        untouched = latency_of(machine, "nightly", "bert", "default", "bf16")
        ratio = np.median(untouched[at : at + 10]) / np.median(untouched[at - 10 : at])
        assert abs(ratio - 1) < 0.04
    assert "resnet" in CONVOLUTIONAL
    first_bad = [
        p
        for p in points(90, datetime(2026, 12, 1, tzinfo=UTC))
        if p.channel == "nightly" and p.index == 2 * REVISION_DAY
    ]
    shas = {_environment(p)["torch_git_sha"] for p in first_bad}
    builds = {_environment(p)["torch"] for p in first_bad}
    assert len(first_bad) == 2
    assert len(shas) == 1  # one revision ...
    assert len(builds) == 2  # ... built for CUDA and for ROCm
