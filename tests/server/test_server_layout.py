"""The server's layout shows its design: one module (``app``) assembles everything and nothing
imports it back, the broker is state that imports no API or coordinator, and the modules import
one another without a circle.

Imports are read with ``ast`` from the sources, wherever they are in a module (a function's
import counts: it closes a circle as surely, only later), except under ``if TYPE_CHECKING:``,
which never runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kafkalog

PACKAGE_ROOT = Path(kafkalog.__file__).parent
SERVER = "kafkalog.server"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(root.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST):
    """Every Import and ImportFrom that can run: all but those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules ``name`` imports (resolved, the packages on the way included)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            targets = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        for target in targets:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
                candidate = ".".join(parts[:i])
                if candidate in known and candidate != name:
                    out.add(candidate)
    return out


def _graph(root: Path, prefix: str) -> dict[str, set[str]]:
    modules = _modules(root)
    known = set(modules)
    graph = {name: _imported(name, path, known) for name, path in modules.items()}
    return {n: {m for m in deps if m.startswith(prefix)} for n, deps in graph.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or one importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def server_graph() -> dict[str, set[str]]:
    return _graph(PACKAGE_ROOT / "server", SERVER)


def test_no_import_circle_among_server_modules():
    graph = server_graph()
    assert len(graph) > 20  # the walk found the modules
    assert _cycles(graph) == []


def test_the_check_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_nothing_imports_the_app_but_the_cli():
    graph = _graph(PACKAGE_ROOT, "kafkalog")
    importers = sorted(n for n, deps in graph.items() if f"{SERVER}.app" in deps)
    assert importers and all(n.startswith("kafkalog.cli") for n in importers), importers


def test_broker_imports_no_api_coordinator_or_connection():
    deps = server_graph()[f"{SERVER}.broker"]
    assert deps <= {
        SERVER,
        f"{SERVER}.config",
        f"{SERVER}.error_codes",
        f"{SERVER}.internal_topics",
        f"{SERVER}.limits",
    }, deps


def test_apis_groups_and_txn_import_neither_broker_nor_app():
    graph = server_graph()
    for name, deps in graph.items():
        if name.startswith((f"{SERVER}.apis", f"{SERVER}.groups", f"{SERVER}.txn")):
            assert not deps & {f"{SERVER}.broker", f"{SERVER}.app", f"{SERVER}.connection"}, name


def test_no_importlib_in_the_server():
    for path in (PACKAGE_ROOT / "server").rglob("*.py"):
        assert "importlib" not in path.read_text(), path
