"""What a subscription holds: rules, receivers and timing, validated; and how it is read."""

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    model_validator,
)

from app.core.bounds import JSON_NUMBER, NulFree
from app.notifications.receivers.base import ReceiverBase, ReceiverKind
from app.notifications.receivers.registry import BY_NAME, REGISTERED


def _one_as_list(value: object) -> object:
    return [value] if isinstance(value, str) else value


def _one_or_more(value: Any) -> BeforeValidator:
    """A rule field's input: one ``value`` or a list, as the request's schema says.

    The one value is stored as the list of it, so that errors say ``[0]``.
    """
    return BeforeValidator(_one_as_list, json_schema_input_type=value)


Text = Annotated[str, NulFree, Field(min_length=1, max_length=256)]
Texts = Annotated[list[Text], Field(min_length=1, max_length=100)]
TextRule = Annotated[Texts, _one_or_more(Text | Texts)]
Direction = Literal["regression", "improvement", "change"]
Directions = Annotated[list[Direction], Field(min_length=1, max_length=3)]
Kind = Literal[
    "regression", "improvement", "noise", "bimodal", "failure", "coverage", "machine_silent",
    "aggregate",
]  # fmt: skip
Kinds = Annotated[list[Kind], Field(min_length=1, max_length=8)]
StepState = Literal["suspected", "confirmed"]
StepStates = Annotated[list[StepState], Field(min_length=1, max_length=2)]
Name = Annotated[str, NulFree, Field(min_length=1, max_length=128)]
Owner = Annotated[str, NulFree, Field(max_length=256)]


class Rules(BaseModel):
    """A rule set: every field given must hold; an absent field accepts anything.

    Text fields take one value or a list (any of them), each an fnmatch glob, case-sensitive;
    one value is stored (and read back) as a list of one.
    """

    model_config = ConfigDict(extra="forbid")

    machine: TextRule | None = None
    channel: TextRule | None = None
    project: TextRule | None = Field(
        default=None, description="the project of the finding's run (`default` when not given)"
    )
    suite: TextRule | None = None
    model: TextRule | None = None
    category: TextRule | None = None
    config: TextRule | None = None
    precision: TextRule | None = None
    mode: TextRule | None = None
    metric: TextRule | None = None
    direction: Annotated[Directions, _one_or_more(Direction | Directions)] | None = None
    kind: Annotated[Kinds, _one_or_more(Kind | Kinds)] | None = None
    state: Annotated[StepStates, _one_or_more(StepState | StepStates)] | None = Field(
        default=None,
        description="suspected: steps reported before the test confirms them; absent "
        "in `match`: confirmed only",
    )
    min_rel_change: (
        Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False), JSON_NUMBER] | None
    ) = Field(default=None, description="The least absolute relative change: 0.05 is 5%")


def _not_empty(rules: Rules) -> Rules:
    if all(value is None for _, value in rules):
        raise ValueError("an exclude rule set needs at least one field (an empty one vetoes all)")
    return rules


# What _not_empty refuses, in the schema: {} (minProperties) and every field null (not). The
# first also spares a schema-driven generator from drawing objects the second rules out.
SOME_FIELD: dict[str, Any] = {"minProperties": 1, "not": {"additionalProperties": {"type": "null"}}}
ExcludeRules = Annotated[Rules, AfterValidator(_not_empty), Field(json_schema_extra=SOME_FIELD)]


def receiver_union(kinds: Iterable[ReceiverKind]) -> Any:
    """One receiver of ``kinds``: the union of their shapes, told apart by ``kind``."""
    shapes = tuple(kind.schema for kind in kinds)
    return Annotated[Union[shapes], Field(discriminator="kind")]  # noqa: UP007 (a tuple)


# Every registered kind's shape (``receivers.registry``); mypy sees what they all have.
if TYPE_CHECKING:
    Receiver = ReceiverBase
    ReceiverKindName = str
else:
    Receiver = receiver_union(REGISTERED)
    ReceiverKindName = Literal[tuple(BY_NAME)]


def _one_feed(receivers: list[Receiver]) -> list[Receiver]:
    if sum(1 for r in receivers if r.kind == "feed") > 1:
        raise ValueError("a subscription has at most one feed")
    return receivers


# The schema's "at most one item of kind feed" is what _one_feed refuses.
ONE_FEED: dict[str, Any] = {
    "contains": {"properties": {"kind": {"const": "feed"}}, "required": ["kind"]},
    "minContains": 0,
    "maxContains": 1,
}
Receivers = Annotated[
    list[Receiver],
    Field(min_length=1, max_length=20, json_schema_extra=ONE_FEED),
    AfterValidator(_one_feed),
]


HOUR_TEXT = r"^(?:[01]?[0-9]|2[0-3])$"


def _hour(value: object) -> object:
    # The dashboard's form gives its hours as text: "9" is taken, and the schema says so.
    if isinstance(value, bool) or (isinstance(value, str) and not re.fullmatch(HOUR_TEXT, value)):
        raise ValueError("an hour is a whole number from 0 to 23")
    return value


Hours = Annotated[int, Field(ge=0, le=23)]
Hour = Annotated[
    Hours,
    BeforeValidator(_hour, json_schema_input_type=Hours | Annotated[str, Field(pattern=HOUR_TEXT)]),
]


class Digest(BaseModel):
    """Notices collected and sent at these hours (UTC) of each day."""

    model_config = ConfigDict(extra="forbid")

    digest_hours: Annotated[list[Hour], Field(min_length=1, max_length=24)]

    @model_validator(mode="after")
    def _sorted_once(self) -> "Digest":
        self.digest_hours = sorted(set(self.digest_hours))
        return self


def _when_kind(value: object) -> str:
    return "immediate" if isinstance(value, str) else "digest"


