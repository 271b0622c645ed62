"""What a process starts with is a call, not an import (issue 27 point 2): importing the
domains installs no session listener; ``install_listeners`` installs each once."""

import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    """
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    import app.models  # every domain's models, as a process imports them
    from app.benchmarks import known_ids
    from app.notifications import planning
    from app.runtime import install_listeners

    def installed():
        found = [event.contains(Session, name, fn) for name, fn in planning.LISTENERS]
        return found + [event.contains(Session, "before_commit", known_ids.publish_changes)]

    print(installed())
    install_listeners()
    install_listeners()  # idempotent
    print(installed())
    """
)


def test_listeners_are_installed_by_the_call_only() -> None:
    # A fresh interpreter: this test process installed them already (tests/conftest.py).
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=120
    )
    before, after = done.stdout.split("\n")[:2]
    assert before == str([False] * 4)
    assert after == str([True] * 4)
