"""The detectors detection runs on every series, in this order, and their thresholds.

Adding a detector is a subclass of ``detector_interface.Detector`` (its name, its thresholds
dataclass with defaults, ``find``) and one line in ``DETECTORS``; its thresholds are then read
from ``BENCHWATCH_DETECTOR_THRESHOLDS`` under ``"<name>:suite:<suite>"`` and
``"<name>:metric:<metric>"``. Where two detectors find a step at the same place in a series,
the first one's finding is recorded.
"""

from collections.abc import Mapping
from typing import Any, ClassVar

from app.anomalies.detector_interface import (
    Detector,
    DetectorThresholds,
    SeriesHistory,
    Thresholds,
)
from app.anomalies.detectors import ChangePoint, DetectorConfig, find_change_points
from app.anomalies.shapes import ShapeConfig, find_shape_changes, spread_grows


class ChangePointDetector(Detector[DetectorConfig]):
    """Steps in a series' values (``detectors.find_change_points``) that its samples confirm.

    Its keys are the ones that predate the other detectors: ``"suite:<suite>"`` and
    ``"metric:<metric>"``, without a prefix.
    """

    name = "change_point"
    defaults = DetectorConfig()
    # The least step on a quiet series, by what the metric measures: a timing's 0.5% (the
    # default), memory's 0.2%, a count's 0.1%; hardware readings (power, clocks) wander more.
    kind_defaults: ClassVar[Mapping[str, Mapping[str, float]]] = {
        "memory": {"min_rel_floor": 0.002},
        "framework": {"min_rel_floor": 0.001},
        "hardware": {"min_rel_floor": 0.01},
    }

    @property
    def prefix(self) -> str:
        """No prefix: ``BENCHWATCH_DETECTOR_THRESHOLDS`` keys keep their meaning."""
        return ""

    def find(self, series: SeriesHistory, thresholds: DetectorConfig) -> list[ChangePoint]:
        """Steps in the values; where there are any, judged again with the raw samples."""
        changes = find_change_points(series.values, thresholds)
        if changes:  # the raw samples must agree too: read only where a step is found
            changes = find_change_points(series.values, thresholds, series.samples())
        return changes

    def level_tolerance(self, thresholds: DetectorConfig) -> float:
        """A move under the minimum effect is no step: the level is the same."""
        return thresholds.min_rel_change


class ShapeDetector(Detector[ShapeConfig]):
    """Noise that rises and modes that split, the level unmoved (``shapes``).

    Its findings are of their own kinds, ``noise`` and ``bimodal``; a place where a step
    detector before it found a step is left to that step. Its keys are
    ``"shape:kind:<kind>"``, ``"shape:suite:<suite>"`` and ``"shape:metric:<metric>"``.
    """

    name = "shape"
    defaults = ShapeConfig()

    def find(self, series: SeriesHistory, thresholds: ShapeConfig) -> list[ChangePoint]:
        """The shape changes of the points, and of the samples within runs.

        The samples are read (a query per series) only where the stored within-run spreads
        grew (``spread_grows``): reading them for every series of every run is too slow.
        """
        if series.spreads and spread_grows(series.spreads, thresholds):
            return find_shape_changes(series.values, thresholds, series.samples(), series.steps)
        return find_shape_changes(series.values, thresholds, steps=series.steps)

    def level_tolerance(self, thresholds: ShapeConfig) -> float:
        """No level: a shape change reverts no step, and no step reverts it."""
        return 0.0


CHANGE_POINT = ChangePointDetector()  # its thresholds also decide when a step is suspected
SHAPE = ShapeDetector()
DETECTORS: tuple[Detector[Any], ...] = (CHANGE_POINT, SHAPE)


def read_thresholds(thresholds: Thresholds) -> DetectorThresholds:
    """``BENCHWATCH_DETECTOR_THRESHOLDS`` read for ``DETECTORS``, every key and field checked.

    Call it at start-up to refuse a bad mapping before any detection runs; detection reads
    the mapping with it too.

    Raises:
        ValueError: a key no detector owns, a field its detector does not have, or a
            fraction for a whole-number field (the message names the accepted ones).
    """
    return DetectorThresholds(thresholds, DETECTORS)
