"""benchwatch's compiler settings, applied to a probe's torch (``workers.compiler_settings``).

Imported by Python at start because this folder is first on ``PYTHONPATH``. Where
``BENCHWATCH_COMPILER_SETTINGS`` holds JSON (``{"inductor.cpp.simdlen": 1}``), a finder first
on ``sys.meta_path`` waits for ``torch._inductor.config`` and ``torch._dynamo.config`` and
sets each value in its module as soon as the module has run, so torch.compile sees them
whatever the command does before it (and importing torch stays as fast as without). A name
the module does not know fails the import, loudly: the probe measures nothing rather than
something else. Then the next ``sitecustomize`` on ``sys.path`` (the interpreter's own) runs,
as it would have without this one.

It imports nothing of benchwatch: it runs in the probe environment's Python, which may not
have it.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Any

_MODULES = {"torch._inductor.config": "inductor", "torch._dynamo.config": "dynamo"}
_HERE = os.path.dirname(os.path.abspath(__file__))


def _settings() -> dict[str, Any]:
    text = os.environ.get("BENCHWATCH_COMPILER_SETTINGS")
    found: dict[str, Any] = json.loads(text) if text else {}
    return found


def _apply(module: ModuleType, kind: str, settings: dict[str, Any]) -> None:
    for name, value in settings.items():
        prefix, _, key = name.partition(".")
        if prefix != kind:
            continue
        if key not in getattr(module, "_config", {}):
            raise AttributeError(f"{module.__name__} has no setting {key!r} ({name})")
        setattr(module, key, value)  # a config module takes "cpp.simdlen" whole


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    def find_spec(
        self, fullname: str, path: Any, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        kind = _MODULES.get(fullname)
        if kind is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, settings = spec.loader, self.settings
        if loader is None:
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _apply(sys.modules.get(fullname, module), kind, settings)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _next_sitecustomize() -> None:
    """The interpreter's own sitecustomize, which this one hides on sys.path."""
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_found = _settings()
if _found:
    sys.meta_path.insert(0, _Finder(_found))
_next_sitecustomize()
