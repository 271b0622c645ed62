"""The worker's compiler-setting bisection: which differing settings bring the slowdown.

The last good and first bad runs recorded their compiler settings (``compiler_options`` of
their environments, ``workers.compiler_settings``). Where they differ in settings a probe can
apply, and the components do not explain the step (none differ, or the component isolation
found none), ``app.localization.ddmin`` delta-debugs the differing settings: each probe is the
good environment under the good settings with some of them taken from the bad run, measured by
the same oracle (the probe's ``Configured`` spec carries the settings; the measurement applies
them, ``workers.compiler_settings.settings_environment``). Its pre-flight is the good environment
under the good settings against the same under the bad ones: the settings alone must bring
the step. The answer names the setting (or the settings that only together do) and their
values good -> bad.

A setting one side did not record is at its default there: a config value is then left
alone, a variable taken out of the probe's environment.
"""

from collections.abc import Callable, Mapping
from typing import Any

from app.core.providers import EnvSpec
from app.localization import ddmin
from app.localization.probing import Localization, Measure, OnProbe
from workers.compiler_settings import Configured, applicable, kind_of

STRATEGY = "settings"  # as its probes are stored
Settings = Mapping[str, Any]
ToSpec = Callable[[Settings], Configured | str]


def differing(good: Settings, bad: Settings) -> tuple[list[str], list[str]]:
    """The differing settings a probe can apply, and those it cannot (unknown names)."""
    changed = ddmin.differing_settings(good, bad)
    return [n for n in changed if kind_of(n) is not None], [
        n for n in changed if kind_of(n) is None
    ]


def configured(
    spec: EnvSpec | str, settings: Settings, good: Settings, bad: Settings
) -> Configured | str:
    """``spec`` under ``settings`` (a mix of ``good``'s and ``bad``'s), as a probe applies them.

    A name at a side's recorded value is applied; a name neither side recorded with that value
    (ddmin's None for "the bad side has none") is at its default: a config value not applied,
    a variable removed.
    """
    if isinstance(spec, str):
        return spec
    applied: dict[str, Any] = {}
    for name, value in applicable(settings).items():
        recorded = any(name in side and side[name] == value for side in (good, bad))
        if recorded:
            applied[name] = value
        elif kind_of(name) == "env":
            applied[name] = None
    return Configured(spec, applied)


def bisect(
    base: EnvSpec | str,
    good: Settings,
    bad: Settings,
    *,
    measure: Callable[[ToSpec], Measure[Settings]],
    reporter: Callable[[ToSpec], OnProbe],
    references: Callable[[ToSpec], None],
    higher_is_better: bool | None,
) -> tuple[Localization, dict[str, Any]]:
    """Delta-debug the settings that differ between ``good`` and ``bad`` in ``base``.

    ``measure``, ``reporter`` and ``references`` are the search's (``workers.localize``): the
    oracle of a strategy, the reporter of its probes, its references reported. Returns the
    strategy's result and the answer's culprit (empty where none was found).
    """
    good, bad = applicable(good), applicable(bad)

    def to_spec(settings: Settings) -> Configured | str:
        return configured(base, settings, good, bad)

    found = ddmin.bisect_settings(
        good,
        bad,
        measure(to_spec),
        higher_is_better=higher_is_better,
        on_probe=reporter(to_spec),
    )
    references(to_spec)
    if found.state != "culprit_found":
        return found, {}
    values = {name: [good.get(name), bad.get(name)] for name in found.culprit}
    return found, {"culprit": {"kind": "setting", "names": list(found.culprit), "values": values}}
