"""The rule of names: channels, projects, compilers' backends and the other names people type.

A name starts with a letter or digit and goes on with letters, digits and ``_ . : + -``. A
project (the repository or team a run belongs to, so that histories never mix) follows it:
a run that names none is in ``default``, and every list and page takes ``?project=``, absent
meaning all projects. Core holds it so that settings, schemas and every domain read one rule.
"""

import re
from typing import Annotated

from pydantic import Field

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+\-]*$")

DEFAULT_PROJECT = "default"
PROJECT_LENGTH = 64  # of the project columns
PROJECT_PATTERN = NAME_PATTERN.pattern
PROJECT_RULE = "letters, digits and _ . : + - (starting with a letter or digit), at most 64"

# The field of a payload, a token or a subscription.
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
    return 0 < len(name) <= PROJECT_LENGTH and NAME_PATTERN.match(name) is not None
