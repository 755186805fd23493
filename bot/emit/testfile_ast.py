"""The AST helpers the test-file wiring edits share: read a file to wire, insert blocks, find a
test's parametrized values."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from bot.emit.wiring import binds


def parametrized_values(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[tuple[str, ast.expr]]:
    """(the parameter name, its values) of each ``@...parametrize("name", values)`` of ``fn``."""
    for dec in fn.decorator_list:
        if not (
            isinstance(dec, ast.Call)
            and getattr(dec.func, "attr", "") == "parametrize"
            and len(dec.args) >= 2
        ):
            continue
        names, values = dec.args[0], dec.args[1]
        if isinstance(names, ast.Constant) and isinstance(names.value, str):
            yield names.value.strip(), values


def with_blocks(
    text: str, tree: ast.Module, lines: list[str], inserts: list[tuple[int, list[str]]], module: str
) -> str:
    """``lines`` with each block inserted before its line (0-based), ``import <module>`` added when
    the file does not bind it; ``text`` itself when there is nothing to insert."""
    if not inserts:
        return text
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    for at, block in sorted(inserts, key=lambda x: x[0], reverse=True):
        lines[at:at] = block
    out = "".join(lines)
    if module and not binds(text, module):
        out = after_header(out, tree, f"import {module}{newline}")
    return out


def after_header(text: str, tree: ast.Module, line: str) -> str:
    """``text`` with ``line`` after the module docstring and ``from __future__`` imports."""
    end = 0
    for i, node in enumerate(tree.body):
        doc = i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (doc or future):
            break
        end = node.end_lineno
    lines = text.splitlines(keepends=True)
    return "".join(lines[:end] + [line] + lines[end:])


def read_test_file(text: str) -> tuple[ast.Module, list[str], str] | None:
    """A test file to wire: its tree, its lines (ends kept) and its line ending; None when it does
    not parse (it is then left as it is)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.splitlines(keepends=True)
    return tree, lines, "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
