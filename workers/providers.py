"""Prepared environments for localization probes: run a provider, cache what it made.

A probe's spec (``app.core.providers.EnvSpec``: the components that differ from the worker's
own) is given to a provider, the built-in ``pip`` or one of ``BENCHWATCH_PROVIDERS``, which
builds an environment into ``$BENCHWATCH_ENV_DIR`` and says how to run in it. A build that
fails is an answer (``Unbuildable``), never an error: a commit that does not build is a
bisection's skip.

The cache (``BENCHWATCH_ENV_CACHE``) holds one entry per provider and spec, named by the
SHA-256 of both as canonical JSON. An entry is built in a directory of its own,
``<key>.<random>``, and published by creating the symlink ``<key>`` to it: creating a symlink
is atomic and refuses an existing name, and the built directory never moves (a virtual
environment is not relocatable: its scripts name their interpreter by path). Builds of one
key take turns under a lock file, so two workers preparing the same spec build it once; an
entry's mtime is its last use, and after each new entry the least recently used are removed
until the cache is within ``BENCHWATCH_ENV_CACHE_BYTES``. An unbuildable answer is kept too
(a commit that does not build will not build next time), its build removed; an answer that
may differ next time is not kept: a timeout, a provider that could not start or that broke
the protocol, a version or clone the pip provider could not find.

The built-in provider is ``workers.pip_provider``; the processes a build runs and what it
comes to, ``workers.provider_process``.
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.core.config import Settings, settings
from app.core.providers import BUILTIN_PROVIDER, EnvSpec, Provider
from workers.pip_provider import PipBuild
from workers.provider_process import (
    ENV,
    Heartbeat,
    Outcome,
    PrepareStopped,
    exited,
    flock,
    last_line,
    run_process,
    tail,
    tree_size,
    unbuildable,
    write_whole,
)
from workers.shard_runner import worker_environment

ANSWER = "answer.json"  # an entry's answer; written before the entry is published
KEY = re.compile(r"^[0-9a-f]{64}$")
BUILD = re.compile(r"^([0-9a-f]{64})\.")  # an entry's build directory: <key>.<random>
POLL_S = 0.1  # how often a build waiting for another of the same spec looks again


@dataclass(frozen=True)
class Prepared:
    """An environment a probe can run in: an interpreter (``python``) or an ``image``."""

    key: str
    directory: Path  # the cache entry; what the provider built is in its env/
    python: str | None = None
    image: str | None = None
    built: bool = True  # False: reused from the cache


@dataclass(frozen=True)
class Unbuildable:
    """Why no environment could be prepared for the spec: a probe's outcome."""

    key: str
    reason: str
    remembered: bool  # True: the cache answers the same spec with this, without a build
    built: bool = True  # False: the answer came from the cache, or no build was tried


class UnknownProvider(ValueError):
    """The spec names a provider this worker does not have: a setting to fix, not a probe."""


