"""The house rules of docs/architecture.md, checked on the code itself.

No module over 500 lines, no function over 80 lines (the validator excepted), no import cycle
between cpsched modules (imports for type checkers only do not count), the public API
importable from ``cpsched``, and nothing cites a file outside the repository.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cpsched"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
#: the validator re-derives every rule in one place on purpose (docs/architecture.md)
LONG_FUNCTIONS_ALLOWED = {"cpsched/validate.py"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path) -> set[str]:
    """cpsched modules imported by ``path`` (anywhere but under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skip.update(id(n) for n in ast.walk(node))
    known = {_module_name(p) for p in MODULES}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out.update(n for n in names if n in known)
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_size(path: Path) -> None:
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)}: {n} lines"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_function_size(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    if rel in LONG_FUNCTIONS_ALLOWED:
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{rel}: " + ", ".join(long)


def test_no_import_cycle() -> None:
    g = nx.DiGraph()
    for path in MODULES:
        mod = _module_name(path)
        g.add_node(mod)
        for dep in _imports(path):
            # a package's __init__ re-exporting its own submodules is not a cycle
            if dep != mod and not dep.startswith(mod + "."):
                g.add_edge(mod, dep)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def test_public_api() -> None:
    import cpsched
    from cpsched import Result, Schedule, load_instance, run_all, solve, validate

    assert callable(load_instance) and callable(solve) and callable(run_all)
    assert callable(validate) and Schedule.__name__ == "Schedule" and Result is not None
    for name in cpsched.__all__:
        assert getattr(cpsched, name) is not None


CITED_OUTSIDE = re.compile(r"SPEC §|DESIGN-NOTES|shared/reference|\.\./shared")


@pytest.mark.parametrize("folder", ["cpsched", "tests", "benchmarks", "examples", "notebooks",
                                    "docs", "README.md"])
def test_nothing_cites_files_outside_the_repository(folder: str) -> None:
    root = ROOT / folder
    files = [root] if root.is_file() else [
        p for p in root.rglob("*") if p.suffix in {".py", ".md", ".toml", ".txt"}]
    this = Path(__file__).resolve()
    bad = [f"{p.relative_to(ROOT)}:{k}" for p in files if p.resolve() != this
           for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if CITED_OUTSIDE.search(line)]
    assert not bad, "cites files outside the repository: " + ", ".join(bad[:10])
