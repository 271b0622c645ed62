"""The compiler settings of a compiled run: recorded beside it, applied again to a probe.

A setting is named by where it lives:

- ``inductor.<name>``, ``dynamo.<name>``: a value of ``torch._inductor.config`` or
  ``torch._dynamo.config`` (``inductor.cpp.simdlen``, ``dynamo.cache_size_limit``);
- ``env.<VARIABLE>``: a ``TORCHINDUCTOR_*``, ``TORCHDYNAMO_*`` or ``TORCH_COMPILE_*`` variable of
  the run's environment (less those that name a folder, ``*_DIR``). Many of Inductor's
  settings read their variable once, when the config module is imported, into what torch
  then takes for the default: only the variable says the run set them.

Recorded (``recorded_settings``): the variables, and the values torch's config modules do not
hold at their default in this process (``_is_default``, as torch's own ``codegen_config``
asks), for the modules this process imported (importing them is seconds of a start; a process
that did not import them changed nothing there; a value set back to its declared default is
left out). Values are JSON: a scalar as is, a list or
a mapping of scalars where its JSON is short, anything else (a function) its ``repr``; each
cut to ``MAX_VALUE`` characters, at most ``MAX_SETTINGS`` names, by name.

Applied (``settings_environment``): a variable is set in the probe's environment (None: taken
out of it); config values go, as JSON, in ``BENCHWATCH_COMPILER_SETTINGS``, and the folder of
``workers/settings_hook`` goes first on ``PYTHONPATH``. Its ``sitecustomize`` sets them in
each config module of the probe's Python as that module is imported, before the command's
code runs (and then runs any other ``sitecustomize`` of that Python). A command that sets a
value itself has the last word; ``python -I`` or ``-E`` ignores ``PYTHONPATH``.
"""

import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.providers import EnvSpec

MODULES = {"inductor": "torch._inductor.config", "dynamo": "torch._dynamo.config"}
VARIABLE_PREFIXES = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE_")
# Variables that say where files go (TORCHINDUCTOR_CACHE_DIR), not how to compile: a
# machine's own, different between runs, never a cause worth a probe.
PLACES = ("_DIR", "_PATH")
ENV = "env"
MAX_SETTINGS = 32  # names recorded of one run (or one compiled case)
MAX_NAME = 128
MAX_VALUE = 160  # characters of a value, or of its JSON
SETTINGS_VARIABLE = "BENCHWATCH_COMPILER_SETTINGS"
HOOK_DIR = Path(__file__).resolve().parent / "settings_hook"


def kind_of(name: str) -> str | None:
    """``env``, ``inductor`` or ``dynamo``: where a setting lives; None for another name."""
    kind, _, rest = name.partition(".")
    return kind if rest and (kind == ENV or kind in MODULES) else None


def json_value(value: Any) -> Any:
    """A setting's value as JSON, cut to ``MAX_VALUE`` characters."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return value[:MAX_VALUE]
    if isinstance(value, list | tuple | dict | set | frozenset):
        try:
            plain = sorted(value) if isinstance(value, set | frozenset) else value
            text = json.dumps(plain, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):
            text = ""
        if text and len(text) <= MAX_VALUE:
            loaded: Any = json.loads(text)
            return loaded
    return repr(value)[:MAX_VALUE]


def variable_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The compiler's variables of ``env`` as ``env.<VARIABLE>`` settings."""
    return {
        f"{ENV}.{name}": json_value(value)
        for name, value in env.items()
        if name.startswith(VARIABLE_PREFIXES) and not name.endswith(PLACES)
    }


def config_settings() -> dict[str, Any]:
    """The config values not at their default, of the config modules this process imported."""
    found: dict[str, Any] = {}
    for kind, module_name in MODULES.items():
        module = sys.modules.get(module_name)
        # ``_get_dict(skip_default=True)`` is how torch's codegen_config lists the changed ones.
        get_dict = getattr(module, "_get_dict", None)
        if get_dict is None:
            continue
        values = get_dict(ignored_prefixes=["_"], skip_default=True)
        entries = getattr(module, "_config", {})
        found |= {
            f"{kind}.{name}": json_value(value)
            for name, value in values.items()
            if not _is_declared_default(entries.get(name), value)
        }
    return found


def _is_declared_default(entry: Any, value: Any) -> bool:
    """Whether ``value`` is the entry's declared default.

    A patch set back counts as changed to torch: ``config.patch`` restores by setting the old
    value.
    """
    try:
        return entry is not None and bool(value == entry.default)
    except Exception:  # a value that does not compare: changed
        return False


def recorded_settings(
    env: Mapping[str, str] | None = None, options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What a compiled run records: variables, changed config values, and ``options``.

    ``options``: torch.compile's Inductor options of the run (a config's ``cpp_wrapper``),
    as ``inductor.<name>``.
    """
    found = variable_settings(os.environ if env is None else env) | config_settings()
    found |= {f"inductor.{name}": json_value(value) for name, value in (options or {}).items()}
    kept = sorted(name for name in found if len(name) <= MAX_NAME)[:MAX_SETTINGS]
    return {name: found[name] for name in kept}


def applicable(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a probe can apply (``kind_of`` knows them), the others left out."""
    return {name: value for name, value in settings.items() if kind_of(name) is not None}


@dataclass(frozen=True)
class Configured:
    """A probe's environment measured under compiler settings (name -> value to apply)."""

    spec: EnvSpec
    settings: Mapping[str, Any] = field(default_factory=dict)

    def canonical(self) -> str:
        """The environment's key: the spec's alone where no setting is applied."""
        if not self.settings:
            return self.spec.canonical()
        settings = json.dumps(dict(self.settings), sort_keys=True, separators=(",", ":"))
        return f"{self.spec.canonical()} {settings}"


def settings_environment(env: Mapping[str, str], settings: Mapping[str, Any]) -> dict[str, str]:
    """``env`` (a probe command's) under ``settings``: variables set, config values hooked."""
    made = dict(env)
    configured: dict[str, Any] = {}
    for name, value in sorted(settings.items()):
        kind = kind_of(name)
        if kind == ENV:
            variable = name.partition(".")[2]
            if value is None:
                made.pop(variable, None)
            else:
                made[variable] = value if isinstance(value, str) else json.dumps(value)
        elif kind is not None:
            configured[name] = value
    if configured:
        made[SETTINGS_VARIABLE] = json.dumps(configured, sort_keys=True)
        made["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HOOK_DIR), made.get("PYTHONPATH")]))
    return made
