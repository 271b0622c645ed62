"""The direction of imports (docs/architecture.md), checked on the source."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
# The HTTP layer: routers, the API's plumbing, the pages, sign-in, probes and the app itself.
HTTP = ("app.api.", "app.dashboard.", "app.health.", "app.main", "app.routes", "app.tokens.auth")
WEB_LIBRARIES = ("fastapi", "starlette", "jinja2", "uvicorn")


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def is_http(module: str) -> bool:
    return module.endswith(".router") or module.startswith(HTTP) or module == "app.main"


def starts(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p.rstrip(".") or module.startswith(p.rstrip(".") + ".") for p in prefixes)


MODULES = sorted(APP.rglob("*.py"))


@pytest.mark.parametrize("path", [p for p in MODULES if p.parent.name == "core"], ids=module_name)
def test_core_imports_no_domain(path: Path) -> None:
    domain = {m for m in imports(path) if m.startswith("app.") and not m.startswith("app.core")}
    assert not domain, f"{module_name(path)} imports {sorted(domain)}"


SERVICES = [p for p in MODULES if p.parent.name != "core" and not is_http(module_name(p))]


@pytest.mark.parametrize("path", SERVICES, ids=module_name)
def test_services_know_no_http(path: Path) -> None:
    http = {m for m in imports(path) if is_http(m) or starts(m, WEB_LIBRARIES)}
    assert not http, f"{module_name(path)} imports {sorted(http)}"


def test_the_service_knows_no_worker_code() -> None:
    for path in MODULES:
        workers = {m for m in imports(path) if m == "workers" or m.startswith("workers.")}
        assert not workers, f"{module_name(path)} imports {sorted(workers)}"


def test_the_checks_see_what_they_check() -> None:
    """The rules would catch a breach: the HTTP layer does import what services may not."""
    assert "fastapi" in imports(APP / "api" / "validation.py")
    assert is_http("app.runs.router")
    assert is_http("app.tokens.auth")
    assert not is_http("app.runs.service")
    assert len(SERVICES) > 40
