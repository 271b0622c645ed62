"""The demo history's shape: recent enough that only its silent channel is silent."""

from datetime import UTC, datetime, timedelta

from app.demo import SILENT, SILENT_DAYS, _flaky, points


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
