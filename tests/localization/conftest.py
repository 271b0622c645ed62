"""The localization tests' tokens: a worker's uploads, and triage's requests."""

import pytest

from app.core.db import Database
from tests.conftest import make_token


@pytest.fixture
def worker_headers(database: Database) -> dict[str, str]:
    """A token named as benchwatch's workers upload: its runs are a worker's."""
    return {"Authorization": f"Bearer {make_token(database, 'ingest', name='worker')}"}


@pytest.fixture
def triage_headers(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'triage', name='on-call')}"}
