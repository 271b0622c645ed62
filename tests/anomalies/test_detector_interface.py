"""Detectors behind one interface (issue 13, point 6): a second detector plugs in with its own
thresholds and its findings are recorded like the change-point detector's, the service
untouched; ``BENCHWATCH_DETECTOR_THRESHOLDS`` keeps its keys and refuses what no detector
knows."""

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.anomalies import registry, service
from app.anomalies.detector_interface import Detector, SeriesHistory, Thresholds
from app.anomalies.detectors import ChangePoint, DetectorConfig
from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from tests.anomalies.test_service import BAD, dynamic_bert_slower, post_history, regressions


@dataclass(frozen=True)
class MoveThresholds:
    """The toy's own thresholds."""

    min_move: float = math.inf  # off unless configured
    min_points: int = 1


class LevelMove(Detector[MoveThresholds]):
    """A toy: the first point that moved more than ``min_move`` from the series' first value."""

    name = "level_move"
    defaults = MoveThresholds()

    def find(self, series: SeriesHistory, thresholds: MoveThresholds) -> list[ChangePoint]:
        first = series.values[0]
        for index, value in enumerate(series.values):
            if abs(value - first) > thresholds.min_move * abs(first):
                rel_change = (value - first) / abs(first)
                return [ChangePoint(index, first, value, rel_change, 0.0, 0.0, 0.0)]
        return []

    def level_tolerance(self, thresholds: MoveThresholds) -> float:
        return 0.0


