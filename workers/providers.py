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
"""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.core.config import Settings, settings
from app.core.providers import BUILTIN_PROVIDER, Component, EnvSpec, Provider
from workers.shard_runner import _die_with_parent, worker_environment

ANSWER = "answer.json"  # an entry's answer; written before the entry is published
ENV = "env"  # the directory a provider builds into ($BENCHWATCH_ENV_DIR)
KEY = re.compile(r"^[0-9a-f]{64}$")
BUILD = re.compile(r"^([0-9a-f]{64})\.")  # an entry's build directory: <key>.<random>
TAIL = 1500  # characters of a build's output kept in a reason
LAST_LINE_BYTES = 65536  # how much of a provider's stdout is read for its answer
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


class PrepareStopped(Exception):
    """The heartbeat said stop (the lease was lost); the build was killed, nothing kept."""


class UnknownProvider(ValueError):
    """The spec names a provider this worker does not have: a setting to fix, not a probe."""


class _Answer(BaseModel):
    """A provider's last stdout line: exactly one of the three."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(default=None, min_length=1, max_length=4096)
    image: str | None = Field(default=None, min_length=1, max_length=512)
    unbuildable: str | None = Field(default=None, min_length=1, max_length=4096)


@dataclass(frozen=True)
class _Outcome:
    """What a build came to; ``lasting``: the same spec would come to it again."""

    answer: dict[str, str]
    lasting: bool = True


def _unbuildable(reason: str, *, lasting: bool = True) -> _Outcome:
    return _Outcome({"unbuildable": reason}, lasting)


