"""The structure docs/architecture.md describes, checked: packages import one way, without cycles (a
function-level import counts: it is a cycle the moment the function runs), and no module of the
product grows past 400 lines (generated data excepted)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernel", "ingest", "warehouse", "derived", "models", "dashboard", "jobs", "interfaces", "simulator")
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The product modules ``name`` imports, at any depth of its code."""

    def resolve(target: str) -> str | None:
        target = target.removeprefix("gpufinops.")  # installed names: gpufinops.<folder>.<module>
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            found = resolve(target)
            if found and found != name:
                out.add(found)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_product_modules():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


# Who may not import whom (docs/architecture.md, the flow): data moves simulator -> ingest -> warehouse -> models ->
# dashboard / jobs, and the interfaces (CLI, API, MCP) sit on top, calling everything below them. The derived
# tables (derived/) sit on the warehouse and under everything that reads them: the store imports none of them. The
# kernel (kernel/: declared settings, provider specs, labels) is under every room and imports none. Nothing
# imports a room downstream of it: no job imports an interface, and the dashboard never imports ingest
# (nor, lazily or not, a cloud SDK: tests/test_dashboard.py checks that).
FORBIDDEN = {
    "kernel": {"simulator", "ingest", "warehouse", "derived", "models", "dashboard", "jobs", "interfaces"},
    "simulator": {"models", "dashboard", "jobs", "interfaces"},
    "ingest": {"models", "dashboard", "jobs", "interfaces", "simulator"},
    "derived": {"ingest", "models", "dashboard", "jobs", "interfaces", "simulator"},
    "warehouse": {"derived", "ingest", "models", "dashboard", "jobs", "interfaces", "simulator"},
    "models": {"ingest", "dashboard", "jobs", "interfaces", "simulator"},
    "dashboard": {"ingest", "jobs", "interfaces", "simulator"},
    "jobs": {"interfaces"},
}


def test_the_flow_is_one_way():
    modules = _modules()
    backwards = sorted(
        f"{name} -> {target}"
        for name, path in modules.items()
        for target in _imports(name, path, modules)
        if target.split(".")[0] in FORBIDDEN.get(name.split(".")[0], set())
    )
    assert backwards == []


def test_product_code_is_imported_by_its_installed_name_only():
    """`import ingest…` would work from the repository root and nowhere else (the wheel installs
    gpufinops.ingest), and beside `gpufinops.ingest` it would load a second copy of each module."""
    bare = []
    for path in sorted([*ROOT.glob("*/**/*.py")]):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in (*PACKAGES, "tests", "bench") or rel.parts[:2] == ("tests", "data"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            bare += [f"{rel}:{node.lineno} {name}" for name in names if name.split(".")[0] in PACKAGES]
    assert bare == []


def test_no_module_over_400_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