When = Annotated[
    Annotated[Literal["immediate"], Tag("immediate")] | Annotated[Digest, Tag("digest")],
    Discriminator(_when_kind),
]
ExcludeList = Annotated[list[ExcludeRules], Field(max_length=50)]


MENTION_AUTHOR = (
    "`localized` notices mention the culprit commit's author by GitHub login (`@login`, "
    "only where the culprit carries one) and show the author's email address; false: the "
    "author's name only"
)


class SubscriptionCreate(BaseModel):
    """A new subscription, or (PUT) the whole of an existing one."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    owner: Owner = ""
    match: Rules = Field(default_factory=Rules)
    exclude: ExcludeList = Field(default_factory=list)
    receivers: Receivers
    when: When = "immediate"
    paused: StrictBool = False
    mention_author: StrictBool = Field(default=False, description=MENTION_AUTHOR)


class SubscriptionUpdate(BaseModel):
    """The fields to change; absent ones (or null) stay as they are."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    owner: Owner | None = None
    match: Rules | None = None
    exclude: ExcludeList | None = None
    receivers: Receivers | None = None
    when: When | None = None
    paused: StrictBool | None = None
    mention_author: StrictBool | None = Field(default=None, description=MENTION_AUTHOR)


class ReceiverRead(BaseModel):
    """A receiver as read: its credentials masked (``targets.masked``).

    ``url``: a webhook's or Slack URL as scheme, host and port, an Apprise URL as its scheme;
    ``secrets``: each signing secret's last 4 characters. The answer that makes a webhook's
    secret or a feed's ``token`` gives it in full, that once: keep it.
    """

    kind: ReceiverKindName
    disabled: bool = False
    disabled_reason: str = ""
    url: str | None = None
    secrets: list[str] | None = None
    to: list[str] | None = None
    repository: str | None = None
    labels: list[str] | None = None
    token: str | None = Field(
        default=None, description="a new feed's token: in the answer that made it only"
    )


class SubscriptionRead(BaseModel):
    """A stored subscription; ``revision`` grows by one with every change."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    owner: str
    match: Rules
    exclude: list[Rules]
    receivers: list[ReceiverRead]
    when: When
    paused: bool
    mention_author: bool = Field(description=MENTION_AUTHOR)
    revision: int
    source: Literal["api", "file"] = Field(
        description="`file`: the subscriptions file owns it, and the API does not change it"
    )
    created_at: datetime
    updated_at: datetime


MAX_SILENCE = timedelta(days=90)


class SilenceCreate(BaseModel):
    """Hold back notices of the findings ``matchers`` selects, for a time.

    From ``starts_at`` (default: now) until ``ends_at``, at most 90 days; the comment says why.
    """

    model_config = ConfigDict(extra="forbid")

    matchers: ExcludeRules
    starts_at: AwareDatetime | None = None
    ends_at: AwareDatetime
    comment: Annotated[str, NulFree, Field(min_length=1, max_length=1_000)]

    @model_validator(mode="after")
    def _time_boxed(self) -> "SilenceCreate":
        starts = self.starts_at or datetime.now(UTC)
        if self.ends_at <= starts:
            raise ValueError("ends_at must be after starts_at (and after now)")
        if self.ends_at - starts > MAX_SILENCE:
            raise ValueError(f"a silence lasts at most {MAX_SILENCE.days} days")
        return self


class SilenceRead(BaseModel):
    """A silence, and whether it is ``pending``, ``active`` or ``expired`` now."""

    id: int
    matchers: Rules
    starts_at: datetime
    ends_at: datetime
    comment: str
    created_by: str
    created_at: datetime
    state: Literal["pending", "active", "expired"]


class AttemptRead(BaseModel):
    """One attempt of a delivery."""

    at: datetime
    ok: bool
    status: int | None
    latency_ms: float
    error: str


class DeliveryRead(BaseModel):
    """A notice on its way to one receiver, and how it went.

    ``state``: ``pending``, ``sending``, ``delivered``, ``failed`` (given up, or the receiver
    answered 410) or ``cancelled``.
    """

    id: int
    notice_id: int
    kind: str
    target: str = Field(description="Where it goes, without credentials")
    state: str
    attempts: int
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    last_status: int | None
    last_error: str
    receipt: dict[str, Any]
    log: list[AttemptRead] | None = Field(default=None, description="The newest attempts")


class NoticeRead(BaseModel):
    """A notice of a subscription: the event, which revision sent it, its deliveries.

    ``state``: ``planned``, ``sent``, ``silenced``, ``digested`` (sent in digest
    ``digest_id``) or ``cancelled`` (resolved before it was due).
    """

    id: int
    notice_id: str = Field(description="Its id on the wire: the payload's id, the webhook-id")
    event: str
    group_id: int | None
    state: str
    revision: int
    findings: int
    headline: str
    created_at: datetime
    sent_at: datetime | None
    digest_id: int | None
    deliveries: list[DeliveryRead]


def stored_values(model: SubscriptionCreate | SubscriptionUpdate) -> dict[str, Any]:
    """The fields to store, as the JSON columns hold them (rule fields left out are absent).

    A new or replaced subscription gives every field (defaults for those left out); a PATCH
    only those it sets to a value.
    """
    values = model.model_dump(mode="json", exclude_unset=isinstance(model, SubscriptionUpdate))
    for field in ("match", "exclude"):
        if field in values and values[field] is not None:
            rules = values[field]
            values[field] = (
                {k: v for k, v in rules.items() if v is not None}
                if isinstance(rules, dict)
                else [{k: v for k, v in r.items() if v is not None} for r in rules]
            )
    return {field: value for field, value in values.items() if value is not None}
