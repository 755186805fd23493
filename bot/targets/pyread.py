"""Reading the checkout's Python: each file's text and tree once, and the small AST lookups
discovery and the test-file wiring share (TileGym imports, call arguments)."""

from __future__ import annotations

import ast
from pathlib import Path


def parse_python(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None


class PythonFiles:
    """The text and syntax tree of each file, read once per discovery."""

    def __init__(self) -> None:
        self._text: dict[Path, str] = {}
        self._tree: dict[Path, ast.Module | None] = {}

    def text(self, path: Path) -> str:
        if path not in self._text:
            try:
                self._text[path] = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                self._text[path] = ""
        return self._text[path]

    def tree(self, path: Path) -> ast.Module | None:
        if path not in self._tree:
            try:
                self._tree[path] = ast.parse(self.text(path), filename=str(path))
            except (SyntaxError, ValueError):
                self._tree[path] = None
        return self._tree[path]


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file()) if root.is_dir() else []


def string_arg(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def keyword_value(call: ast.Call, name: str) -> object:
    for k in call.keywords:
        if k.arg == name and isinstance(k.value, ast.Constant):
            return k.value.value
    return None


def callee_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def tilegym_aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "tilegym":
                    out[(a.asname or a.name).split(".")[0]] = a.name if a.asname else "tilegym"
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tilegym":
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def tilegym_path(node: ast.expr, aliases: dict[str, str]) -> str:
    """``tilegym.ops.activation.gelu`` for an attribute chain rooted at a tilegym import, else ''."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return ""
    return ".".join([aliases[node.id], *reversed(parts)])
