"""Environment providers, with real subprocesses: pip installs, git builds, operator scripts."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import Settings
from app.core.providers import Component, EnvSpec, Provider, check_provider_names
from workers.provider_process import PrepareStopped
from workers.providers import (
    Environments,
    Prepared,
    Unbuildable,
    UnknownProvider,
    environments,
    probe_environment,
)
from workers.shard_runner import run_command_process, worker_environment

GiB = 1024**3


def make_wheel(folder: Path, name: str, version: str, body: str) -> Path:
    """A pure-Python wheel of package ``name`` written by hand (what pip reads of one)."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": body,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def run_in(prepared: Prepared, code: str, tmp: Path) -> str:
    """What ``python -c code`` prints when run as a command suite runs, in ``prepared``."""
    logs = tmp / f"logs-{time.monotonic_ns()}"
    logs.mkdir()
    env = probe_environment(prepared, worker_environment())
    reason = run_command_process(
        ["python", "-c", code],
        cwd=str(tmp),
        env=env,
        logs=logs,
        timeout_s=60,
        heartbeat=lambda: True,
        every_s=1.0,
    )
    assert reason is None, reason
    return (logs / "stdout.txt").read_text().strip()


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    for version in ("1", "2"):
        make_wheel(folder, "tinypkg", version, f'__version__ = "{version}"\n')
    (folder / "tinypkg-3-py3-none-any.whl").write_bytes(b"not a zip at all")
    return folder


