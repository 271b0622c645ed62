"""Environment providers: how a worker gets the environment a localization probe runs in.

``BENCHWATCH_PROVIDERS`` (JSON) names each operator provider: an argv (no shell) that reads a
spec of components on stdin, builds into ``$BENCHWATCH_ENV_DIR`` and prints one JSON line
saying how to run in what it made (``{"python": path}``, ``{"image": tag}``) or why it could
not (``{"unbuildable": reason}``). ``pip`` is built in (``workers.providers``); the worker
prepares and caches the environments (docs/localize.md, "Environment providers").

Like command suites, a provider comes from the operator's settings only: a localization
names one, never gives a command.
"""

import json
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.core.command_suites import check_argv, check_env_names
from app.core.urls import is_http_url

BUILTIN_PROVIDER = "pip"  # always there; an operator's provider may not take its name
PROVIDER_NAME_PATTERN = r"^[A-Za-z0-9_.+-]{1,32}$"
# Set by the worker for each build (a provider's own ``env`` may not set them).
WORKER_VARIABLES = ("BENCHWATCH_ENV_DIR", "BENCHWATCH_ENV_KEY")
# A component's name: a Python distribution's or a runtime's (torch, triton, cuda-runtime).
COMPONENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# A version as pip takes it after ``==`` (PEP 440, local labels included): no markers, spaces.
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,127}$"
# A commit or another revision git names; never an option (a leading '-').
COMMIT_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._/^~-]{0,127}$"
IMAGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,255}$"  # a container image reference


class Provider(BaseModel):
    """One operator provider (a value of ``BENCHWATCH_PROVIDERS``)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1)  # argv; never through a shell
    # A build still running after this long is killed; the probe is unbuildable this once
    # (a timeout is not remembered: the next try may be on a less busy machine).
    timeout_s: float = Field(default=7200.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)  # added to the worker's environment

    @field_validator("command")
    @classmethod
    def _argv(cls, command: list[str]) -> list[str]:
        return check_argv(command)

    @field_validator("env")
    @classmethod
    def _not_ours(cls, env: dict[str, str]) -> dict[str, str]:
        return check_env_names(env, WORKER_VARIABLES)


def check_provider_names(providers: dict[str, Provider]) -> dict[str, Provider]:
    """Provider names: letters, digits, ``_ . + -``, 32 long, and not the built-in's."""
    for name in providers:
        if not re.match(PROVIDER_NAME_PATTERN, name):
            raise ValueError(
                f"provider name {name!r}: 1 to 32 letters, digits or _ . + - characters"
            )
        if name == BUILTIN_PROVIDER:
            raise ValueError(f"provider name {name!r} is the built-in provider's")
    return providers


KINDS = ("version", "wheel", "commit", "image")


class Component(BaseModel):
    """Which build of one component a spec asks for: a version, a wheel, a commit or an image."""

    model_config = ConfigDict(extra="forbid")

    version: str | None = Field(default=None, pattern=VERSION_PATTERN)
    wheel: str | None = Field(default=None, min_length=1)  # a wheel file's absolute path
    commit: str | None = Field(default=None, pattern=COMMIT_PATTERN)
    # With a commit: the local git clone it is taken from (the pip provider needs one), or
    # the http(s) URL of the repository to clone (an operator's provider builds from it).
    source: str | None = Field(default=None, min_length=1)
    image: str | None = Field(default=None, pattern=IMAGE_PATTERN)  # an operator provider's

    @model_validator(mode="after")
    def _one_kind(self) -> "Component":
        given = [kind for kind in KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            raise ValueError(f"a component gives one of {', '.join(KINDS)}, not {given}")
        if self.source is not None and self.commit is None:
            raise ValueError("a source goes with a commit")
        source = self.source if self.source is None or not is_http_url(self.source) else None
        for path in (self.wheel, source):
            if path is not None and (not path.startswith("/") or "\x00" in path):
                raise ValueError(f"{path!r} is not an absolute path")
        return self


class EnvSpec(BaseModel):
    """The spec a provider is given: the components that differ from the worker's own."""

    model_config = ConfigDict(extra="forbid")

    components: dict[str, Component] = Field(default_factory=dict)

    @field_validator("components")
    @classmethod
    def _names(cls, components: dict[str, Component]) -> dict[str, Component]:
        for name in components:
            if not re.match(COMPONENT_PATTERN, name):
                raise ValueError(f"component name {name!r}: letters, digits or . _ -, 64 long")
        return components

    def canonical(self) -> str:
        """The spec as one line of JSON, keys sorted: what a provider reads, what names it."""
        return json.dumps(
            self.model_dump(mode="json", exclude_none=True), sort_keys=True, separators=(",", ":")
        )
