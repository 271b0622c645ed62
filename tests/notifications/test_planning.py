"""Planning a notice: once per subscription and event, whatever the dialect says of rowcounts."""

import pytest

from app.core.db import Database
from app.notifications import planning
from tests.notifications.test_service import subscribe


@pytest.mark.both_dialects
def test_a_notice_is_planned_once_and_the_count_says_so(database: Database) -> None:
    with database.session_scope() as session:
        subscription = subscribe(session, "everything", {})
        assert planning.add(session, subscription, None, "digest", 3, suffix="2026-12-01") == 1
        assert planning.add(session, subscription, None, "digest", 3, suffix="2026-12-01") == 0
        assert planning.add(session, subscription, None, "digest", 3, suffix="2026-12-02") == 1
