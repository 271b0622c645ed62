"""A step's outputs as ``name=value`` lines: GitHub's ``$GITHUB_OUTPUT``, a GitLab dotenv report.

Both read one line per value, so a value is kept to one line of printable text: what the
server answers is never trusted to be either.
"""

from pathlib import Path

MAX_VALUE_CHARS = 2_000


class Outputs:
    """Appends values to one file; with no file (``""``), keeps nothing."""

    def __init__(self, path: str) -> None:
        self.path = path

    def set(self, **values: object) -> None:
        """Append ``name=value`` for each value; a value becomes one printable line."""
        if not self.path:
            return
        lines = []
        for name, value in values.items():
            text = "".join(c for c in str(value) if c.isprintable())[:MAX_VALUE_CHARS]
            lines.append(f"{name}={text}\n")
        with Path(self.path).open("a", encoding="utf-8") as file:
            file.writelines(lines)
