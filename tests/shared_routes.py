"""The tests make an app per test; FastAPI builds an app's routes per app: build them once.

FastAPI (0.137 on) includes a router lazily. The first request that walks past an included
router builds its routes for that app: a pydantic TypeAdapter for every parameter and model.
A server pays that once. The tests make an app per test (``create_app`` in the ``client`` and
``live_server`` fixtures, and in many tests of their own) and paid it each time: it was most
of the time of a test that makes a few requests.

What FastAPI builds depends only on the route and on how it is included, and ``create_app``
includes the same module-level routers the same way every time, so the tests build each route
once per process and hand the same built route to every app. The request path stays FastAPI's:
only the building is shared. Two things are left to FastAPI as before:

- routes whose endpoint is defined inside a function (the docs and metrics routes
  ``create_app`` makes per app, holding that app's database): they are built per app, so
  that the run does not keep every app it made alive;
- dependency overrides: a shared route would read the overrides of the app that built it.
  benchwatch and its tests set none (``tests/test_shared_routes.py`` checks it).

``fastapi`` is pinned (constraints.txt). If its internals move, ``share_built_routes`` fails
loudly at import rather than sharing wrongly.
"""

import dataclasses
import enum
import threading
from typing import Any

from fastapi import routing
from fastapi.datastructures import DefaultPlaceholder

_built: dict[tuple[Any, ...], tuple[list[Any], Any]] = {}
_lock = threading.Lock()


def _frozen(value: Any, pinned: list[Any]) -> Any:
    """``value`` as a hashable key: plain values as they are, containers by their items,
    anything else by identity (kept alive in ``pinned``, so that its id is never reused)."""
    if value is None or isinstance(value, (str, int, float, enum.Enum)):
        return value
    if isinstance(value, DefaultPlaceholder):
        return ("default", _frozen(value.value, pinned))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(
            (field.name, _frozen(getattr(value, field.name), pinned))
            for field in dataclasses.fields(value)
            if field.name != "dependency_overrides_provider"
        )
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item, pinned) for item in value)
    if isinstance(value, dict):
        return tuple((key, _frozen(item, pinned)) for key, item in value.items())
    pinned.append(value)
    return ("object", id(value))


def defined_in_a_function(route: Any) -> bool:
    """Whether the route's endpoint is made per call (a closure), so per app."""
    return "<locals>" in getattr(route.endpoint, "__qualname__", "<locals>")


def share_built_routes() -> None:
    """Make FastAPI build each module-level route once per process, for every app."""
    context_type = routing._EffectiveRouteContext
    build = context_type.from_api_route.__func__  # type: ignore[attr-defined]
    if getattr(build, "shares_built_routes", False):
        return

    def from_api_route(cls: type, *, original_route: Any, include_context: Any) -> Any:
        if defined_in_a_function(original_route):
            return build(cls, original_route=original_route, include_context=include_context)
        pinned: list[Any] = [original_route]
        key = (id(original_route), _frozen(include_context, pinned))
        with _lock:
            found = _built.get(key)
        if found is None:
            found = (
                pinned,
                build(cls, original_route=original_route, include_context=include_context),
            )
            with _lock:
                found = _built.setdefault(key, found)
        return found[1]

    from_api_route.shares_built_routes = True  # type: ignore[attr-defined]
    context_type.from_api_route = classmethod(from_api_route)  # type: ignore[assignment]


def built_count() -> int:
    """How many built routes the process holds (for the tests of this module)."""
    return len(_built)
