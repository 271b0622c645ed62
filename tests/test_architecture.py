"""The direction of imports (docs/architecture.md), checked on the source."""

import ast
import re
import sys
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


MAX_LINES = 600  # a module longer holds more than one concern (issue 27)


def test_no_module_is_over_six_hundred_lines() -> None:
    modules = [*MODULES, *sorted((ROOT / "workers").rglob("*.py")), *CLIENT]
    long = {
        module_name(p): n for p in modules if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules by concern: {long}"


def test_the_service_knows_no_worker_code() -> None:
    for path in MODULES:
        workers = {m for m in imports(path) if m == "workers" or m.startswith("workers.")}
        assert not workers, f"{module_name(path)} imports {sorted(workers)}"


CLIENT = sorted((ROOT / "client" / "benchwatch_client").rglob("*.py"))
# What the light client may import besides the standard library: one HTTP library; and in the
# MCP server alone, the MCP SDK (an optional extra) and pydantic, which the SDK brings.
CLIENT_LIBRARIES = {"httpx"}
MCP_LIBRARIES = {"mcp", "pydantic"}


@pytest.mark.parametrize("path", CLIENT, ids=lambda p: p.name)
def test_the_light_client_needs_nothing_of_the_server(path: Path) -> None:
    outside = {
        top
        for m in imports(path)
        if (top := m.split(".")[0]) not in sys.stdlib_module_names
        and top not in CLIENT_LIBRARIES | {"benchwatch_client"}
    }
    if path.name.startswith("mcp_"):
        outside -= MCP_LIBRARIES
    assert not outside, f"{path.name} imports {sorted(outside)}"


def test_the_checks_see_what_they_check() -> None:
    """The rules would catch a breach: the HTTP layer does import what services may not."""
    assert "fastapi" in imports(APP / "api" / "validation.py")
    assert is_http("app.runs.router")
    assert is_http("app.tokens.auth")
    assert not is_http("app.runs.ingest")
    assert len(SERVICES) > 40
    assert "httpx" in imports(ROOT / "client" / "benchwatch_client" / "upload.py")
    assert len(CLIENT) > 8


# --- The layers, the module graph and the domain links (issue 27 points 2 and 8) ---

# Lowest first: a module imports its own layer or those below it, never one above. The domains
# are every module no other layer names; the HTTP layer is split so that app/api stays the
# routers' plumbing and only the composition root imports every router.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("app.core",)),
    ("task declarations", ("app.jobs",)),
    ("domains", ()),
    ("runtime and the model registry", ("app.runtime", "app.models")),
    ("HTTP plumbing", ("app.api", "app.tokens.auth")),
    ("routers and pages", ("app.dashboard", "app.health")),
    ("composition root", ("app.main", "app.routes")),
)
DOMAINS_LAYER = 2
ROUTERS_LAYER = 5  # and every domain's router.py
# Module cycles known today, each to go (anomalies/service <-> aggregate_findings: point 3).
PATH_STRING = re.compile(r"^(app(?:\.\w+)+)(?::\w+)?$")  # "app.x.y" or "app.x.y:function"
DOC = ROOT / "docs" / "architecture.md"


def dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMED = {dotted(p): p for p in MODULES}


def job_references(tree: ast.AST) -> set[int]:
    """The ids of ``job="module:function"`` arguments: resolved when a task runs, not imported."""
    return {
        id(keyword.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "job"
    }


def module_imports(path: Path, *, jobs: bool = False) -> set[str]:
    """The app modules ``path`` imports: statements anywhere in it, ``import_module`` calls and
    strings that spell a module's path (``jobs``: its task declarations' job paths too)."""
    return source_imports(ast.parse(path.read_text()), jobs=jobs) - {dotted(path)}


def source_imports(tree: ast.AST, *, jobs: bool = False) -> set[str]:
    lazy = set() if jobs else job_references(tree)
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                named.add(full if full in NAMED else node.module)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in lazy
            and (found := PATH_STRING.match(node.value))
        ):
            named.add(found.group(1))
    modules = set()
    for name in named:
        while name and name not in NAMED:  # "app.x.y.Name" -> "app.x.y"
            name = name.rpartition(".")[0]
        if name.startswith("app"):
            modules.add(name)
    return modules - {"app"}