Heartbeat = Callable[[], bool]


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
        if isinstance(identity, _Outcome):
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
                _write(entry / ANSWER, json.dumps(outcome.answer))
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
        with _flock(self.root / ".locks" / "evict.lock", wait=True):
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
            sizes = {key: _size(target) for _, key, target in entries}
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

    def _identity(self, provider: str, spec: EnvSpec) -> dict[str, Any] | _Outcome:
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
                    return _unbuildable(f"{name}: wheel {component.wheel}: {error.strerror}")
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
    ) -> _Outcome:
        (entry / ENV).mkdir()
        _write(entry / "spec.json", spec.canonical())
        if provider == BUILTIN_PROVIDER:
            return PipBuild(self, spec, entry, beat, every_s).run()
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
        return _flock(self.root / ".locks" / f"{key}.lock", wait=False)


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
) -> _Outcome:
    """Run an operator's provider: the spec on stdin, its answer its last stdout line."""
    out, err = entry / "stdout.txt", entry / "stderr.txt"
    env = worker_environment() | provider.env
    env |= {"BENCHWATCH_ENV_DIR": str(entry / ENV), "BENCHWATCH_ENV_KEY": key}
    try:
        code = _run(
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
        return _unbuildable(f"provider {name!r} could not be started: {error}", lasting=False)
    output = _tail(err) if err.stat().st_size else _tail(out)
    if code is None:
        return _unbuildable(
            f"provider {name!r} did not finish within {provider.timeout_s:g} s and was killed; "
            f"output: {output}",
            lasting=False,
        )
    if code != 0:
        return _unbuildable(f"provider {name!r} {_exited(code)}; output: {output}")
    return _read_answer(name, _last_line(out))


def _read_answer(name: str, line: str) -> _Outcome:
    """The provider's answer, or why it is not one (not kept: the provider is to be fixed)."""
    try:
        answer = _Answer.model_validate_json(line)
    except ValidationError:
        answer = None
    given = {k: v for k, v in (answer.model_dump() if answer else {}).items() if v is not None}
    if len(given) != 1:
        return _unbuildable(
            f"provider {name!r} answered {line[:300]!r}: its last stdout line is to be one JSON "
            'object, {"python": path}, {"image": tag} or {"unbuildable": reason}',
            lasting=False,
        )
    python = given.get("python")
    if python is not None and not (
        os.path.isabs(python) and os.path.isfile(python) and os.access(python, os.X_OK)
    ):
        return _unbuildable(
            f"provider {name!r} answered python {python!r}, not an executable file's absolute path",
            lasting=False,
        )
    return _Outcome(given)


class PipBuild:
    """The built-in provider: a virtual environment on the worker's own interpreter.

    Made with ``--system-site-packages`` and, where the worker itself runs in a virtual
    environment, that environment's site-packages after its own, so that every component the
    spec does not name is the worker's; each one it names is installed on top
    (``pip install --no-deps --ignore-installed``, nothing of the worker's touched): a version
    (from the find-links directories only, where the operator gives some), a wheel file, or a
    commit of a local git clone (``git archive``, built with ``--no-build-isolation``).
    """

    def __init__(
        self,
        environments: Environments,
        spec: EnvSpec,
        entry: Path,
        beat: Heartbeat,
        every_s: float,
    ) -> None:
        self.spec, self.entry, self.beat, self.every_s = spec, entry, beat, every_s
        self.find_links = environments.find_links
        self.deadline = time.monotonic() + environments.pip_timeout_s
        self.timeout_s = environments.pip_timeout_s
        self.venv = entry / ENV
        self.python = self.venv / "bin" / "python"
        self.env = worker_environment() | {
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_NO_WARN_SCRIPT_LOCATION": "1",
        }

    def run(self) -> _Outcome:
        """Make the environment; its python, or why it could not be made."""
        # The worker's own pip serves the environment (it sees the worker's packages): a
        # virtual environment without one is made in a quarter of a second, with one in ~10.
        without_pip = ["--without-pip"] if find_spec("pip") is not None else []
        made = self._step(
            "making the virtual environment",
            [sys.executable, "-m", "venv", "--system-site-packages", *without_pip, str(self.venv)],
            lasting=False,
        )
        if made is not None:
            return made
        self._layer_on_worker()
        for name, component in sorted(self.spec.components.items()):
            failed = self._install(name, component)
            if failed is not None:
                return failed
        return _Outcome({"python": str(self.python)})

    def _layer_on_worker(self) -> None:
        """Put the worker's virtual environment's packages after the new one's own."""
        if sys.prefix == sys.base_prefix:
            return  # --system-site-packages already gives the worker's interpreter's own
        # A .pth line that imports runs at start-up: addsitedir reads the worker's own .pth
        # files too (its editable installs), where a plain path line would not.
        worker = [path for path in site.getsitepackages() if path.startswith(sys.prefix)]
        lines = [f"import site; site.addsitedir({path!r})\n" for path in worker]
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        _write(
            self.venv / "lib" / version / "site-packages" / "_benchwatch_worker.pth", "".join(lines)
        )

    def _install(self, name: str, component: Component) -> _Outcome | None:
        pip = [str(self.python), "-m", "pip", "install", "--no-deps", "--ignore-installed"]
        index = ["--no-index"] if self.find_links else []
        for folder in self.find_links:
            index += ["--find-links", folder]
        if component.version is not None:
            # Not kept when it fails: the version may reach the index or folders later.
            argv = [*pip, *index, f"{name}=={component.version}"]
            return self._step(f"{name}: pip install {name}=={component.version}", argv, False)
        if component.wheel is not None:
            return self._install_wheel(name, component.wheel, [*pip, *index])
        if component.commit is not None:
            return self._install_commit(name, component, [*pip, *index, "--no-build-isolation"])
        return _unbuildable(
            f"{name}: the pip provider installs versions, wheels and commits, not images; "
            "an operator's provider (BENCHWATCH_PROVIDERS) prepares images"
        )

    def _install_wheel(self, name: str, wheel: str, pip: list[str]) -> _Outcome | None:
        distribution = Path(wheel).name.split("-")[0]
        if not wheel.endswith(".whl") or _normal(distribution) != _normal(name):
            return _unbuildable(f"{name}: {wheel} is not a wheel of {name}")
        return self._step(f"{name}: pip install {wheel}", [*pip, wheel], lasting=True)

    def _install_commit(self, name: str, component: Component, pip: list[str]) -> _Outcome | None:
        commit, source = component.commit, component.source
        if source is None:
            return _unbuildable(
                f"{name}: commit {commit} without a source (the local git clone to take it from)",
                lasting=False,
            )
        archive, tree = self.entry / f"{name}.tar", self.entry / f"{name}-source"
        # Not kept when it fails: the clone may be fetched (or mounted) later.
        failed = self._step(
            f"{name}: git archive {commit}",
            ["git", "-C", source, "archive", "--format=tar", "-o", str(archive), f"{commit}"],
            lasting=False,
        )
        if failed is not None:
            return failed
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        archive.unlink()
        try:
            return self._step(
                f"{name}: building and installing commit {commit}", [*pip, str(tree)], True
            )
        finally:
            shutil.rmtree(tree, ignore_errors=True)

    def _step(self, what: str, argv: list[str], lasting: bool) -> _Outcome | None:
        """Run one step (its output appended to the entry's log); None when it succeeded."""
        out = self.entry / "step.txt"
        try:
            code = _run(
                argv,
                env=self.env,
                stdin=None,
                stdout=out,
                stderr=None,
                timeout_s=self.deadline - time.monotonic(),
                beat=self.beat,
                every_s=self.every_s,
            )
        except OSError as error:
            return _unbuildable(f"{what} could not be started: {error}", lasting=False)
        with (self.entry / "log.txt").open("a") as log:
            log.write(f"$ {' '.join(argv)}\n{out.read_text(errors='replace')}\n")
        if code is None:
            return _unbuildable(
                f"{what}: the pip provider did not finish within {self.timeout_s:g} s "
                f"(BENCHWATCH_PIP_TIMEOUT_S); output: {_tail(out)}",
                lasting=False,
            )
        if code != 0:
            return _unbuildable(f"{what} {_exited(code)}; output: {_tail(out)}", lasting=lasting)
        return None


def _run(
    argv: list[str],
    *,
    env: dict[str, str],
    stdin: Path | None,
    stdout: Path,
    stderr: Path | None,
    timeout_s: float,
    beat: Heartbeat,
    every_s: float,
) -> int | None:
    """Run ``argv`` (no shell) in a process group of its own: its status, None if timed out.

    Killed (the whole group) at ``timeout_s``; ``stderr`` None: into ``stdout``.

    Raises:
        OSError: it could not be started.
        PrepareStopped: the heartbeat said stop (the group was killed).
    """
    with contextlib.ExitStack() as files:
        given = files.enter_context(stdin.open("rb")) if stdin else subprocess.DEVNULL
        out = files.enter_context(stdout.open("wb"))
        err = files.enter_context(stderr.open("wb")) if stderr else subprocess.STDOUT
        child = subprocess.Popen(
            argv,
            env=env,
            stdin=given,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                return child.wait(timeout=max(min(every_s, deadline - time.monotonic()), 0.01))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    _kill(child)
                    return None
                if not beat():
                    raise PrepareStopped("the lease was lost during the build") from None
    except BaseException:
        _kill(child)
        raise


@contextlib.contextmanager
def _flock(path: Path, *, wait: bool) -> Iterator[bool]:
    """An exclusive lock on ``path`` (made if need be), between processes and threads alike.

    True while held; False at once when ``wait`` is False and another holds it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _kill(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _exited(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def _tail(path: Path) -> str:
    with path.open("rb") as file:
        file.seek(max(path.stat().st_size - 4 * TAIL, 0))
        text = file.read().decode(errors="replace").strip()
    return text[-TAIL:] or "(empty)"


def _last_line(path: Path) -> str:
    with path.open("rb") as file:
        file.seek(max(path.stat().st_size - LAST_LINE_BYTES, 0))
        lines = file.read().decode(errors="replace").splitlines()
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _normal(name: str) -> str:
    """A distribution's name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _write(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)


def _size(directory: Path) -> int:
    """Bytes of the files under ``directory`` (links counted as themselves, not followed)."""
    total = 0
    for folder, _, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total
