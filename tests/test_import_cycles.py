"""No two modules of agent-d import each other, directly or around a loop.

Every import counts, the ones inside functions and under ``TYPE_CHECKING`` too: a module that
needs another only for a type or only in one function still depends on it. The packages checked:
``bot`` and the GPU proof's ``scripts/gpu`` (imported as ``gpu``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"bot": ROOT / "bot", "gpu": ROOT / "scripts" / "gpu"}


def modules(package: str, folder: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = (package, *path.relative_to(folder).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that the module ``name`` (at ``path``) imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    out.add(full)  # `from bot.plan import common`: the submodule
                elif base in known:
                    out.add(base)
    out.discard(name)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycle(package):
    known = modules(package, PACKAGES[package])
    assert len(known) > 5
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []


def test_a_cycle_is_found_where_there_is_one(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "a.py").write_text("from pkg.b import thing\n")
    (folder / "b.py").write_text("def f():\n    from . import c\n")
    (folder / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
    )
    (folder / "d.py").write_text("import pkg.a\n")
    known = modules("pkg", folder)
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_subpackages_are_walked(tmp_path):
    """bot/infer and scripts/gpu hold subpackages: their modules count, and so does a loop through them."""
    folder = tmp_path / "pkg"
    (folder / "sub").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "sub" / "__init__.py").write_text("")
    (folder / "sub" / "a.py").write_text("from pkg import b\n")
    (folder / "b.py").write_text("from pkg.sub.a import thing\n")
    known = modules("pkg", folder)
    assert sorted(known) == ["pkg", "pkg.b", "pkg.sub", "pkg.sub.a"]
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [["pkg.b", "pkg.sub.a"]]
