"""The tests' shared route building (tests/shared_routes.py) shares what it may, and only that."""

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.main import create_app
from tests.shared_routes import built_count

ROOT = Path(__file__).resolve().parent.parent


def answers(application: FastAPI, *paths: str) -> list[tuple[int, str]]:
    with TestClient(application) as client:
        return [(r.status_code, r.text) for r in map(client.get, paths)]


def test_a_second_app_builds_no_route_the_first_built(settings: Settings) -> None:
    paths = ("/api/v1/subscriptions", "/login", "/docs")
    first = answers(create_app(settings), *paths)
    built = built_count()
    assert built > 0  # the first app's routes, or an earlier test's
    assert [status for status, _ in first] == [401, 200, 200]
    assert answers(create_app(settings), *paths) == first
    assert built_count() == built


def test_a_route_made_per_app_is_built_per_app() -> None:
    """A closure's route (as the docs and metrics routes are) is neither kept nor shared."""

    def application(value: str) -> FastAPI:
        router = APIRouter()

        @router.get("/value")
        def read() -> str:
            return value

        made = FastAPI()
        made.include_router(router)
        return made

    built = built_count()
    assert answers(application("one"), "/value") == [(200, '"one"')]
    assert answers(application("two"), "/value") == [(200, '"two"')]
    assert built_count() == built


def test_nothing_overrides_a_dependency() -> None:
    """A shared route reads the overrides of the app that built it: none may be set."""
    sources = [path for part in ("app", "workers", "tests") for path in (ROOT / part).rglob("*.py")]
    users = {
        str(path.relative_to(ROOT))
        for path in sources
        if "dependency_overrides" in path.read_text()
    }
    assert users == {"tests/shared_routes.py", "tests/test_shared_routes.py"}
