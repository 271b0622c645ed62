"""Command suites: an operator's own benchmark command, run by a worker as a suite run.

``BENCHWATCH_COMMAND_SUITES`` (JSON) names each command: its argv (no shell), working
directory, environment, timeout, the files it writes and their format. A schedule (or a
trigger) names one with the tier ``command:<name>``; the machine's worker runs it as a shard
(lease, retries, kill on timeout) with ``$BENCHWATCH_OUTPUT_DIR`` set to a fresh directory, and
reads the files it left there through the upload parsers (docs/command-suites.md).

The command comes from the operator's settings only: the API and token holders can name a
suite, never give a command.
"""

import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

COMMAND_PREFIX = "command:"  # a suite run's tier: "command:<name>" (SuiteRun.tier is 32 long)
NAME_PATTERN = r"^[A-Za-z0-9_.+-]{1,24}$"
# The upload format a command's files are read with: "auto" or one of app.uploads.formats,
# which core cannot name (checked at start, app.runtime.check_settings).
FORMAT_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}$"


class CommandHints(BaseModel):
    """What the files do not say themselves, as ``benchwatch upload``'s flags give it."""

    model_config = ConfigDict(extra="forbid")

    suite: str | None = Field(default=None, min_length=1, max_length=64)
    config: str | None = Field(default=None, min_length=1, max_length=64)
    precision: str | None = Field(default=None, min_length=1, max_length=16)
    mode: Literal["inference", "training"] | None = None
    device: str | None = Field(default=None, min_length=1, max_length=16)


class CommandSuite(BaseModel):
    """One command a worker can run as a suite (a value of ``BENCHWATCH_COMMAND_SUITES``)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1)  # argv; never through a shell
    cwd: str | None = None  # the working directory (None: the worker's)
    env: dict[str, str] = Field(default_factory=dict)  # added to the worker's environment
    timeout_s: float | None = Field(default=None, gt=0)  # None: BENCHWATCH_SHARD_TIMEOUT_S
    # Globs, relative to $BENCHWATCH_OUTPUT_DIR, of the files to read back.
    outputs: list[str] = Field(default_factory=lambda: ["**/*"], min_length=1)
    format: str = Field(default="auto", pattern=FORMAT_PATTERN)
    hints: CommandHints = Field(default_factory=CommandHints)
    # How many shards: each runs the command once, with $BENCHWATCH_SHARD_INDEX and _COUNT.
    shards: int = Field(default=1, ge=1, le=256)

    @field_validator("command")
    @classmethod
    def _argv(cls, command: list[str]) -> list[str]:
        return check_argv(command)

    @field_validator("outputs")
    @classmethod
    def _relative(cls, outputs: list[str]) -> list[str]:
        for glob in outputs:
            path = PurePosixPath(glob)
            if not glob or path.is_absolute() or ".." in path.parts:
                raise ValueError(
                    f"output {glob!r}: a glob relative to $BENCHWATCH_OUTPUT_DIR, without '..'"
                )
        return outputs

    @field_validator("env")
    @classmethod
    def _not_ours(cls, env: dict[str, str]) -> dict[str, str]:
        return check_env_names(env, ("BENCHWATCH_OUTPUT_DIR", "BENCHWATCH_SHARD_"))


def check_argv(command: list[str]) -> list[str]:
    """An operator's argv, run without a shell: a program first, no NUL anywhere."""
    if not command[0]:
        raise ValueError("the command's program (its first word) is empty")
    if any("\x00" in word for word in command):
        raise ValueError("a NUL character in the command")
    return command


def check_env_names(env: dict[str, str], workers: tuple[str, ...]) -> dict[str, str]:
    """Variables an operator adds: valid names, none of the worker's own.

    ``workers``: the names the worker sets, or their prefixes (ending in ``_``).
    """
    for name in env:
        if not name or "=" in name or "\x00" in name:
            raise ValueError(f"environment variable name {name!r} is not valid")
        if any(name.startswith(own) if own.endswith("_") else name == own for own in workers):
            raise ValueError(f"{name} is set by the worker")
    return env


def check_names(suites: dict[str, CommandSuite]) -> dict[str, CommandSuite]:
    """Suite names fit the tier column once prefixed: letters, digits, ``_ . + -``, 24 long."""
    for name in suites:
        if not re.match(NAME_PATTERN, name):
            raise ValueError(
                f"command suite name {name!r}: 1 to 24 letters, digits or _ . + - characters"
            )
    return suites


def command_tier(name: str) -> str:
    """The suite run tier of command suite ``name``."""
    return f"{COMMAND_PREFIX}{name}"


def command_name(tier: str) -> str | None:
    """The command suite a tier names, or None for a tier of the built-in suite."""
    return tier.removeprefix(COMMAND_PREFIX) if tier.startswith(COMMAND_PREFIX) else None
