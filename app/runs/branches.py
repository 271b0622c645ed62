"""Branches kept apart: a branch other than its channel's default has a channel of its own.

A pull request's (or any feature branch's) results must never feed the default branch's
history, baselines or detection. Every series, history, detection, failure, aggregate and
silence is per machine and channel, so a branch run is stored under the channel
``<channel>@<branch>``: apart from the default branch by construction, and beside it where a
page asks for it (``@`` never occurs in a channel name a client gives). A run with no branch
(a worker's, a manual upload) is the default branch's.

Which branch is the default is known when the upload says so (``default_branch``: the
repository's, as its CI reports it); else ``BENCHWATCH_DEFAULT_BRANCHES`` guesses it, naming
each channel's default branch, ``"*"`` for the rest.
"""

import hashlib
import logging
import re
from collections.abc import Mapping

from app.core.bounds import fit

SEPARATOR = "@"
CHANNEL_LENGTH = 64  # of the channel columns
DEFAULT_BRANCHES: Mapping[str, str] = {"*": "main"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:+\-]+")
logger = logging.getLogger(__name__)


def warn_if_guessed(defaults: Mapping[str, str], branch_runs_days: int) -> bool:
    """Log a warning (and say so) when branch retention is on and the defaults are the guess.

    With the built-in ``{"*": "main"}``, a repository whose default branch is ``master`` or
    ``develop`` and whose uploads do not say so (``default_branch``) has its whole mainline
    stored as a branch, and retention deletes it after ``branch_runs_days``.
    """
    if branch_runs_days <= 0 or dict(defaults) != dict(DEFAULT_BRANCHES):
        return False
    logger.warning(
        "BENCHWATCH_RETAIN_BRANCH_RUNS_DAYS=%d deletes branch runs, and the default branch is "
        "guessed (BENCHWATCH_DEFAULT_BRANCHES is not set: 'main' for every channel): a run "
        "whose upload does not say its repository's default branch (benchwatch upload does in "
        "GitHub Actions and GitLab CI) and whose branch is not 'main' is stored as a branch "
        'and deleted. Set BENCHWATCH_DEFAULT_BRANCHES, e.g. \'{"*": "master"}\'',
        branch_runs_days,
    )
    return True


def default_branch(channel: str, defaults: Mapping[str, str] = DEFAULT_BRANCHES) -> str:
    """The channel's default branch, as configured."""
    return defaults.get(channel, defaults.get("*", "main"))


def is_default(
    branch: str, channel: str, defaults: Mapping[str, str] = DEFAULT_BRANCHES, known: str = ""
) -> bool:
    """Whether a run of ``branch`` belongs to the channel's own history (no branch: it does).

    ``known``: the repository's default branch as the upload says it, which wins over the
    configured guess.
    """
    return not kept_apart_because(branch, channel, defaults, known)


def kept_apart_because(
    branch: str, channel: str, defaults: Mapping[str, str] = DEFAULT_BRANCHES, known: str = ""
) -> str:
    """Why a run of ``branch`` is stored as a branch, apart from the history ("": it is not)."""
    name = branch.removeprefix("refs/heads/")
    default = known.removeprefix("refs/heads/")
    guess = default_branch(channel, defaults)
    if not name or name == (default or guess):
        return ""
    if default:
        return f"branch {_shown(name)} is not {_shown(default)}, the repository's default branch"
    return (
        f"branch {_shown(name)} is not {_shown(guess)}, the default branch "
        "BENCHWATCH_DEFAULT_BRANCHES guesses (the upload did not say the repository's)"
    )


def _shown(name: str) -> str:
    """``name`` quoted, at most 120 characters: a reason fits its column (512), escapes and all."""
    quoted = repr(name)
    return quoted if len(quoted) <= 120 else f"{quoted[:117]}..."


def branch_channel(channel: str, branch: str) -> str:
    """The channel a branch's runs are stored under: ``<channel>@<branch>``, at most 64 long.

    A name a channel can hold as it is stays as it is. Characters a channel may not hold
    become ``-``, and the name then gets a hash of the branch's own: ``feature/x`` and
    ``feature-x`` never share a channel. A name too long keeps its start and a hash of the
    whole, so two long branch names stay apart.
    """
    name = branch.removeprefix("refs/heads/")
    slug = _UNSAFE.sub("-", name).strip("-") or "branch"
    if slug != name:
        slug = f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return fit(f"{channel}{SEPARATOR}{slug}", CHANNEL_LENGTH, branch, 10)


def is_branch_channel(channel: str) -> bool:
    """Whether a channel holds a branch's runs (not a default branch's history)."""
    return SEPARATOR in channel


def base_channel(channel: str) -> str:
    """The default branch's channel of a branch channel (a channel itself otherwise)."""
    return channel.partition(SEPARATOR)[0]
