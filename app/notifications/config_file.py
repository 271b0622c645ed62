"""Subscriptions as code: a YAML file, loaded at start-up, that owns the subscriptions it names.

Reviewed like code (chromeperf's sheriff configs are the model), the file is the truth for
what it holds: at each start-up its subscriptions are created or brought in step (the
revision grows only when something changed), a subscription of the same name made through
the API is taken over, and one the file held before but no longer lists is deleted. The API
and the dashboard show file subscriptions but refuse to change them (409).

    subscriptions:
      - name: inductor perf
        owner: pt2-team@example.com
        match: {suite: [huggingface, timm_models], config: inductor}
        exclude: [{model: "hf_T5*"}]
        receivers:
          - {kind: webhook, url: "https://hooks.example.com/bw", secrets: ["${BW_HOOK_SECRET}"]}
          - {kind: email, to: [pt2-oncall@example.com]}
        when: {digest_hours: [9, 17]}

``${NAME}`` in a text is replaced by the environment variable ``NAME`` (an unset one is an
error), so secrets stay out of the file.
"""

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import describe
from app.notifications import service
from app.notifications.models import Subscription
from app.notifications.schemas import SubscriptionCreate, stored_values

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 1024 * 1024
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
ENTRIES = TypeAdapter(list[SubscriptionCreate])


class FileError(ValueError):
    """The subscriptions file cannot be used: the message says where and why."""


def read(path: Path, environ: Mapping[str, str] | None = None) -> list[SubscriptionCreate]:
    """The subscriptions of the file, validated, with ``${NAME}`` replaced.

    Raises:
        FileError: unreadable, not YAML, not a ``subscriptions`` list, an invalid entry (each
            problem with its place, e.g. ``subscriptions[2].receivers[0].url``), a name twice,
            or an unset variable.
    """
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise FileError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FileError(f"{path}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("subscriptions"), list):
        raise FileError(f"{path}: expected a mapping with a 'subscriptions' list")
    entries = _expand(document["subscriptions"], environ if environ is not None else os.environ)
    try:
        subscriptions = ENTRIES.validate_python(entries)
    except ValidationError as exc:
        problems = "; ".join(
            f"subscriptions{_index(e['loc'])}: {e['message']}"
            for e in (describe(dict(error)) for error in exc.errors())
        )
        raise FileError(f"{path}: {problems}") from None
    names = [s.name for s in subscriptions]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise FileError(f"{path}: subscription names given twice: {', '.join(twice)}")
    return subscriptions


def _index(loc: str) -> str:
    return loc if loc.startswith("[") else f".{loc}"


def _expand(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):

        def variable(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise FileError(f"the environment variable {name} is not set")
            return environ[name]

        return VARIABLE.sub(variable, value)
    if isinstance(value, list):
        return [_expand(v, environ) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, environ) for k, v in value.items()}
    return value


def sync(
    session: Session, subscriptions: list[SubscriptionCreate], targets: service.TargetCheck
) -> dict[str, list[str]]:
    """Bring the stored subscriptions in step with the file's.

    Returns:
        What was created, changed, taken over and deleted, by name.
    """
    done: dict[str, list[str]] = {"created": [], "changed": [], "taken over": [], "deleted": []}
    existing = {s.name: s for s in session.scalars(select(Subscription))}
    for entry in subscriptions:
        values = stored_values(entry)
        found = existing.get(entry.name)
        if found is None:
            service.create_subscription(session, values, targets, source="file")
            done["created"].append(entry.name)
            continue
        if found.source != "file":
            found.source = "file"
            done["taken over"].append(entry.name)
        revision = found.revision
        service.update_subscription(session, found.id, values, targets, source="file")
        if found.revision != revision:
            done["changed"].append(entry.name)
    listed = {s.name for s in subscriptions}
    for name, subscription in existing.items():
        if subscription.source == "file" and name not in listed:
            service.delete_subscription(session, subscription.id, source="file")
            done["deleted"].append(name)
    return done


def load(session: Session, path: Path, targets: service.TargetCheck) -> dict[str, list[str]]:
    """Read the file and bring the stored subscriptions in step (``read``, then ``sync``)."""
    done = sync(session, read(path), targets)
    log.info("subscriptions file %s: %s", path, {k: v for k, v in done.items() if v})
    return done