GRAPH = {name: module_imports(path) for name, path in NAMED.items()}


def layer(module: str) -> int:
    for number, (_, prefixes) in enumerate(LAYERS):
        if starts(module, prefixes):
            return number
    return ROUTERS_LAYER if module.endswith(".router") else DOMAINS_LAYER


def domain(module: str) -> str | None:
    """A domain module's domain (its package under app, or a top-level module's name)."""
    if layer(module) != DOMAINS_LAYER or is_http(module):
        return None
    return module.split(".")[1]


def domain_links() -> dict[tuple[str, str], list[str]]:
    """Each link between two domains, with the imports that make it (routers left out)."""
    links: dict[tuple[str, str], list[str]] = {}
    for module, imported in GRAPH.items():
        for other in imported:
            a, b = domain(module), domain(other)
            if a and b and a != b:
                links.setdefault((a, b), []).append(f"{module} -> {other}")
    return links


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            for other in edges:
                if other not in graph:
                    continue
                if other not in index:
                    index[other] = low[other] = len(index)
                    stack.append(other)
                    work.append((other, iter(sorted(graph[other]))))
                    break
                if other in stack:
                    low[node] = min(low[node], index[other])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = {stack.pop()}
                    while node not in component:
                        component.add(stack.pop())
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def diagram() -> str:
    """The domain links as the mermaid block docs/architecture.md shows."""
    lines = ["```mermaid", "graph LR"]
    lines += [f"    {a} --> {b}" for a, b in sorted(domain_links())]
    return "\n".join([*lines, "```"])


def drawn_links() -> set[tuple[str, str]]:
    block = DOC.read_text().split("```mermaid\ngraph LR\n", 1)[1].split("```", 1)[0]
    return {(a, b) for a, b in re.findall(r"^\s*(\w+) --> (\w+)\s*$", block, re.M)}


def test_no_import_points_from_a_lower_layer_to_a_higher_one() -> None:
    upward = [
        f"{module} ({LAYERS[layer(module)][0]}) imports {other} ({LAYERS[layer(other)][0]})"
        for module, imported in sorted(GRAPH.items())
        for other in sorted(imported)
        if layer(other) > layer(module)
    ]
    assert upward == []


def test_the_task_declarations_import_no_domain_not_even_by_name() -> None:
    """app/jobs.py names its jobs by path (run when a task is); nothing else, strings included."""
    path = APP / "jobs.py"
    assert {m for m in module_imports(path) if not m.startswith("app.core")} == set()
    jobs = module_imports(path, jobs=True) - module_imports(path)
    assert jobs
    assert all(re.fullmatch(r"app\.\w+\.jobs", m) for m in jobs), jobs


def test_no_import_cycle_between_modules() -> None:
    assert set(cycles(GRAPH)) == set()


def test_the_domain_links_are_those_the_diagram_draws() -> None:
    """docs/architecture.md's diagram is the code's (``python -m tests.test_architecture``)."""
    links = domain_links()
    undrawn = {
        f"{a} --> {b}": where for (a, b), where in links.items() if (a, b) not in drawn_links()
    }
    assert undrawn == {}, "a domain link the diagram does not draw"
    assert drawn_links() <= set(links), "the diagram draws a link the code no longer has"
    assert cycles({a: {b for x, b in links if x == a} for a, _ in links}) == []


def test_the_graph_checks_see_what_they_check() -> None:
    assert {"app.routes", "app.runtime"} <= GRAPH["app.main"]
    assert layer("app.runs.router") > layer("app.api.deps") > layer("app.runtime")
    assert layer("app.api.router") < layer("app.runs.router")  # where the mounting was
    assert (
        layer("app.runtime") > layer("app.runs.ingest") > layer("app.jobs") > layer("app.core.db")
    )
    assert ("anomalies", "runs") in domain_links()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    # The string import app/jobs.py had (the notice planner's listeners) is an import.
    source = (
        'TASKS.add("t", "q", job="app.runs.jobs:f")\nimport_module("app.notifications.planning")'
    )
    assert source_imports(ast.parse(source)) == {"app.notifications.planning"}
    assert source_imports(ast.parse(source), jobs=True) == {
        "app.notifications.planning",
        "app.runs.jobs",
    }


if __name__ == "__main__":
    print(diagram())  # noqa: T201  (the block docs/architecture.md shows)