@pytest.fixture(scope="module")
def pip_envs(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Environments:
    """One cache for the pip tests: the environments they make are each a spec's own."""
    root = tmp_path_factory.mktemp("cache")
    return Environments(root=root, budget_bytes=20 * GiB, find_links=(str(wheels),))


def tiny(**component: str) -> EnvSpec:
    return EnvSpec(components={"tinypkg": Component.model_validate(component)})


def test_the_pip_provider_works_where_distutils_was_imported(wheels: Path, tmp_path: Path) -> None:
    # In the full suite an earlier test (torch's builds) had imported distutils, and asking
    # the import system for pip made setuptools' shim warn: every pip build failed in CI.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import distutils.core  # noqa: F401
    own = Environments(root=tmp_path / "cache", budget_bytes=GiB, find_links=(str(wheels),))
    made = own.prepare("pip", tiny(version="1"))
    assert isinstance(made, Prepared), made
    assert made.built


def test_pip_installs_each_version_into_its_own_environment(
    pip_envs: Environments, wheels: Path, tmp_path: Path
) -> None:
    first = pip_envs.prepare("pip", tiny(version="1"))
    second = pip_envs.prepare("pip", tiny(wheel=str(wheels / "tinypkg-2-py3-none-any.whl")))
    assert isinstance(first, Prepared)
    assert isinstance(second, Prepared)
    assert first.built
    assert second.built
    assert first.python != second.python
    show = "import sys, tinypkg, pydantic; print(tinypkg.__version__, sys.prefix)"
    assert run_in(first, show, tmp_path) == f"1 {Path(first.python).parent.parent}"
    assert run_in(second, show, tmp_path) == f"2 {Path(second.python).parent.parent}"
    # Layered on the worker (pydantic is the worker's own), which is left as it was.
    with pytest.raises(ModuleNotFoundError):
        import tinypkg  # noqa: F401
    env = probe_environment(first, worker_environment())
    assert env["BENCHWATCH_PYTHON"] == first.python
    assert env["VIRTUAL_ENV"] == str(Path(first.python).parent.parent)
    assert env["PATH"].split(os.pathsep)[0] == str(Path(first.python).parent)


def test_a_prepared_spec_is_reused_from_the_cache(pip_envs: Environments) -> None:
    made = pip_envs.prepare("pip", tiny(version="1"))
    assert isinstance(made, Prepared)
    os.utime(made.directory, ns=(0, 0))
    started = time.monotonic()
    again = pip_envs.prepare("pip", tiny(version="1"))
    took = time.monotonic() - started
    assert isinstance(again, Prepared)
    assert not again.built
    assert (again.python, again.key) == (made.python, made.key)
    assert took < 0.2, took  # no process run: a build takes a second or more
    assert made.directory.stat().st_mtime > time.time() - 60  # marked as used


def test_a_broken_wheel_is_unbuildable_and_remembered(pip_envs: Environments, wheels: Path) -> None:
    broken = tiny(wheel=str(wheels / "tinypkg-3-py3-none-any.whl"))
    first = pip_envs.prepare("pip", broken)
    assert isinstance(first, Unbuildable)
    assert first.remembered
    assert first.built
    assert "tinypkg: pip install" in first.reason
    assert "exited with status" in first.reason
    again = pip_envs.prepare("pip", broken)
    assert isinstance(again, Unbuildable)
    assert (again.reason, again.built) == (first.reason, False)
    # A version the folders do not have, a wheel file not there: not kept, tried next time.
    for spec in (tiny(version="9"), tiny(wheel=str(wheels / "tinypkg-4-py3-none-any.whl"))):
        missing = pip_envs.prepare("pip", spec)
        assert isinstance(missing, Unbuildable)
        assert not missing.remembered, missing.reason
    assert "No such file" in missing.reason
    mislabelled = pip_envs.prepare(
        "pip",
        EnvSpec(components={"other": Component(wheel=str(wheels / "tinypkg-1-py3-none-any.whl"))}),
    )
    assert isinstance(mislabelled, Unbuildable)
    assert "is not a wheel of other" in mislabelled.reason


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A git repository of a package: 1.0, then 2.0, then a commit that does not build."""
    repo = tmp_path_factory.mktemp("gitpkg")
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "gitpkg").mkdir()
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "gitpkg"\ndynamic = ["version"]\n'
        '[tool.setuptools.dynamic]\nversion = {attr = "gitpkg.__version__"}\n'
    )
    commits = []
    for version in ("1.0", "2.0"):
        (repo / "gitpkg" / "__init__.py").write_text(f'__version__ = "{version}"\n')
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"version {version}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    (repo / "setup.py").write_text('raise RuntimeError("this commit does not build")\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "broken")
    commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


def test_a_commit_of_a_local_clone_is_built_and_installed(
    pip_envs: Environments, clone: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, commits = clone

    def at(commit: str) -> EnvSpec:
        return EnvSpec(components={"gitpkg": Component(commit=commit, source=str(repo))})

    for commit, version in zip(commits[:2], ("1.0", "2.0"), strict=True):
        made = pip_envs.prepare("pip", at(commit))
        assert isinstance(made, Prepared), made
        assert run_in(made, "import gitpkg; print(gitpkg.__version__)", tmp_path) == version
        assert not (made.directory / "gitpkg-source").exists()  # the sources go once built
    broken = pip_envs.prepare("pip", at(commits[2]))
    assert isinstance(broken, Unbuildable)
    assert broken.remembered
    assert "building and installing commit" in broken.reason
    assert "this commit does not build" in broken.reason
    unknown = pip_envs.prepare("pip", at("0123456789abcdef0123456789abcdef01234567"))
    assert isinstance(unknown, Unbuildable)
    assert not unknown.remembered
    assert "git archive" in unknown.reason
    # A GitHub source gives the repository's URL: an operator's provider clones it, pip says so.
    remote = EnvSpec(
        components={"gitpkg": Component(commit=commits[0], source="https://github.com/o/gitpkg")}
    )
    url = pip_envs.prepare("pip", remote)
    assert isinstance(url, Unbuildable)
    assert "builds a commit from a local git clone, not from https://github.com/o/gitpkg" in (
        url.reason
    )


PROVIDER = r"""
import json, os, pathlib, sys, time
mode = sys.argv[1]
spec = sys.stdin.read()
env_dir = pathlib.Path(os.environ["BENCHWATCH_ENV_DIR"])
key = os.environ["BENCHWATCH_ENV_KEY"]
ours = sorted(k for k in os.environ if k.startswith("BENCHWATCH_"))
with open(os.environ["CALLS"], "a") as calls:
    calls.write(json.dumps({"spec": spec, "dir": str(env_dir), "key": key, "ours": ours}) + "\n")
print("building...")
if mode == "python":
    print(json.dumps({"python": sys.executable}))
elif mode == "image":
    print(json.dumps({"image": "probe:" + key[:12]}))
elif mode == "unbuildable":
    print(json.dumps({"unbuildable": "torch does not build at this commit"}))
elif mode == "garbage":
    print("{not json")
elif mode == "exit1":
    print("compiling aten... error", file=sys.stderr)
    sys.exit(1)
elif mode == "sleep":
    time.sleep(float(sys.argv[2]))
    print(json.dumps({"python": sys.executable}))
elif mode == "fill":
    (env_dir / "blob").write_bytes(b"x" * int(sys.argv[2]))
    print(json.dumps({"python": sys.executable}))
"""


@pytest.fixture
def operator(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "provider.py"
    script.write_text(PROVIDER)
    return script, tmp_path / "calls.jsonl"


def provider(script: Path, calls: Path, *args: str, timeout_s: float = 30) -> Provider:
    return Provider(
        command=[sys.executable, str(script), *args], timeout_s=timeout_s, env={"CALLS": str(calls)}
    )


def calls_of(calls: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


SPEC = EnvSpec(
    components={"torch": Component(commit="abc123"), "triton": Component(version="3.1.0")}
)


def test_an_operator_provider_gets_the_spec_and_its_answer_is_read(
    operator: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, calls = operator
    monkeypatch.setenv("BENCHWATCH_TOKEN_PEPPER", "secret")
    envs = Environments(
        root=tmp_path / "cache",
        budget_bytes=GiB,
        providers={
            "venvs": provider(script, calls, "python"),
            "images": provider(script, calls, "image"),
            "fails": provider(script, calls, "unbuildable"),
        },
    )
    made = envs.prepare("venvs", SPEC)
    assert isinstance(made, Prepared)
    assert made.python == sys.executable
    (call,) = calls_of(calls)
    assert (
        call["spec"]
        == SPEC.canonical()
        == json.dumps(json.loads(SPEC.canonical()), sort_keys=True, separators=(",", ":"))
    )
    assert call["dir"] == str(made.directory / "env")
    assert call["key"] == made.key
    assert call["ours"] == ["BENCHWATCH_ENV_DIR", "BENCHWATCH_ENV_KEY"]  # no pepper
    again = envs.prepare("venvs", SPEC)
    assert isinstance(again, Prepared)
    assert not again.built
    assert len(calls_of(calls)) == 1
    image = envs.prepare("images", SPEC)
    assert isinstance(image, Prepared)
    assert image.key != made.key  # a provider's build is its own
    assert image.image == f"probe:{image.key[:12]}"
    assert probe_environment(image, {})["BENCHWATCH_IMAGE"] == image.image
    said = envs.prepare("fails", SPEC)
    assert isinstance(said, Unbuildable)
    assert said.reason == "torch does not build at this commit"
    assert said.remembered
    assert not (envs.root / said.key / "env").exists()  # the record stays, the build goes
    with pytest.raises(UnknownProvider, match="venvs"):
        envs.prepare("nosuch", SPEC)


def test_a_provider_that_fails_prints_garbage_or_times_out_is_unbuildable(
    operator: tuple[Path, Path], tmp_path: Path
) -> None:
    script, calls = operator
    envs = Environments(
        root=tmp_path / "cache",
        budget_bytes=GiB,
        providers={
            "exit1": provider(script, calls, "exit1"),
            "garbage": provider(script, calls, "garbage"),
            "slow": provider(script, calls, "sleep", "60", timeout_s=0.5),
            "missing": Provider(command=[str(tmp_path / "no-such-provider")]),
        },
    )
    failed = envs.prepare("exit1", SPEC)
    assert isinstance(failed, Unbuildable)
    assert failed.remembered  # a build that failed fails again
    assert "provider 'exit1' exited with status 1" in failed.reason
    assert "compiling aten... error" in failed.reason
    garbage = envs.prepare("garbage", SPEC)
    assert isinstance(garbage, Unbuildable)
    assert "answered '{not json'" in garbage.reason
    assert not garbage.remembered  # the provider is to be fixed, not the commit
    started = time.monotonic()
    slow = envs.prepare("slow", SPEC)
    assert time.monotonic() - started < 10
    assert isinstance(slow, Unbuildable)
    assert "did not finish within 0.5 s and was killed" in slow.reason
    assert not slow.remembered
    missing = envs.prepare("missing", SPEC)
    assert isinstance(missing, Unbuildable)
    assert "could not be started" in missing.reason
    assert not missing.remembered
    # What is not remembered leaves nothing behind: each is tried again next time.
    kept = sorted(p.name for p in envs.root.iterdir() if not p.name.startswith("."))
    assert kept == [failed.key, os.readlink(envs.root / failed.key)]
    assert len(calls_of(calls)) == 3
    envs.prepare("garbage", SPEC)
    assert len(calls_of(calls)) == 4


def test_the_least_recently_used_are_evicted_to_keep_the_budget(
    operator: tuple[Path, Path], tmp_path: Path
) -> None:
    script, calls = operator
    size = 100_000
    envs = Environments(
        root=tmp_path / "cache",
        budget_bytes=int(2.5 * size),
        providers={"fill": provider(script, calls, "fill", str(size))},
    )

    def spec(n: int) -> EnvSpec:
        return EnvSpec(components={"torch": Component(version=f"2.{n}")})

    def cached() -> set[str]:
        return {p.name for p in envs.root.iterdir() if p.is_symlink()}

    def used_bytes() -> int:
        return sum(
            f.stat().st_size
            for p in envs.root.iterdir()
            if p.is_symlink()
            for f in p.rglob("*")
            if f.is_file()
        )

    keys = {}
    for n in (1, 2):
        made = envs.prepare("fill", spec(n))
        assert isinstance(made, Prepared)
        keys[n] = made.key
    assert cached() == {keys[1], keys[2]}
    time.sleep(0.01)
    assert not envs.prepare("fill", spec(1)).built  # 1 is now used more recently than 2
    made = envs.prepare("fill", spec(3))
    keys[3] = made.key
    assert cached() == {keys[1], keys[3]}  # 2 went: the least recently used
    assert used_bytes() <= envs.budget_bytes
    assert not list(envs.root.glob(f"{keys[2]}*"))  # its link and its directory
    # An entry over the whole budget is still kept: it is the one just made.
    envs.budget_bytes = size // 2
    made = envs.prepare("fill", spec(4))
    assert cached() == {made.key}
    assert [
        p.name
        for p in envs.root.iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    ] == [os.readlink(envs.root / made.key)]
    # A build directory a dead worker left is swept.
    stale = envs.root / f"{'0' * 64}.dead"
    (stale / "env").mkdir(parents=True)
    envs.evict()
    assert not stale.exists()


def test_two_workers_preparing_one_spec_build_it_once(
    operator: tuple[Path, Path], tmp_path: Path
) -> None:
    script, calls = operator
    envs = Environments(
        root=tmp_path / "cache",
        budget_bytes=GiB,
        providers={"slow": provider(script, calls, "sleep", "0.5")},
    )
    results: list[Prepared | Unbuildable] = []
    threads = [
        threading.Thread(target=lambda: results.append(envs.prepare("slow", SPEC)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls_of(calls)) == 1
    assert all(isinstance(r, Prepared) for r in results)
    assert sorted(r.built for r in results) == [False, True]
    assert len({r.key for r in results}) == 1


def test_a_lost_lease_stops_the_build_and_keeps_nothing(
    operator: tuple[Path, Path], tmp_path: Path
) -> None:
    script, calls = operator
    envs = Environments(
        root=tmp_path / "cache",
        budget_bytes=GiB,
        providers={"slow": provider(script, calls, "sleep", "60")},
    )
    started = time.monotonic()
    with pytest.raises(PrepareStopped):
        envs.prepare("slow", SPEC, heartbeat=lambda: False, every_s=0.2)
    assert time.monotonic() - started < 10
    assert [p.name for p in envs.root.iterdir() if not p.name.startswith(".")] == []


def test_settings_refuse_what_a_provider_cannot_be() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        Provider(command=["/bin/build", "a\x00b"])
    with pytest.raises(ValidationError, match="empty"):
        Provider(command=[""])
    with pytest.raises(ValidationError, match="set by the worker"):
        Provider(command=["/bin/build"], env={"BENCHWATCH_ENV_DIR": "/tmp"})
    with pytest.raises(ValueError, match="built-in"):
        check_provider_names({"pip": Provider(command=["/bin/build"])})
    with pytest.raises(ValueError, match="provider name"):
        check_provider_names({"a b": Provider(command=["/bin/build"])})
    with pytest.raises(ValidationError, match="one of version, wheel, commit, image"):
        Component(version="1", wheel="/w.whl")
    with pytest.raises(ValidationError, match="source goes with a commit"):
        Component(version="1", source="/src")
    with pytest.raises(ValidationError, match="not an absolute path"):
        Component(wheel="w.whl")
    with pytest.raises(ValidationError, match="version"):
        Component(version="1; os_name == 'nt'")
    with pytest.raises(ValidationError, match="commit"):
        Component(commit="--upload-pack=evil")
    with pytest.raises(ValidationError, match="component name"):
        EnvSpec(components={"../x": Component(version="1")})


def test_the_settings_name_the_providers_and_the_cache(tmp_path: Path) -> None:
    config = Settings(
        PROVIDERS={"torch-src": {"command": ["/opt/build.sh"], "timeout_s": 60}},
        ENV_CACHE=str(tmp_path),
        ENV_CACHE_BYTES=1000,
        PIP_FIND_LINKS=["/srv/wheels"],
    )
    made = environments(config)
    assert (made.root, made.budget_bytes, made.find_links) == (tmp_path, 1000, ("/srv/wheels",))
    assert made.providers["torch-src"].timeout_s == 60
    default = environments(Settings())
    assert default.root.name == "envs"
    assert default.budget_bytes == 20 * GiB
    for bad in ({"pip": {"command": ["/x"]}}, {"s": {"command": "ls"}}, {"s": {"shell": True}}):
        with pytest.raises(ValidationError):
            Settings(PROVIDERS=bad)


def test_a_bad_provider_in_the_environment_stops_any_process_at_start() -> None:
    env = {**os.environ, "BENCHWATCH_PROVIDERS": json.dumps({"pip": {"command": ["/x"]}})}
    done = subprocess.run(
        [sys.executable, "-c", "import app.core.config"],
        env=env,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        timeout=60,
    )
    assert done.returncode != 0
    assert "PROVIDERS" in done.stderr
    assert "built-in" in done.stderr