@pytest.fixture
def with_level_move(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy registered after the change-point detector, for this test only."""
    monkeypatch.setattr(registry, "DETECTORS", (*registry.DETECTORS, LevelMove()))


def slower_and_a_little_more_memory(model: str, config: str, index: int) -> dict[str, float]:
    """Latency +10% (a change point) and peak memory +0.125% (under memory's 0.2% floor)."""
    changed = dynamic_bert_slower(model, config, index)
    return changed | {"dynamo_peak_mem": 8.01} if changed else {}


@pytest.mark.usefixtures("with_level_move")
def test_a_second_detector_runs_with_its_own_thresholds_and_is_recorded(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    client.app.state.publisher.jobs.clear()  # type: ignore[attr-defined]  # detected below
    ids = post_history(client, ingest_headers, slower_and_a_little_more_memory)
    with database.session_scope() as session:  # the toy's defaults find nothing
        found = service.rescan(session)
        assert [(r.series.metric.name, r.detector["name"]) for r in found.regressions] == [
            ("latency", "change_point")
        ]

    toy_keys = {"level_move:metric:dynamo_peak_mem": {"min_move": 0.001}}
    with database.session_scope() as session:
        found = service.rescan(session, toy_keys)
        assert [(r.series.metric.name, r.detector["name"]) for r in found.regressions] == [
            ("dynamo_peak_mem", "level_move")
        ]

    (memory,) = regressions(client, metric="dynamo_peak_mem")
    assert memory["detector"] == {"name": "level_move", "min_move": 0.001, "min_points": 1}
    assert (memory["last_good_run_id"], memory["first_bad_run_id"]) == (ids[BAD - 1], ids[BAD])
    assert memory["direction"] == "regression"  # more memory is worse, as for any step
    assert memory["rel_change"] == pytest.approx(0.00125)
    (latency,) = regressions(client, metric="latency")
    assert memory["group_id"] == latency["group_id"]  # one bad nightly, one group
    assert latency["detector"]["name"] == "change_point"


@pytest.mark.usefixtures("with_level_move")
def test_detection_refuses_thresholds_no_detector_knows(database: Database) -> None:
    with database.session_scope() as session, pytest.raises(ValueError, match="no field"):
        service.rescan(session, {"metric:latency": {"min_rel_chnge": 0.1}})


BAD_THRESHOLDS = {"metric:latency": {"min_rel_chnge": 0.1}}


def test_a_server_refuses_to_start_on_thresholds_no_detector_knows(settings: Settings) -> None:
    with pytest.raises(ValueError, match="no field"):
        create_app(settings.model_copy(update={"DETECTOR_THRESHOLDS": BAD_THRESHOLDS}))


def test_a_worker_refuses_to_start_on_thresholds_no_detector_knows() -> None:
    env = {**os.environ, "BENCHWATCH_DETECTOR_THRESHOLDS": json.dumps(BAD_THRESHOLDS)}
    started = subprocess.run(
        [sys.executable, "-c", "import workers.tasks.jobs"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert started.returncode != 0
    assert "min_rel_chnge" in started.stderr


def test_todays_keys_reach_the_change_point_detector() -> None:
    read = registry.read_thresholds(
        {
            "suite:timm_models": {"max_p_value": 0.0001, "min_rel_change": 0.05},
            "metric:latency": {"min_rel_change": 0.1, "min_segment": 7.0},
        }
    )
    change_points = registry.CHANGE_POINT
    both = read.for_series(change_points, "timm_models", "latency")
    assert both == DetectorConfig(min_segment=7, max_p_value=0.0001, min_rel_change=0.1)
    assert type(both.min_segment) is int
    assert read.for_series(change_points, "torchbench", "latency") == DetectorConfig(
        min_segment=7, min_rel_change=0.1
    )
    assert read.for_series(change_points, "timm_models", "memory") == DetectorConfig(
        max_p_value=0.0001, min_rel_change=0.05
    )
    assert read.for_series(change_points, "torchbench", "memory") == DetectorConfig()


@pytest.mark.usefixtures("with_level_move")
def test_each_detector_reads_its_own_keys() -> None:
    read = registry.read_thresholds(
        {
            "level_move:suite:timm_models": {"min_move": 0.2, "min_points": 3},
            "level_move:metric:latency": {"min_move": 0.1},
            "metric:latency": {"window": 30},
        }
    )
    change_points, toy = registry.CHANGE_POINT, registry.DETECTORS[-1]
    assert read.for_series(toy, "timm_models", "latency") == MoveThresholds(0.1, 3)
    assert read.for_series(toy, "timm_models", "memory") == MoveThresholds(0.2, 3)
    assert read.for_series(toy, "torchbench", "memory") == MoveThresholds()
    assert read.for_series(change_points, "timm_models", "latency") == DetectorConfig(window=30)
    assert read.for_series(change_points, "timm_models", "memory") == DetectorConfig()


@pytest.mark.usefixtures("with_level_move")
@pytest.mark.parametrize(
    ("thresholds", "refusal"),
    [
        (
            {"metric:latency": {"min_rel_chnge": 0.1}},
            "the change_point detector has no field 'min_rel_chnge'; its fields are "
            "min_segment, max_p_value, min_rel_change, window",
        ),
        (
            {"level_move:metric:latency": {"window": 30}},
            "the level_move detector has no field 'window'; its fields are min_move, min_points",
        ),
        (
            {"suite:timm_models": {"min_move": 0.1}},  # the toy's field under the other's key
            "the change_point detector has no field 'min_move'",
        ),
        ({"machine:h100": {"window": 30}}, "key 'machine:h100' belongs to no detector"),
        ({"nope:suite:timm_models": {}}, "key 'nope:suite:timm_models' belongs to no detector"),
        ({"level_move:latency": {}}, "'level_move:suite:<name>' or 'level_move:metric:<name>'"),
        ({"suite:": {}}, "key 'suite:' belongs to no detector"),
        ({"suite:timm_models": {"window": 2.5}}, "['window']: 2.5 is not a whole number"),
        ({"level_move:metric:x": {"min_points": 1.5}}, "1.5 is not a whole number"),
        ({"suite:timm_models": {"window": "30"}}, "'30' is not a number"),
    ],
)
def test_what_no_detector_knows_is_refused(thresholds: Thresholds, refusal: str) -> None:
    with pytest.raises(ValueError, match=r"^BENCHWATCH_DETECTOR_THRESHOLDS") as refused:
        registry.read_thresholds(thresholds)
    assert refusal in str(refused.value)


@pytest.mark.parametrize("name", ["suite", "metric", "Level-Move", "", "change_point"])
def test_detector_names_keep_keys_and_findings_apart(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    other: Any = type("Other", (LevelMove,), {"name": name})()
    monkeypatch.setattr(registry, "DETECTORS", (*registry.DETECTORS, other))
    with pytest.raises(ValueError, match="detector name"):
        registry.read_thresholds({})
