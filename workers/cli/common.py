"""What several commands share: the broker check and the configured database."""

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.db import Database

# A command as the parser lists it: its one-line help, what runs it (None: its subcommands
# do) and what adds its options.
Command = tuple[
    str, Callable[[argparse.Namespace], int] | None, Callable[[argparse.ArgumentParser], None]
]


def has_broker(command: str) -> bool:
    """Whether a broker is configured; if not, says so for ``command`` on stderr."""
    from app.core.config import settings

    if not settings.BROKER_URL:
        print(
            f"benchwatch {command}: set BENCHWATCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
            "without a broker, `benchwatch serve` runs background work itself",
            file=sys.stderr,
        )
    return bool(settings.BROKER_URL)


def open_database() -> "Database":
    """The configured database, every model registered and the session listeners installed.

    The models' relationships need them all; a command that writes findings plans their
    notices as the server does (``app.runtime.install_listeners``).
    """
    import app.models  # noqa: F401
    from app.core.config import settings
    from app.core.db import Database
    from app.runtime import install_listeners

    install_listeners()
    return Database(settings.DATABASE_URL)


def safe_url() -> str:
    """The configured database's URL, its password hidden."""
    from sqlalchemy.engine import make_url

    from app.core.config import settings

    return make_url(settings.DATABASE_URL).render_as_string(hide_password=True)
