"""Branches kept apart: a branch other than its channel's default has a channel of its own.

A pull request's (or any feature branch's) results must never feed the default branch's
history, baselines or detection. Every series, history, detection, failure, aggregate and
silence is per machine and channel, so a branch run is stored under the channel
``<channel>@<branch>``: apart from the default branch by construction, and beside it where a
page asks for it (``@`` never occurs in a channel name a client gives). A run with no branch
(a worker's, a manual upload) is the default branch's.

``BENCHWATCH_DEFAULT_BRANCHES`` names each channel's default branch, ``"*"`` for the rest.
"""

import re
from collections.abc import Mapping

from app.core.bounds import fit

SEPARATOR = "@"
CHANNEL_LENGTH = 64  # of the channel columns
DEFAULT_BRANCHES: Mapping[str, str] = {"*": "main"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:+\-]+")


def default_branch(channel: str, defaults: Mapping[str, str] = DEFAULT_BRANCHES) -> str:
    """The channel's default branch."""
    return defaults.get(channel, defaults.get("*", "main"))


def is_default(branch: str, channel: str, defaults: Mapping[str, str] = DEFAULT_BRANCHES) -> bool:
    """Whether a run of ``branch`` belongs to the channel's own history (no branch: it does)."""
    name = branch.removeprefix("refs/heads/")
    return not name or name == default_branch(channel, defaults)


def branch_channel(channel: str, branch: str) -> str:
    """The channel a branch's runs are stored under: ``<channel>@<branch>``, at most 64 long.

    Characters a channel may not hold become ``-``; a name too long keeps its start and a
    hash of the whole, so two long branch names stay apart.
    """
    slug = _UNSAFE.sub("-", branch.removeprefix("refs/heads/")).strip("-") or "branch"
    return fit(f"{channel}{SEPARATOR}{slug}", CHANNEL_LENGTH, branch, 10)


def is_branch_channel(channel: str) -> bool:
    """Whether a channel holds a branch's runs (not a default branch's history)."""
    return SEPARATOR in channel


def base_channel(channel: str) -> str:
    """The default branch's channel of a branch channel (a channel itself otherwise)."""
    return channel.partition(SEPARATOR)[0]
