"""The per-client rate limit of anonymous reads (BENCHWATCH_ANON_RATE_LIMIT)."""

import time
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.ratelimit import TokenBuckets
from app.main import create_app
from tests.conftest import make_token

READ = "/api/v1/benchmarks"


@contextmanager
def limited(settings: Settings, **limit: float) -> Iterator[TestClient]:
    """A client of an app with this limit (the suite's own settings leave it off)."""
    application = create_app(settings.model_copy(update=limit))
    with TestClient(application) as client:
        yield client
    application.state.database.dispose()


def test_past_the_burst_an_anonymous_read_is_a_429_with_retry_after(settings: Settings) -> None:
    with limited(settings, ANON_RATE_LIMIT=60, ANON_RATE_WINDOW_S=60, ANON_RATE_BURST=5) as c:
        assert [c.get(READ).status_code for _ in range(5)] == [200] * 5
        refused = c.get(READ)  # before: 200, however many
        assert refused.status_code == 429, refused.text
        assert refused.headers["Retry-After"] == "1"  # one read a second
        assert refused.json()["error"] == "TooManyRequests"
        assert "BENCHWATCH_ANON_RATE_LIMIT" in refused.json()["detail"]
        assert c.get("/", follow_redirects=False).status_code == 429  # pages too
        assert c.get("/healthz").status_code == 200  # the liveness probe is never limited


def test_a_token_holder_is_not_limited_and_a_bad_token_is_anonymous(settings: Settings) -> None:
    with limited(settings, ANON_RATE_LIMIT=60, ANON_RATE_WINDOW_S=60, ANON_RATE_BURST=2) as c:
        token = make_token(c.app.state.database, "ingest")  # type: ignore[attr-defined]
        holder = {"Authorization": f"Bearer {token}"}
        assert [c.get(READ, headers=holder).status_code for _ in range(20)] == [200] * 20
        bogus = {"Authorization": "Bearer bw_not-a-token"}
        answers = [c.get(READ, headers=bogus).status_code for _ in range(3)]
        assert answers == [200, 200, 429]
        assert c.get(READ, headers=holder).status_code == 200  # the holder still reads


def test_the_limit_refills_and_off_disables(settings: Settings) -> None:
    with limited(settings, ANON_RATE_LIMIT=1, ANON_RATE_WINDOW_S=2, ANON_RATE_BURST=2) as c:
        assert [c.get(READ).status_code for _ in range(3)] == [200, 200, 429]
        assert c.get(READ).headers["Retry-After"] == "2"
        time.sleep(2.1)  # one read per 2 s: a token again
        assert [c.get(READ).status_code for _ in range(2)] == [200, 429]
    with limited(settings, ANON_RATE_LIMIT=0, ANON_RATE_BURST=1) as c:
        assert {c.get(READ).status_code for _ in range(50)} == {200}


def test_buckets_are_bounded_and_refill_at_their_rate() -> None:
    buckets = TokenBuckets(rate=2.0, burst=2, max_clients=3)
    assert [buckets.take("a", now=0.0) for _ in range(2)] == [0.0, 0.0]
    assert buckets.take("a", now=0.0) == 0.5  # half a second to the next token
    assert buckets.take("a", now=0.5) == 0.0
    for client in ("b", "c", "d"):
        buckets.take(client, now=1.0)
    assert len(buckets) == 3  # "a", the least recently seen, was dropped
    assert buckets.take("a", now=1.0) == 0.0  # and starts again with a full bucket
