"""What an annotation holds, validated; and how it is read."""

from datetime import datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from app.core.bounds import EARLIEST, LATEST, NulFree
from app.core.names import ProjectName
from app.core.urls import HttpUrlText

MAX_TEXT = 1_000
MAX_SPAN = timedelta(days=366)


def _in_range(value: datetime) -> datetime:
    if not EARLIEST <= value < LATEST:
        raise ValueError("a time from 1970 to 2999")
    return value


When = Annotated[AwareDatetime, AfterValidator(_in_range)]
Machine = Annotated[str, NulFree, Field(min_length=1, max_length=128)]
Channel = Annotated[str, NulFree, Field(min_length=1, max_length=64)]
Text = Annotated[str, NulFree, Field(min_length=1, max_length=MAX_TEXT)]


class AnnotationCreate(BaseModel):
    """An event: when (and until when, for a span), where (no machine: everywhere), what.

    ``channel`` narrows a machine's annotation to one channel; it needs a ``machine``.
    ``url`` links to more (an http(s) URL, or empty). ``project`` makes it that project's
    (none: every project's); a token limited to a project must name its own.
    """

    model_config = ConfigDict(extra="forbid")

    at: When
    ends_at: When | None = None
    machine: Machine | None = None
    channel: Channel | None = None
    project: ProjectName | None = None
    text: Text
    url: HttpUrlText = ""

    @model_validator(mode="after")
    def _consistent(self) -> "AnnotationCreate":
        if self.ends_at is not None:
            if self.ends_at <= self.at:
                raise ValueError("ends_at must be after at")
            if self.ends_at - self.at > MAX_SPAN:
                raise ValueError(f"a span lasts at most {MAX_SPAN.days} days")
        if self.channel is not None and self.machine is None:
            raise ValueError("a channel needs a machine (no machine: the annotation is global)")
        return self


class AnnotationRead(BaseModel):
    """A stored annotation."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    at: datetime
    ends_at: datetime | None
    machine: str | None
    channel: str | None
    project: str | None
    text: str
    url: str
    created_by: str
    created_at: datetime