class _Answer(BaseModel):
    """A provider's last stdout line: exactly one of the three."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(default=None, min_length=1, max_length=4096)
    image: str | None = Field(default=None, min_length=1, max_length=512)
    unbuildable: str | None = Field(default=None, min_length=1, max_length=4096)


@dataclass
class Environments:
    """A worker's providers and its cache of the environments they prepared."""

    root: Path  # BENCHWATCH_ENV_CACHE
    budget_bytes: int  # BENCHWATCH_ENV_CACHE_BYTES
    providers: Mapping[str, Provider] = field(default_factory=dict)  # BENCHWATCH_PROVIDERS
    find_links: tuple[str, ...] = ()  # BENCHWATCH_PIP_FIND_LINKS: pip then uses no index
    pip_timeout_s: float = 3600.0  # BENCHWATCH_PIP_TIMEOUT_S

    def prepare(
        self,
        provider: str,
        spec: EnvSpec,
        *,
        heartbeat: Heartbeat | None = None,
        every_s: float = 10.0,
    ) -> Prepared | Unbuildable:
        """The environment ``spec`` names, from the cache or built by ``provider``.

        ``heartbeat`` is called about every ``every_s`` while a build runs or waits for
        another worker's build of the same spec; False stops it (``PrepareStopped``).

        Raises:
            UnknownProvider: ``provider`` is neither ``pip`` nor one of BENCHWATCH_PROVIDERS.
        """
        beat = heartbeat or (lambda: True)
        identity = self._identity(provider, spec)
        if isinstance(identity, Outcome):
            return Unbuildable("", identity.answer["unbuildable"], remembered=False, built=False)
        key = spec_key(provider, spec, identity)
        found = self._lookup(key)
        if found is not None:
            return found
        self.root.mkdir(parents=True, exist_ok=True)
        with self._lock(key, beat, every_s):
            found = self._lookup(key)
            if found is not None:
                return found
            self._drop(key)
            entry = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=self.root))
            try:
                outcome = self._build(provider, spec, key, entry, beat, every_s)
                if not outcome.lasting:
                    shutil.rmtree(entry)
                    reason = outcome.answer["unbuildable"]
                    return Unbuildable(key, reason, remembered=False)
                if "unbuildable" in outcome.answer:
                    shutil.rmtree(entry / ENV, ignore_errors=True)
                write_whole(entry / ANSWER, json.dumps(outcome.answer))
                os.symlink(entry.name, self.root / key)
            except BaseException:
                shutil.rmtree(entry, ignore_errors=True)
                raise
        self.evict(keep=key)
        return _result(key, entry, outcome.answer, built=True)

    def evict(self, keep: str | None = None) -> list[str]:
        """Remove the least recently used entries until the cache is within its budget.

        ``keep`` (the entry just made) stays, as does an entry being rebuilt; a build
        directory no entry names and no build holds (its worker died) goes first. Returns
        the keys removed.
        """
        if not self.root.is_dir():
            return []
        removed = []
        with flock(self.root / ".locks" / "evict.lock", wait=True):
            entries, linked = [], set()
            for path in self.root.iterdir():
                if KEY.match(path.name) and path.is_symlink():
                    target = self.root / os.readlink(path)
                    linked.add(target.name)
                    with contextlib.suppress(OSError):
                        entries.append((target.stat().st_mtime_ns, path.name, target))
            for path in self.root.iterdir():
                match = BUILD.match(path.name)
                if match and path.name not in linked:
                    with self._try_lock(match.group(1)) as free:
                        if free:
                            shutil.rmtree(path, ignore_errors=True)
            sizes = {key: tree_size(target) for _, key, target in entries}
            total = sum(sizes.values())
            for _, key, target in sorted(entries):
                if total <= self.budget_bytes:
                    break
                if key == keep:
                    continue
                with self._try_lock(key) as free:
                    if not free:
                        continue
                    (self.root / key).unlink(missing_ok=True)
                    shutil.rmtree(target, ignore_errors=True)
                total -= sizes[key]
                removed.append(key)
        return removed

    def _identity(self, provider: str, spec: EnvSpec) -> dict[str, Any] | Outcome:
        """What besides the spec decides what the provider builds, hashed into the key.

        For pip: the worker's interpreter (the environment is layered on it), the wheel
        files' sizes and times (a wheel rebuilt at the same path is another build), the
        find-links directories. For an operator's provider: its command and environment.
        """
        if provider != BUILTIN_PROVIDER:
            if provider not in self.providers:
                known = ", ".join([BUILTIN_PROVIDER, *self.providers])
                raise UnknownProvider(
                    f"no provider {provider!r} in this worker's BENCHWATCH_PROVIDERS ({known})"
                )
            return self.providers[provider].model_dump(include={"command", "env"})
        wheels = {}
        for name, component in spec.components.items():
            if component.wheel is not None:
                try:
                    stat = Path(component.wheel).stat()
                except OSError as error:
                    return unbuildable(f"{name}: wheel {component.wheel}: {error.strerror}")
                wheels[name] = [stat.st_size, stat.st_mtime_ns]
        return {
            "python": sys.executable,
            "version": sys.version,
            "find_links": list(self.find_links),
            "wheels": wheels,
        }

    def _lookup(self, key: str) -> Prepared | Unbuildable | None:
        """The published entry ``key``, marked as just used; None when there is none."""
        link = self.root / key
        try:
            answer = json.loads((link / ANSWER).read_text())
            python = answer.get("python")
            if python is not None and not os.path.isfile(python):
                return None  # removed from under the cache: built again
            os.utime(link)  # through the link: the entry's directory
            return _result(key, self.root / os.readlink(link), answer, built=False)
        except (OSError, ValueError, AttributeError):
            return None

    def _drop(self, key: str) -> None:
        """Under the key's lock: an unreadable entry, and builds a dead worker left."""
        link = self.root / key
        if link.is_symlink():
            target = self.root / os.readlink(link)
            link.unlink()
            shutil.rmtree(target, ignore_errors=True)
        for path in self.root.glob(f"{key}.*"):
            shutil.rmtree(path, ignore_errors=True)

    def _build(
        self, provider: str, spec: EnvSpec, key: str, entry: Path, beat: Heartbeat, every_s: float
    ) -> Outcome:
        (entry / ENV).mkdir()
        write_whole(entry / "spec.json", spec.canonical())
        if provider == BUILTIN_PROVIDER:
            return PipBuild(
                spec, entry, beat, every_s, find_links=self.find_links, timeout_s=self.pip_timeout_s
            ).run()
        return _run_provider(provider, self.providers[provider], key, entry, beat, every_s)

    @contextlib.contextmanager
    def _lock(self, key: str, beat: Heartbeat, every_s: float) -> Iterator[None]:
        """The key's build lock, waited for (a build of the same spec may take an hour)."""
        beaten = time.monotonic()
        while True:
            with self._try_lock(key) as free:
                if free:
                    yield
                    return
            if time.monotonic() - beaten >= every_s:
                if not beat():
                    raise PrepareStopped("the lease was lost while waiting for a build")
                beaten = time.monotonic()
            time.sleep(POLL_S)

    def _try_lock(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """The key's build lock if free now (True), else nothing (False)."""
        return flock(self.root / ".locks" / f"{key}.lock", wait=False)


def environments(config: Settings = settings) -> Environments:
    """This worker's providers and cache, as its settings say."""
    default = Path(user_cache_dir("benchwatch", appauthor=False)) / "envs"
    return Environments(
        root=Path(config.ENV_CACHE) if config.ENV_CACHE else default,
        budget_bytes=config.ENV_CACHE_BYTES,
        providers=config.PROVIDERS,
        find_links=tuple(config.PIP_FIND_LINKS),
        pip_timeout_s=config.PIP_TIMEOUT_S,
    )


def spec_key(provider: str, spec: EnvSpec, identity: Mapping[str, Any]) -> str:
    """The cache key: SHA-256 of the provider, what else decides its build, and the spec."""
    canonical = json.dumps(
        {"provider": provider, "identity": identity, "spec": json.loads(spec.canonical())},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def probe_environment(prepared: Prepared, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` (a command's environment) made to run in the prepared environment.

    Its interpreter's directory goes first on PATH, so that a command suite whose argv says
    ``python`` runs in the probe's environment; ``$BENCHWATCH_PYTHON`` names it (and
    ``$VIRTUAL_ENV`` its virtual environment), ``$BENCHWATCH_IMAGE`` an image to run in.
    """
    made = dict(env)
    if prepared.python is not None:
        bin_dir = Path(prepared.python).parent
        made["PATH"] = os.pathsep.join(filter(None, [str(bin_dir), made.get("PATH")]))
        made["BENCHWATCH_PYTHON"] = prepared.python
        made.pop("PYTHONHOME", None)
        if (bin_dir.parent / "pyvenv.cfg").is_file():
            made["VIRTUAL_ENV"] = str(bin_dir.parent)
        else:
            made.pop("VIRTUAL_ENV", None)
    if prepared.image is not None:
        made["BENCHWATCH_IMAGE"] = prepared.image
    return made


def _result(
    key: str, entry: Path, answer: Mapping[str, str], *, built: bool
) -> Prepared | Unbuildable:
    if "unbuildable" in answer:
        return Unbuildable(key, answer["unbuildable"], remembered=True, built=built)
    return Prepared(key, entry, answer.get("python"), answer.get("image"), built=built)


def _run_provider(
    name: str, provider: Provider, key: str, entry: Path, beat: Heartbeat, every_s: float
) -> Outcome:
    """Run an operator's provider: the spec on stdin, its answer its last stdout line."""
    out, err = entry / "stdout.txt", entry / "stderr.txt"
    env = worker_environment() | provider.env
    env |= {"BENCHWATCH_ENV_DIR": str(entry / ENV), "BENCHWATCH_ENV_KEY": key}
    try:
        code = run_process(
            provider.command,
            env=env,
            stdin=entry / "spec.json",
            stdout=out,
            stderr=err,
            timeout_s=provider.timeout_s,
            beat=beat,
            every_s=every_s,
        )
    except OSError as error:
        return unbuildable(f"provider {name!r} could not be started: {error}", lasting=False)
    output = tail(err) if err.stat().st_size else tail(out)
    if code is None:
        return unbuildable(
            f"provider {name!r} did not finish within {provider.timeout_s:g} s and was killed; "
            f"output: {output}",
            lasting=False,
        )
    if code != 0:
        return unbuildable(f"provider {name!r} {exited(code)}; output: {output}")
    return _read_answer(name, last_line(out))


def _read_answer(name: str, line: str) -> Outcome:
    """The provider's answer, or why it is not one (not kept: the provider is to be fixed)."""
    try:
        answer = _Answer.model_validate_json(line)
    except ValidationError:
        answer = None
    given = {k: v for k, v in (answer.model_dump() if answer else {}).items() if v is not None}
    if len(given) != 1:
        return unbuildable(
            f"provider {name!r} answered {line[:300]!r}: its last stdout line is to be one JSON "
            'object, {"python": path}, {"image": tag} or {"unbuildable": reason}',
            lasting=False,
        )
    python = given.get("python")
    if python is not None and not (
        os.path.isabs(python) and os.path.isfile(python) and os.access(python, os.X_OK)
    ):
        return unbuildable(
            f"provider {name!r} answered python {python!r}, not an executable file's absolute path",
            lasting=False,
        )
    return Outcome(given)
