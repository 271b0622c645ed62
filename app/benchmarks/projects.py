"""Projects: the repository or team a run belongs to, so their histories never mix.

A run names its project (``default`` when it does not); its series are the project's own
(a series is benchmark x metric x machine x channel x project), while machines are shared.
Every list and page takes ``?project=``: absent means all projects, so a server with one
project sees no difference; an unknown project is an empty answer, as any other filter that
matches nothing. A project's name follows the rule of channel names.
"""

from typing import Annotated

from pydantic import Field

from app.benchmarks import vocabulary as vocab

DEFAULT_PROJECT = "default"
PROJECT_LENGTH = 64  # of the project columns
PROJECT_PATTERN = vocab.NAME_PATTERN.pattern
PROJECT_RULE = "letters, digits and _ . : + - (starting with a letter or digit), at most 64"

# The field of a payload, a token or a subscription: the rule of a channel's name.
ProjectName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=PROJECT_LENGTH,
        pattern=PROJECT_PATTERN,
        description=f"the repository or team the run belongs to ({PROJECT_RULE})",
    ),
]


def is_project_name(name: str) -> bool:
    """Whether ``name`` is a valid project name."""
    return 0 < len(name) <= PROJECT_LENGTH and vocab.NAME_PATTERN.match(name) is not None
