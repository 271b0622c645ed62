"""A component's commit source (``BENCHWATCH_LOCALIZE_SOURCES``), as the bisection reads it.

Its recorded versions as commits, the commits between two of them, a commit's title, author
and link: ``CommitSource``. A local git clone is one (``Clone``, here); a GitHub repository
read through its REST API is the other (``workers.github_commits``, which also turns a
setting's value into the one it names).

The commit bisection of ``workers.localize`` reads its candidates here.
"""

import re
import subprocess
from typing import Protocol

from app.core.providers import COMMIT_PATTERN

# A version that names its commit: setuptools-scm's 1.2.dev3+g1a2b3c4, torch's 2.6.0a0+git1a2b3c4.
VERSION_COMMIT = re.compile(r"(?:^|[+.])g(?:it)?([0-9a-f]{7,40})(?:$|[.+])")


class CommitSource(Protocol):
    """Where a component's commits are read: its versions' commits, a range, a commit's facts."""

    @property
    def path(self) -> str:
        """What a provider builds a commit from: the clone's path, or the repository's URL."""

    def commit_of(self, recorded: str) -> str | None:
        """The full commit a recorded version (or commit, or tag) names here, or None."""

    def between(self, good: str, bad: str) -> list[str] | str:
        """The commits from ``good`` to ``bad``, both ends included, oldest first; or why not."""

    def describe(self, commit: str) -> dict[str, str]:
        """A commit's ``commit``, ``title``, ``author``, ``date``; its ``link`` where it has one."""


def revisions(recorded: str) -> list[str]:
    """The names a recorded version may give its commit by, in the order they are tried.

    The value itself where git could take it as a revision (a full or short commit, a tag),
    then the commit a version names (``+g1a2b3c4``, ``+git1a2b3c4``).
    """
    names = [recorded] if re.match(COMMIT_PATTERN, recorded) else []
    if match := VERSION_COMMIT.search(recorded):
        names.append(match.group(1))
    return names


class Clone:
    """A component's local git clone: its recorded versions as commits, and commits' titles."""

    def __init__(self, path: str) -> None:
        """The clone at ``path`` (``BENCHWATCH_LOCALIZE_SOURCES``)."""
        self.path = path

    def git(self, *args: str) -> str | None:
        """A git command's output in the clone, or None when it failed."""
        done = subprocess.run(
            ["git", "-C", self.path, *args], capture_output=True, text=True, timeout=120
        )
        return done.stdout.strip() if done.returncode == 0 else None

    def commit_of(self, recorded: str) -> str | None:
        """The full commit a recorded version (or commit) names in this clone, or None."""
        for name in revisions(recorded):
            if found := self.git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"):
                return found
        return None

    def between(self, good: str, bad: str) -> list[str] | str:
        """The commits from ``good`` to ``bad``, both ends included, oldest first; or why not."""
        listed = self.git("rev-list", "--reverse", f"{good}..{bad}")
        if listed is None:
            return f"git rev-list {good}..{bad} failed in {self.path}"
        commits = listed.split()
        if not commits or commits[-1] != bad:
            return f"{bad} does not descend from {good} in {self.path}"
        return [good, *commits]

    def describe(self, commit: str) -> dict[str, str]:
        """A commit's title, author and date; its link where the clone's origin is a forge."""
        shown = self.git("log", "-1", "--format=%s%x1f%an <%ae>%x1f%cI", commit) or ""
        title, author, date = ([*shown.split("\x1f"), "", "", ""])[:3]
        found = {"commit": commit, "title": title, "author": author, "date": date}
        if (origin := self.git("remote", "get-url", "origin")) and (web := _web(origin)):
            found["link"] = f"{web}/commit/{commit}"
        return found


def _web(origin: str) -> str | None:
    """A clone's origin as its web address (https or scp-like git@host:owner/repo)."""
    if match := re.match(r"^git@([\w.-]+):(.+?)(?:\.git)?$", origin):
        return f"https://{match.group(1)}/{match.group(2)}"
    if match := re.match(r"^https?://(?:[^@/]+@)?([\w.-]+/.+?)(?:\.git)?/?$", origin):
        return f"https://{match.group(1)}"
    return None
