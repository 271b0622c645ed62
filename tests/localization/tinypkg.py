"""A tiny pure-Python package in a local git repository, and the command suite that measures it.

Sixteen commits: ``c0`` is the last good nightly's, ``c15`` the first bad one's; ``c9`` makes
``tinypkg.op`` 40% slower (more work per call), and ``c7`` does not build (its ``setup.py``
raises; ``c8`` removes it). The command suite is a script run by the probe environment's
``python``: it times ``op`` against a calibration loop (c0's ``op``) run beside it, ten samples
of the least of three calls each, and writes pytest-benchmark JSON with every sample into
``$BENCHWATCH_OUTPUT_DIR``. Timed alone, the same loop takes 0.7 ms or 1.3 ms here from one
second to the next (a shared machine's cores change speed); against the calibration it varies
by about 2%, the noise that is left, which the localization's repeats work with.
"""

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COMMITS = 16
SLOW, BROKEN = 9, 7
WORK = 20_000  # iterations of op: about a millisecond here
SUITE, MODEL, COMMAND = "tinybench", "test_op", "tiny"

BENCH = r"""
import json, os, statistics, time
import tinypkg

def calibration():
    total = 0
    for i in range(WORK):
        total += i * i
    return total

def least(function):
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best

for _ in range(20):
    tinypkg.op()  # warm up
# op's time in milliseconds of the calibration loop (c0's op, 1 ms by definition), timed
# side by side: the host's own speed, which swings by half on a shared machine, cancels.
data = [least(tinypkg.op) / least(calibration) for _ in range(10)]
entry = {"name": "test_op", "fullname": "bench_tiny.py::test_op", "group": None, "params": None,
         "stats": {"median": statistics.median(data) / 1000, "min": min(data) / 1000,
                   "max": max(data) / 1000, "data": [x / 1000 for x in data]}}
document = {"benchmarks": [entry], "machine_info": {}, "commit_info": {},
            "datetime": "2026-01-01T00:00:00", "version": "4.0.0"}
with open(os.path.join(os.environ["BENCHWATCH_OUTPUT_DIR"], "bench.json"), "w") as out:
    json.dump(document, out)
""".replace("WORK", str(WORK))

PYPROJECT = (
    '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    '[project]\nname = "tinypkg"\nversion = "0.1"\n'
)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def source(work: int, revision: int) -> str:
    return (
        f"REVISION = {revision}\n\n\ndef op():\n    total = 0\n"
        f"    for i in range({work}):\n        total += i * i\n    return total\n"
    )


@dataclass(frozen=True)
class Tiny:
    """The repository, its commits (oldest first) and the measuring script."""

    repo: Path
    commits: list[str]
    script: Path

    def version(self, index: int) -> str:
        """The version a run records for commit ``index`` (setuptools-scm's style)."""
        return f"0.1.dev{index}+g{self.commits[index][:7]}"

    def command_suite(self) -> dict[str, Any]:
        """The command suite (``BENCHWATCH_COMMAND_SUITES`` entry) that measures the case."""
        return {
            "command": ["python", str(self.script)],
            "format": "pytest-benchmark",
            "hints": {"suite": SUITE, "device": "cpu"},
            "timeout_s": 120,
        }

    def settings_json(self) -> dict[str, str]:
        """The worker's settings for it, as environment variables."""
        return {
            "BENCHWATCH_COMMAND_SUITES": json.dumps({COMMAND: self.command_suite()}),
            "BENCHWATCH_LOCALIZE_SUITES": json.dumps({SUITE: COMMAND}),
            "BENCHWATCH_LOCALIZE_SOURCES": json.dumps({"tinypkg": str(self.repo)}),
        }


def make(folder: Path) -> Tiny:
    """The repository of sixteen commits and the script, under ``folder``."""
    repo = folder / "tinypkg"
    (repo / "tinypkg").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "A Developer")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    commits = []
    for index in range(COMMITS):
        work = WORK * 14 // 10 if index >= SLOW else WORK
        (repo / "tinypkg" / "__init__.py").write_text(source(work, index))
        setup = repo / "setup.py"
        if index == BROKEN:
            setup.write_text('raise RuntimeError("this commit does not build")\n')
        elif setup.exists():
            setup.unlink()
        git(repo, "add", "-A")
        title = {SLOW: "Do more work in op", BROKEN: "Half-done setup.py"}.get(index, "Tidy")
        git(repo, "commit", "-q", "-m", f"{title} (revision {index})")
        commits.append(git(repo, "rev-parse", "HEAD"))
    script = folder / "bench_tiny.py"
    script.write_text(BENCH)
    return Tiny(repo, commits, script)
