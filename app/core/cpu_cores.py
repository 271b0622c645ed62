"""CPU core lists as Linux writes them (``0-3,8,10-11``): read with caps, and written back.

``BENCHWATCH_PIN_CORES`` takes ``off``, ``auto`` or such a list; the settings check it at load
(``parse_pin_cores``) so that a bad value stops the worker at start with the reason, not a
shard later.
"""

from collections.abc import Iterable
from typing import Literal

MAX_CORE = 8191  # Linux's largest CONFIG_NR_CPUS: a range past it is a typo, not a machine
MAX_TEXT = 512  # characters of a core list read at all
PinCores = Literal["off", "auto"] | frozenset[int]
SETTING = "BENCHWATCH_PIN_CORES"


def parse_cores(text: str) -> frozenset[int]:
    """The cores a list such as ``2-7`` or ``1,3,5-6`` names.

    Raises:
        ValueError: not such a list, a range that runs backwards, or a core over ``MAX_CORE``.
    """
    if len(text) > MAX_TEXT:
        raise ValueError(f"a core list of at most {MAX_TEXT} characters, not {len(text)}")
    cores: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not _number(first) or (dash and not _number(last)):
            raise ValueError(f"{part.strip()!r} is not a core or a range of cores such as 2-7")
        low, high = int(first), int(last) if dash else int(first)
        if high > MAX_CORE:
            raise ValueError(f"core {high} is over {MAX_CORE}, the most Linux supports")
        if low > high:
            raise ValueError(f"the range {part.strip()!r} runs backwards")
        cores.update(range(low, high + 1))
    return frozenset(cores)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def parse_pin_cores(text: str, source: str = SETTING) -> PinCores:
    """``BENCHWATCH_PIN_CORES``: ``off``, ``auto`` or the cores to pin shard processes to.

    Raises:
        ValueError: anything else; the message names ``source`` (the setting, or the option
            that gave the value) and the accepted forms.
    """
    value = text.strip().lower()
    if value in ("off", "auto"):
        return "off" if value == "off" else "auto"
    try:
        return parse_cores(value)
    except ValueError as error:
        raise ValueError(
            f"{source}={text[:40]!r}: {error}; give 'off', 'auto' or a core list such as "
            "'2-7' or '1,3,5-6'"
        ) from None


def format_cores(cores: Iterable[int]) -> str:
    """A core list in Linux's form, ranges joined: ``{0, 1, 2, 5}`` is ``0-2,5``."""
    ordered = sorted(set(cores))
    runs: list[str] = []
    start = 0
    for i, core in enumerate(ordered):
        if i + 1 == len(ordered) or ordered[i + 1] != core + 1:
            first = ordered[start]
            runs.append(str(core) if first == core else f"{first}-{core}")
            start = i + 1
    return ",".join(runs)
