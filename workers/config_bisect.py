"""A configs localization's two sides on the worker: each compile config's settings, whole.

A configs localization (``app.localization.configs``) compares one case under two compile
configs of one run: the fast config is its last good side, the slow one its first bad. Each
side's ``compiler_options`` is what that config's latency row recorded it compiled under
(``extra.compiler_settings`` over the run's own): its variables, the config values it changed,
and the Inductor options its config passes to torch.compile (``cpp_wrapper``, ``freezing``).
Not among them: a config's mode, whose options torch.compile patches in only while it
compiles, and ``dynamic=True``. ``config_settings`` says a config's own as settings:

- its ``options`` (``workers.compile_configs.compile_options``), each ``inductor.<name>``;
- its ``mode``'s options, ``torch._inductor.list_mode_options(mode)``, each
  ``inductor.<name>`` (what torch.compile applies for the mode);
- ``dynamic=True`` as ``dynamo.assume_static_by_default = False``, what torch.compile patches
  for it (``torch._dynamo.eval_frame.make_set_enable_dynamic``).

``compared`` puts them over each side's recorded settings. Every probe of the search then
compiles the case with torch.compile's plain call, no mode and no options
(``workers.case_probe --options-from-settings``), under its mix of the two sides' settings,
which the hook sets globally (``workers.compiler_settings``): options given to torch.compile
would override the global config, so a probe could not take the fast config's own away. The
fast side under its settings is its config's compilation again; a mix replaces the config's
own options by the mix's, a name at the side that lacks it left at torch's default.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.localization.configs import AGAINST, is_configs_case
from workers.compiler_settings import json_value

# A machine's device (app.benchmarks.vocabulary.Device) as torch names it: ROCm is "cuda".
TORCH_DEVICES = {"rocm": "cuda"}


def config_settings(config: str, device: str) -> dict[str, Any]:
    """The settings a config compiles with of its own on ``device`` (cpu, cuda, rocm, ...)."""
    import torch
    from torch._inductor import list_mode_options

    from workers.compile_configs import compile_options

    given = compile_options(config, torch.device(TORCH_DEVICES.get(device, device)))
    options = dict(given.get("options") or {})
    if mode := given.get("mode"):
        options |= list_mode_options(mode)
    found = {f"inductor.{name}": json_value(value) for name, value in options.items()}
    if given.get("dynamic"):
        found["dynamo.assume_static_by_default"] = False
    return found


@dataclass(frozen=True)
class Compared:
    """The two configs compared and each one's settings, its own included."""

    good_config: str  # the fast one's
    bad_config: str
    good: dict[str, Any]
    bad: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        """As the answer keeps it: each side's config and the settings it was measured under."""
        return {
            "good": {"config": self.good_config, "settings": self.good},
            "bad": {"config": self.bad_config, "settings": self.bad},
        }

    def same(self) -> str:
        """Why there is nothing to bisect: the two configs' settings are the same here."""
        return (
            f"configs {self.good_config} and {self.bad_config} compile with the same settings "
            "here: nothing to bisect (the difference is in how they are measured, or unrecorded)"
        )


def compared(
    case: Mapping[str, Any], good: Mapping[str, Any], bad: Mapping[str, Any]
) -> Compared | None:
    """A configs localization's sides, their recorded settings completed; None for another."""
    if not is_configs_case(case):
        return None
    device = str(case.get("device") or "cpu")
    fast, slow = str(case[AGAINST]["config"]), str(case["config"])
    return Compared(
        fast,
        slow,
        {**good, **config_settings(fast, device)},
        {**bad, **config_settings(slow, device)},
    )
