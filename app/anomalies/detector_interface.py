"""What a detector is to detection, and how ``BENCHWATCH_DETECTOR_THRESHOLDS`` reaches it.

A detector judges one series' history and returns the steps it finds (``ChangePoint``: the
first point of the new level, the levels either side and the evidence); the service gives
each step its runs, direction, group and hints, whichever detector found it. Each detector
has a name and its own thresholds: a frozen dataclass of numbers, every field with a default.

``BENCHWATCH_DETECTOR_THRESHOLDS`` maps ``"<prefix>kind:<metric kind>"``,
``"<prefix>suite:<suite>"`` and ``"<prefix>metric:<metric>"`` to some of a detector's fields;
a series gets the detector's defaults, then its defaults for the metric's kind
(``Detector.kind_defaults``: memory and counts are quieter than timings), overridden by the
kind's fields, then its suite's, then its metric's (the more specific wins).
A detector's prefix is ``"<name>:"`` (``"failure:suite:torchbench"``); the change-point
detector's is empty, so the keys that predate the others keep working. A key no detector
owns, a field its detector does not have, or a whole-number field given a fraction is refused
with the accepted ones named, when the mapping is read (``registry.read_thresholds``).
"""

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, get_type_hints

from app.anomalies.detectors import ChangePoint

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ThresholdsT = TypeVar("ThresholdsT", bound="DataclassInstance")
Thresholds = Mapping[
    str, Mapping[str, float]
]  # BENCHWATCH_DETECTOR_THRESHOLDS, as settings hold it
Samples = Sequence[Sequence[float] | None]  # each point's raw samples (None where absent)
SCOPES = ("kind", "suite", "metric")  # least specific first: a metric's fields win
NAME = re.compile(r"[a-z][a-z0-9_]*")
SETTING = "BENCHWATCH_DETECTOR_THRESHOLDS"


@dataclass
class SeriesHistory:
    """One series as a detector sees it: what it measures, and its points in time order.

    Attributes:
        suite: the suite of its benchmark.
        metric: the metric's name.
        values: each point's value; NaN where the point failed or is missing.
        run_ids: each point's run.
        load_samples: reads the raw samples of every point; called through ``samples`` only,
            by a detector that needs them (it is a query per series).
        kind: the metric's kind (``performance``, ``memory``, ``compile``, ...).
        steps: where the detectors run before this one found steps (positions in
            ``values``), for a detector of something else to leave them alone.
        spreads: each point's stored within-run spread (NaN: none), read with the values.
    """

    suite: str
    metric: str
    values: Sequence[float]
    run_ids: Sequence[int]
    load_samples: Callable[[], Samples] = field(repr=False)
    kind: str = "performance"
    steps: list[int] = field(default_factory=list)
    spreads: Sequence[float] = ()
    _samples: Samples | None = field(default=None, init=False, repr=False)

    def samples(self) -> Samples:
        """Each point's raw samples, read once however many detectors ask."""
        if self._samples is None:
            self._samples = self.load_samples()
        return self._samples


class Detector(ABC, Generic[ThresholdsT]):
    """A way of finding steps in a series, with its own thresholds.

    Attributes:
        name: how findings and thresholds name it (``Regression.detector["name"]``, the
            prefix of its keys); lower case, digits and ``_``, not a scope word.
        defaults: its thresholds when nothing overrides them; their dataclass's fields are
            the fields its keys accept (numbers; an ``int`` field takes whole numbers only).
        kind_defaults: fields that differ from ``defaults`` on the series of a metric kind.
    """

    name: str
    defaults: ThresholdsT
    kind_defaults: ClassVar[Mapping[str, Mapping[str, float]]] = {}

    @property
    def prefix(self) -> str:
        """What starts its keys in ``BENCHWATCH_DETECTOR_THRESHOLDS``."""
        return f"{self.name}:"

    @abstractmethod
    def find(self, series: SeriesHistory, thresholds: ThresholdsT) -> list[ChangePoint]:
        """The steps in ``series``, in time order (``index``: a position in its values)."""

    @abstractmethod
    def level_tolerance(self, thresholds: ThresholdsT) -> float:
        """The relative distance under which two levels count as one.

        A later opposite step that ends this close to the level before an earlier step
        reverts it.
        """


def check_detectors(detectors: Sequence[Detector[Any]]) -> None:
    """Names that can tell the detectors' keys and findings apart.

    Raises:
        ValueError: a name is malformed, a scope word, or given twice.
    """
    names = [detector.name for detector in detectors]
    for name in names:
        if not NAME.fullmatch(name) or name in SCOPES or names.count(name) > 1:
            raise ValueError(f"detector name {name!r}: lower case, unique, not {SCOPES}")


class DetectorThresholds:
    """``BENCHWATCH_DETECTOR_THRESHOLDS`` read for some detectors: checked once, merged later."""

    def __init__(self, thresholds: Thresholds, detectors: Sequence[Detector[Any]]) -> None:
        """Check every key and field of ``thresholds`` against ``detectors``.

        Raises:
            ValueError: a key no detector owns, a field its detector does not have, or a
                fraction for a whole-number field.
        """
        check_detectors(detectors)
        self.fields: dict[tuple[str, str], dict[str, float]] = {}  # (name, scope key) -> fields
        for key, values in thresholds.items():
            detector, scope = _owner(key, detectors)
            self.fields[detector.name, scope] = _checked(key, values, detector)

    def for_series(
        self, detector: Detector[ThresholdsT], suite: str, metric: str, kind: str = "performance"
    ) -> ThresholdsT:
        """The thresholds ``detector`` uses on a series of this suite, metric and metric kind."""
        merged: dict[str, float] = dict(detector.kind_defaults.get(kind, {}))
        for scope in (f"kind:{kind}", f"suite:{suite}", f"metric:{metric}"):
            merged.update(self.fields.get((detector.name, scope), {}))
        return replace(detector.defaults, **merged)


def _owner(key: str, detectors: Sequence[Detector[Any]]) -> tuple[Detector[Any], str]:
    """The detector whose key this is, and its scope key (``suite:<name>``/``metric:<name>``)."""
    for detector in detectors:
        if key.startswith(detector.prefix):
            scope, colon, name = key.removeprefix(detector.prefix).partition(":")
            if scope in SCOPES and colon and name:
                return detector, f"{scope}:{name}"
    accepted = ", ".join(
        f"'{d.prefix}kind:<name>', '{d.prefix}suite:<name>' or '{d.prefix}metric:<name>' ({d.name})"
        for d in detectors
    )
    raise ValueError(f"{SETTING}: key {key!r} belongs to no detector; keys are {accepted}")


def _checked(key: str, values: Mapping[str, float], detector: Detector[Any]) -> dict[str, float]:
    hints = get_type_hints(type(detector.defaults))
    known = [f.name for f in fields(detector.defaults)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(
            f"{SETTING}[{key!r}]: the {detector.name} detector has no field "
            f"{', '.join(map(repr, unknown))}; its fields are {', '.join(known)}"
        )
    return {name: _number(key, name, value, hints[name]) for name, value in values.items()}


def _number(key: str, name: str, value: object, kind: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{SETTING}[{key!r}][{name!r}]: {value!r} is not a number")
    if kind is int:
        if not float(value).is_integer():
            raise ValueError(f"{SETTING}[{key!r}][{name!r}]: {value!r} is not a whole number")
        return int(value)
    return float(value)
