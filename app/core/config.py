"""Settings, read once from ``BENCHWATCH_*`` environment variables (or a ``.env`` file)."""

import re
from pathlib import Path
from typing import Annotated, Literal

from platformdirs import user_data_dir
from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.command_suites import CommandSuite, check_names, command_tier
from app.core.cpu_cores import parse_pin_cores
from app.core.cron import parse_cron
from app.core.names import NAME_PATTERN
from app.core.providers import (
    BUILTIN_PROVIDER,
    COMPONENT_PATTERN,
    Provider,
    check_provider_names,
)
from app.core.urls import is_http_url


def default_database_url() -> str:
    """SQLite file in the user's data directory: the embedded default."""
    data_dir = Path(user_data_dir("benchwatch", appauthor=False))
    return f"sqlite:///{data_dir / 'benchwatch.db'}"


DEV_PEPPER = "benchwatch-dev-pepper"  # fine for a laptop; production sets its own secret


# A model a schedule names.
SCHEDULED_MODEL = Annotated[str, Field(min_length=1, max_length=128, pattern=NAME_PATTERN.pattern)]


class Schedule(BaseModel):
    """When `benchwatch beat` starts a suite run on a machine (cron: minute hour dom month dow)."""

    machine: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:+-]+$")
    tier: str = "daily"  # a tier of the built-in suite: beat refuses an unknown one at start
    cron: str = Field(default="0 */12 * * *", pattern=r"^\S+( \S+){4}$")
    channel: str = "nightly"
    # A command suite of BENCHWATCH_COMMAND_SUITES to run instead of a tier (beat refuses an
    # unknown one at start); its suite runs have the tier "command:<name>".
    command: str | None = Field(default=None, min_length=1, max_length=24)
    # Only these models' cases of the tier (as a trigger's `models`): operators per commit,
    # a few models nightly. A list that names no case of the tier fails its runs, saying so.
    models: list[SCHEDULED_MODEL] | None = Field(default=None, min_length=1, max_length=64)

    @property
    def entry(self) -> str:
        """Beat's name for this schedule: its machine and tier, and its models if it names any."""
        models = f"-{'+'.join(self.models)}" if self.models else ""
        return f"suite-{self.machine}-{self.suite_tier}{models}"

    @property
    def suite_tier(self) -> str:
        """The tier of the suite runs this schedule starts: a built-in tier or a command's."""
        return command_tier(self.command) if self.command else self.tier

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, cron: str) -> str:
        """A cron Celery's crontab would refuse is refused at load, before beat or the sweep."""
        parse_cron(cron)
        return cron


# A LOCALIZE_SOURCES value naming a GitHub repository: github:OWNER/REPO, as GitHub spells them.
GITHUB_SOURCE = re.compile(r"^github:([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/([A-Za-z0-9._-]{1,100})$")


def github_source(value: str) -> tuple[str, str] | None:
    """The owner and repository a LOCALIZE_SOURCES value names on GitHub, or None."""
    match = GITHUB_SOURCE.match(value)
    if match is None or match.group(2) in (".", ".."):
        return None
    return match.group(1), match.group(2)


# A worker's node name: it ends the worker's Celery name (``machine@node``).
NODE_PATTERN = r"[A-Za-z0-9_.-]{1,64}"


