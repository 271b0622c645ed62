"""The built-in ``pip`` provider: a scratch virtual environment layered on the worker's own."""

import shutil
import site
import sys
import tarfile
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from app.core.providers import Component, EnvSpec
from workers.provider_process import (
    ENV,
    Heartbeat,
    Outcome,
    exited,
    normal_name,
    run_process,
    tail,
    unbuildable,
    write_whole,
)
from workers.shard_runner import worker_environment


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
        spec: EnvSpec,
        entry: Path,
        beat: Heartbeat,
        every_s: float,
        *,
        find_links: Sequence[str],
        timeout_s: float,
    ) -> None:
        self.spec, self.entry, self.beat, self.every_s = spec, entry, beat, every_s
        self.find_links = list(find_links)
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.venv = entry / ENV
        self.python = self.venv / "bin" / "python"
        self.env = worker_environment() | {
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_NO_WARN_SCRIPT_LOCATION": "1",
        }

    def run(self) -> Outcome:
        """Make the environment; its python, or why it could not be made."""
        # The worker's own pip serves the environment (it sees the worker's packages): a
        # virtual environment without one is made in a quarter of a second, with one in ~10.
        without_pip = ["--without-pip"] if _worker_has_pip() else []
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
        return Outcome({"python": str(self.python)})

    def _layer_on_worker(self) -> None:
        """Put the worker's virtual environment's packages after the new one's own."""
        if sys.prefix == sys.base_prefix:
            return  # --system-site-packages already gives the worker's interpreter's own
        # A .pth line that imports runs at start-up: addsitedir reads the worker's own .pth
        # files too (its editable installs), where a plain path line would not.
        worker = [path for path in site.getsitepackages() if path.startswith(sys.prefix)]
        lines = [f"import site; site.addsitedir({path!r})\n" for path in worker]
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        write_whole(
            self.venv / "lib" / version / "site-packages" / "_benchwatch_worker.pth", "".join(lines)
        )

    def _install(self, name: str, component: Component) -> Outcome | None:
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
        return unbuildable(
            f"{name}: the pip provider installs versions, wheels and commits, not images; "
            "an operator's provider (BENCHWATCH_PROVIDERS) prepares images"
        )

    def _install_wheel(self, name: str, wheel: str, pip: list[str]) -> Outcome | None:
        distribution = Path(wheel).name.split("-")[0]
        if not wheel.endswith(".whl") or normal_name(distribution) != normal_name(name):
            return unbuildable(f"{name}: {wheel} is not a wheel of {name}")
        return self._step(f"{name}: pip install {wheel}", [*pip, wheel], lasting=True)

    def _install_commit(self, name: str, component: Component, pip: list[str]) -> Outcome | None:
        commit, source = component.commit, component.source
        if source is None:
            return unbuildable(
                f"{name}: commit {commit} without a source (the local git clone to take it from)",
                lasting=False,
            )
        if not Path(source).is_absolute():  # a repository's URL (a GitHub source)
            return unbuildable(
                f"{name}: the pip provider builds a commit from a local git clone, not from "
                f"{source}: name an operator's source-build provider for it "
                "(BENCHWATCH_LOCALIZE_PROVIDER), or the component's clone",
                lasting=True,
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

    def _step(self, what: str, argv: list[str], lasting: bool) -> Outcome | None:
        """Run one step (its output appended to the entry's log); None when it succeeded."""
        out = self.entry / "step.txt"
        try:
            code = run_process(
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
            return unbuildable(f"{what} could not be started: {error}", lasting=False)
        with (self.entry / "log.txt").open("a") as log:
            log.write(f"$ {' '.join(argv)}\n{out.read_text(errors='replace')}\n")
        if code is None:
            return unbuildable(
                f"{what}: the pip provider did not finish within {self.timeout_s:g} s "
                f"(BENCHWATCH_PIP_TIMEOUT_S); output: {tail(out)}",
                lasting=False,
            )
        if code != 0:
            return unbuildable(f"{what} {exited(code)}; output: {tail(out)}", lasting=lasting)
        return None


def _worker_has_pip() -> bool:
    """Whether the worker's interpreter has pip, read from its metadata.

    Not ``importlib.util.find_spec("pip")``: setuptools' distutils shim answers that lookup,
    and where distutils was imported already (torch's builds import it) it warns, which a
    strict process (the tests) turns into an error.
    """
    try:
        distribution("pip")
    except PackageNotFoundError:
        return False
    return True
