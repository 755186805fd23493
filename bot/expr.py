"""The plan's expression language (docs/plan.md): parse an expression and say what it reads.

Plan expressions use Python syntax so they parse with ``ast``: ``dim(t,i)``, ``stride(t,i)``,
``ptr(t)``, ``ten(t)``, ``cdiv(x,y)``, ``sel(c,x,y)``, ``cast_tf32(t)``, names of C scalars or derived
values, integers, a quoted dtype name and the usual operators. ``bot/emit/rustexpr.py`` renders
them as Rust; the dry run evaluates them.
"""

from __future__ import annotations

import ast
import re


class ExprError(ValueError):
    pass


def parse(expr: str) -> ast.expr:
    try:
        return ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"not a plan expression: {expr!r} ({exc.msg})") from None


def names(expr: str) -> set[str]:
    """Bare names an expression reads (function names and tensor arguments excluded)."""
    tree = parse(expr)
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            fn = node.func.id if isinstance(node.func, ast.Name) else ""
            args = node.args[1:] if fn in TENSOR_FUNCS else node.args
            for a in args:
                walk(a)
        elif isinstance(node, ast.Name):
            found.add(node.id)
        else:
            for child in ast.iter_child_nodes(node):
                walk(child)

    walk(tree)
    return found


def tensors(expr: str) -> set[str]:
    """C tensor names an expression reads through dim/stride/ptr/ten/cast_tf32."""
    found: set[str] = set()
    for node in ast.walk(parse(expr)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TENSOR_FUNCS:
            if node.args and isinstance(node.args[0], ast.Name):
                found.add(node.args[0].id)
    return found


TENSOR_FUNCS = {"dim", "stride", "ptr", "ten", "cast_tf32"}
DTYPE_NAME = re.compile(r"[a-z][a-z0-9]*")  # "f32": the one kind of string a plan expression holds