class Settings(BaseSettings):
    """Everything configurable about a benchwatch deployment."""

    model_config = SettingsConfigDict(env_prefix="BENCHWATCH_", env_file=".env", extra="ignore")

    DATABASE_URL: str = Field(default_factory=default_database_url)
    BROKER_URL: str | None = None  # None: background work runs in process
    PUBLIC_READ: bool = True  # False: every read needs a token (any scope)
    TOKEN_PEPPER: SecretStr = SecretStr(DEV_PEPPER)
    MAX_BODY_BYTES: int = 64 * 1024 * 1024  # larger request bodies get 413
    PARSE_TIMEOUT_S: float = 20.0  # an upload still being read after this long gets 413
    # Postgres: a statement of a session serving an HTTP request ends after this long, answered
    # 503 (docs/security.md, "Rate limits and timeouts"); workers, migrations and retention
    # are not limited. 0: no limit.
    STATEMENT_TIMEOUT_S: float = Field(default=30.0, ge=0)
    # Anonymous reads (GET/HEAD without a live token or sign-in session) per client address:
    # ANON_RATE_LIMIT per ANON_RATE_WINDOW_S, at most ANON_RATE_BURST at once; past them 429
    # with Retry-After (docs/security.md, "Rate limits and timeouts"). 0: no limit.
    ANON_RATE_LIMIT: int = Field(default=600, ge=0)
    ANON_RATE_WINDOW_S: float = Field(default=60.0, gt=0)
    ANON_RATE_BURST: int = Field(default=120, ge=1)
    # Failed sign-ins (POST /login with an unknown token) per client address: at most
    # LOGIN_FAIL_LIMIT per LOGIN_FAIL_WINDOW_S (all of them at once); past them 429 with
    # Retry-After, the token not even checked. 0: no limit.
    LOGIN_FAIL_LIMIT: int = Field(default=10, ge=0)
    LOGIN_FAIL_WINDOW_S: float = Field(default=300.0, gt=0)
    # A triggered suite run no worker adopted in this long is expired (stops counting to caps).
    TRIGGER_EXPIRE_S: float = Field(default=6 * 3600.0, gt=0)
    LOG_LEVEL: str = "INFO"
    LOG_FORMAT: Literal["text", "json"] = "text"  # json: one object per line, with request_id
    METRICS: bool = True  # False: no /metrics (docs/metrics.md); else readable as other reads
    # Detector thresholds per suite or metric, e.g. {"metric:dynamo_peak_mem":
    # {"min_rel_change": 0.2}, "suite:timm_models": {"max_p_value": 0.0001}} (JSON in the env).
    DETECTOR_THRESHOLDS: dict[str, dict[str, float]] = Field(default_factory=dict)
    # Benchmark workers. SCHEDULES is JSON, e.g. [{"machine": "h100-a", "tier": "daily",
    # "cron": "0 */12 * * *"}]: a suite run per machine every 12 hours.
    SCHEDULES: list[Schedule] = Field(default_factory=list)
    # Commands a worker may run as suites (docs/command-suites.md), JSON: name -> {"command":
    # [argv...], "cwd", "env", "timeout_s", "outputs": [glob...], "format", "hints", "shards"}.
    # Only the operator sets them; a schedule or a trigger names one.
    COMMAND_SUITES: dict[str, CommandSuite] = Field(default_factory=dict)
    # Environment providers of localization probes (docs/localize.md), JSON: name ->
    # {"command": [argv...], "timeout_s", "env"}; "pip" is built in. A worker keeps what they
    # prepare in ENV_CACHE (empty: its user cache directory's benchwatch/envs), the least
    # recently used removed past ENV_CACHE_BYTES. PIP_FIND_LINKS, a JSON list of folders (or
    # pages) of wheels: the pip provider then installs versions from those only.
    PROVIDERS: dict[str, Provider] = Field(default_factory=dict)
    ENV_CACHE: str = ""
    ENV_CACHE_BYTES: int = Field(default=20 * 1024**3, ge=0)
    PIP_FIND_LINKS: list[str] = Field(default_factory=list)
    PIP_TIMEOUT_S: float = Field(default=3600.0, gt=0)  # the pip provider's, per environment
    # Localization (docs/localize.md): started for each step confirmed ("confirmed") or
    # suspected ("suspected") on a series a worker can measure, or never by itself ("off"; the
    # alert page, API and CLI start one all the same); at most LOCALIZE_BUDGET a machine in
    # 24 hours, however started. LOCALIZE_SUITES maps a series' suite to the command suite
    # that measures it (how a CI-uploaded series is localized), JSON: {"my-suite": "name"}.
    LOCALIZE: Literal["off", "confirmed", "suspected"] = "off"
    LOCALIZE_BUDGET: int = Field(default=3, ge=0)
    LOCALIZE_SUITES: dict[str, str] = Field(default_factory=dict)
    # On the machine's worker: the provider that prepares every probe's environment ("pip" or
    # one of PROVIDERS), and where the commits of each component whose commits are bisected
    # are read, JSON: a local git clone or a GitHub repository read through its REST API,
    # {"torch": "/srv/pytorch", "triton": "github:triton-lang/triton"} (a component's recorded
    # versions must name commits there). LOCALIZE_GITHUB_API_URL is GitHub's API (GitHub
    # Enterprise: https://HOST/api/v3), LOCALIZE_GITHUB_TOKEN the token it is read with (empty:
    # none, GitHub's anonymous rate limit; a token that can read the repositories' contents).
    LOCALIZE_PROVIDER: str = "pip"
    LOCALIZE_SOURCES: dict[str, str] = Field(default_factory=dict)
    LOCALIZE_GITHUB_API_URL: str = "https://api.github.com"
    LOCALIZE_GITHUB_TOKEN: SecretStr = SecretStr("")
    # A run whose detection has not finished this long after it was stored is queued again
    # (its task was lost: broker down, worker killed); the sweep looks every DETECTION_SWEEP_S.
    DETECTION_OVERDUE_S: float = 600.0
    DETECTION_SWEEP_S: float = 300.0
    # A sharded run (CI jobs uploading parts of one workflow's run) that declared no shard
    # count, or is still missing some, is complete once no shard came for this long.
    RUN_SHARDS_QUIET_S: float = 1800.0
    # Each channel's default branch ("*": the others'): a run of another branch is kept apart
    # from its history, under the channel "<channel>@<branch>", and gets verdicts instead.
    DEFAULT_BRANCHES: dict[str, str] = Field(default_factory=lambda: {"*": "main"})
    # Retention (docs/operations.md), in days; 0 keeps forever. A result measured longer ago
    # loses its raw samples (its value stays); a branch's run (a pull request's) is deleted.
    RETAIN_SAMPLES_DAYS: int = Field(default=0, ge=0)
    RETAIN_BRANCH_RUNS_DAYS: int = Field(default=0, ge=0)
    # A run's time from a token without scope admin (docs/security.md): from this many days
    # ago to this many ahead (clock skew); an admin token may import history outside it.
    RUN_TIME_BACK_DAYS: int = Field(default=400, ge=1)
    RUN_TIME_AHEAD_DAYS: int = Field(default=2, ge=0)
    # The daily upkeep's monthly partitions of ``result`` (Postgres, docs/operations.md): at
    # most this many made per pass, and none for a month more than this many months before
    # this one (nor past the months made ahead): those rows stay in the DEFAULT partition.
    PARTITIONS_PER_PASS: int = Field(default=24, ge=1)
    PARTITION_MONTHS_BACK: int = Field(default=120, ge=0)
    SILENCE_SWEEP_S: float = 600.0  # how often machines that stopped reporting are looked for
    SHARD_TIMEOUT_S: float = 3600.0  # a shard's subprocess is killed after this long
    SHARD_LEASE_S: float = 60.0  # a worker renews its hold on a shard this often (x1/3)
    SHARD_ATTEMPTS: int = 3  # a crashed or hung shard runs at most this many times
    # The cores a shard's process pins itself to (Linux): "off", "auto" (every physical core
    # but the first, which is left to the OS and the worker) or a list such as "2-7".
    PIN_CORES: str = "auto"
    # This worker's node name (`benchwatch worker --node`; empty: the host name). Several
    # nodes serving one machine name form a pool (docs/command-suites.md, "Pools").
    NODE: str = Field(default="", pattern=rf"^({NODE_PATTERN})?$")
    # A pooled run's node whose timings differ from the rest of its pool by more than this
    # share (and by more than their noise) is flagged as drifted.
    POOL_DRIFT_THRESHOLD: float = Field(default=0.05, gt=0, lt=1)
    # Notifications (docs/alerts.md). PUBLIC_URL is where notices' links point.
    PUBLIC_URL: str = "http://127.0.0.1:8000"
    SUBSCRIPTIONS_FILE: Path | None = None  # YAML subscriptions, loaded at start-up
    # Receivers on loopback, private, link-local or metadata addresses are refused unless
    # listed here: comma-separated addresses, networks (10.0.0.0/8) or host names.
    RECEIVER_ALLOW: str = ""
    NOTIFY_GROUP_WAIT_S: float = 600.0  # after a group opens (or grows), before its notice
    NOTIFY_REMIND_S: float = 86400.0  # untriaged groups are recalled this often
    NOTIFY_ESCALATE_S: float = 172800.0  # a group untriaged this long is escalated, once
    # Triage deadlines in working days (Mon-Fri) after a finding is found: to triage it, and
    # once acknowledged to link a bug (Perfherder's two and four). Past one it is overdue.
    TRIAGE_DAYS: int = Field(default=2, ge=0, le=60)
    BUG_DAYS: int = Field(default=4, ge=0, le=60)
    NOTIFY_SWEEP_S: float = 30.0  # how often due notices and retries are looked for
    DELIVERY_TIMEOUT_S: float = 10.0  # per attempt: connect, send and read
    DELIVERY_BACKOFF_S: float = 30.0  # the first retry's delay; doubles, with jitter
    DELIVERY_GIVE_UP_S: float = 86400.0  # a notice not delivered this long is given up
    # An attempt that has not reported back this long (its worker died) is made again; keep
    # it above the longest send, a few DELIVERY_TIMEOUT_S.
    DELIVERY_LEASE_S: float = 120.0
    SMTP_HOST: str = ""  # empty: email receivers fail with "no SMTP server configured"
    SMTP_PORT: int = 587
    SMTP_STARTTLS: bool = True
    SMTP_IMPLICIT_TLS: bool = False  # TLS from the first byte (port 465); STARTTLS is then moot
    SMTP_USERNAME: str = ""
    SMTP_PASSWORD: SecretStr = SecretStr("")
    SMTP_FROM: str = "benchwatch@localhost"
    GITHUB_API_URL: str = "https://api.github.com"
    GITHUB_TOKEN: SecretStr = SecretStr("")  # for GitHub issue receivers
    # Two-way bug status (docs/alerts.md): GitHub's ``issues`` webhook, signed with this secret
    # (empty: the endpoint answers 404), and the poll of linked issues when no webhook comes
    # (0: never). A closed issue's groups take GITHUB_CLOSED_STATUS.
    GITHUB_WEBHOOK_SECRET: SecretStr = SecretStr("")
    GITHUB_POLL_S: float = Field(default=3600.0, ge=0)
    GITHUB_CLOSED_STATUS: Literal["fixed", "expected", "invalid", "infra"] = "fixed"
    # Apprise URL schemes a subscription may use (Teams workflows, Discord, Mattermost).
    APPRISE_SCHEMES: str = "workflows,discord,mmost,mmosts"

    @field_validator("COMMAND_SUITES")
    @classmethod
    def _command_names(cls, suites: dict[str, CommandSuite]) -> dict[str, CommandSuite]:
        return check_names(suites)

    @field_validator("PROVIDERS")
    @classmethod
    def _provider_names(cls, providers: dict[str, Provider]) -> dict[str, Provider]:
        return check_provider_names(providers)

    @model_validator(mode="after")
    def _localized_suites_exist(self) -> "Settings":
        unknown = sorted(set(self.LOCALIZE_SUITES.values()) - set(self.COMMAND_SUITES))
        if unknown:
            raise ValueError(
                f"LOCALIZE_SUITES names command suites not in COMMAND_SUITES: {unknown}"
            )
        if self.LOCALIZE_PROVIDER not in (BUILTIN_PROVIDER, *self.PROVIDERS):
            known = ", ".join([BUILTIN_PROVIDER, *self.PROVIDERS])
            raise ValueError(f"LOCALIZE_PROVIDER {self.LOCALIZE_PROVIDER!r}: one of {known}")
        return self

    @field_validator("LOCALIZE_SOURCES")
    @classmethod
    def _sources_are_clones(cls, sources: dict[str, str]) -> dict[str, str]:
        for name, value in sources.items():
            if not re.match(COMPONENT_PATTERN, name):
                raise ValueError(f"LOCALIZE_SOURCES: component name {name!r} is not valid")
            if value.startswith("github:"):
                if not github_source(value):
                    raise ValueError(
                        f"LOCALIZE_SOURCES[{name!r}]: {value!r} is not github:OWNER/REPO "
                        "(a GitHub owner and repository name)"
                    )
            elif not value.startswith("/") or "\x00" in value:
                raise ValueError(
                    f"LOCALIZE_SOURCES[{name!r}]: {value!r} is not an absolute path "
                    "(a local clone) or github:OWNER/REPO"
                )
        return sources

    @field_validator("LOCALIZE_GITHUB_API_URL")
    @classmethod
    def _github_api_is_http(cls, url: str) -> str:
        if not is_http_url(url):
            raise ValueError(f"LOCALIZE_GITHUB_API_URL: {url!r} is not an http(s) URL")
        return url.rstrip("/")

    @field_validator("PIN_CORES")
    @classmethod
    def _pin_cores_parse(cls, value: str) -> str:
        parse_pin_cores(value)
        return value


settings = Settings()
