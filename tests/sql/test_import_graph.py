"""sql/'s modules import one way: no import cycle among them and no import
inside a function (where a cycle used to hide). Planning still recurses (a
subquery is a query of its own), through `PlanContext.planner`, which the
top module hands down (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

SQL = Path(__file__).resolve().parents[2] / "coordinator_lib" / "sql"
PACKAGE = "coordinator_lib.sql"


def _imported(node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The sql/ modules an import statement names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.module == PACKAGE:
        names = [f"{PACKAGE}.{a.name}" for a in node.names]
    else:
        names = [node.module or ""]
    prefix = PACKAGE + "."
    return {n[len(prefix) :].split(".")[0] for n in names if n.startswith(prefix)} & modules


def import_graph(package: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Each module's run-time imports of its siblings (module level, not under
    TYPE_CHECKING), and every import of coordinator_lib inside a function."""
    modules = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    local: list[str] = []

    def visit(module: str, node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                text = ast.unparse(child)
                if in_function and "coordinator_lib" in text:
                    local.append(f"{module}.py:{child.lineno}: {text}")
                elif not in_function:
                    graph[module] |= _imported(child, modules) - {module}
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(module, child, inner)

    for path in package.glob("*.py"):
        visit(path.stem, ast.parse(path.read_text()), False)
    return graph, local


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_sql_modules_import_one_way() -> None:
    graph, local = import_graph(SQL)
    assert local == []
    assert cycles(graph) == []


def test_the_check_sees_a_cycle_and_a_hidden_import(tmp_path: Path) -> None:
    copy = tmp_path / "sql"
    shutil.copytree(SQL, copy, ignore=shutil.ignore_patterns("__pycache__"))
    typed = copy / "typed.py"
    typed.write_text(
        typed.read_text()
        + "\n\nfrom coordinator_lib.sql.scalar import ScalarBinder  # noqa\n"
        + "\n\ndef _late() -> None:\n    from coordinator_lib.sql import plan  # noqa\n"
    )
    graph, local = import_graph(copy)
    assert any(line.startswith("typed.py:") for line in local)
    assert any({"typed", "scalar"} <= component for component in cycles(graph))
