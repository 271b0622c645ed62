"""What a CI job installs to post results: the light client against the whole service.

Each is installed into a fresh virtual environment, side by side, with pip's cache as it is
(run it twice to compare warm caches). Prints the packages, the megabytes of site-packages and
the seconds pip took, and the ratios.

    .venv/bin/python bench/client_install.py [--before CHECKOUT]

``--before``: also the service of an earlier checkout (e.g. ``git worktree add /tmp/b 61d5a5d``,
the last revision whose CI jobs installed the service to upload).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHOICES = {
    "light client (pip install ./client)": [str(ROOT / "client")],
    "service today (pip install ./client .)": [
        "-c",
        str(ROOT / "constraints.txt"),
        str(ROOT / "client"),
        str(ROOT),
    ],
}


def site_megabytes(where: Path) -> float:
    site = next((where / "lib").glob("python3*/site-packages"))
    return sum(f.stat().st_size for f in site.rglob("*") if f.is_file()) / 1e6


def measure(where: Path, requirements: list[str]) -> tuple[int, float, float]:
    """Packages, megabytes and seconds of one install into a fresh environment at ``where``.

    The megabytes are those the install added: a fresh environment's pip is left out.
    """
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    bare = site_megabytes(where)
    pip = [str(where / "bin" / "python"), "-m", "pip"]
    started = time.perf_counter()
    subprocess.run(
        [*pip, "install", "-q", "--disable-pip-version-check", *requirements], check=True
    )
    seconds = time.perf_counter() - started
    listed = subprocess.run([*pip, "list", "--format", "json"], capture_output=True, check=True)
    # pip (and setuptools, on older Pythons) come with every environment: not the job's
    packages = [p for p in json.loads(listed.stdout) if p["name"] not in ("pip", "setuptools")]
    return len(packages), site_megabytes(where) - bare, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an earlier checkout's service, too")
    before = parser.parse_args().before
    choices = dict(CHOICES)
    if before:
        constraints = before / "constraints.txt"
        choices[f"service of {before} (pip install .)"] = ["-c", str(constraints), str(before)]
    figures = {}
    with tempfile.TemporaryDirectory() as scratch:
        for number, (name, requirements) in enumerate(choices.items()):
            figures[name] = measure(Path(scratch) / f"env{number}", requirements)
            packages, size, seconds = figures[name]
            print(f"{name:62} {packages:4d} packages {size:8.1f} MB {seconds:7.1f} s")
    light, *others = figures.values()
    for name, heavy in zip(list(figures)[1:], others, strict=True):
        ratios = [f"{h / lo:.1f}x" for h, lo in zip(heavy, light, strict=True)]
        print(f"  {name[:40]} / light client: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
