"""Small readings of Python host code with ``ast``, shared by the reference's readers, the
carried plan and the test-file wiring: calls and plain assignments, an output allocation, names
bound and substituted, a reference parameter's kernel.rs generic twin, a kernel's flags."""

from __future__ import annotations

import ast
import copy
import re

_ALLOCATORS = {"empty", "zeros"}  # output allocations with an explicit shape tuple
_PREFIX = re.compile(r"^(TILE_SIZE_|TILE_|BLOCK_SIZE_|BLOCK_)")


def is_call(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and (
        getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name
    )


def plain_assign(stmt: ast.stmt) -> bool:
    """``name = value``: one target, a plain name."""
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)


def is_allocation(value: ast.expr) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _ALLOCATORS
        and getattr(value.func.value, "id", "") == "torch"
        and bool(value.args)
        and isinstance(value.args[0], ast.Tuple)
    )


def bind(target: ast.expr, value: ast.expr, into: dict[str, ast.expr]) -> None:
    if isinstance(target, ast.Name):
        into[target.id] = value
    elif isinstance(target, ast.Tuple):
        for i, elt in enumerate(target.elts):
            if isinstance(elt, ast.Name):
                into[elt.id] = ast.Subscript(
                    value=copy.deepcopy(value), slice=ast.Constant(i), ctx=ast.Load()
                )


def substitute(expr: ast.expr, local: dict[str, ast.expr], bound: dict[str, ast.expr]) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in local:
                return substitute(local[node.id], {k: v for k, v in local.items() if k != node.id}, bound)
            if node.id in bound:
                return copy.deepcopy(bound[node.id])
            return node

    return Sub().visit(copy.deepcopy(expr))


def generic_twin(ref: str, generics: set[str]) -> str | None:
    """The kernel.rs const generic a reference parameter corresponds to (``TILE_SIZE_M`` ~ ``BM``)."""
    if ref in generics:
        return ref
    short = re.fullmatch(r"[TB]([A-Z])", ref)  # bmm's `TM, TN, TK`
    if not (_PREFIX.match(ref) or short):
        return None
    axis = short.group(1) if short else _PREFIX.sub("", ref)
    for name in (f"B{axis}", f"T{axis}", f"TILE_{axis}", f"BLOCK_{axis}", f"TILE_SIZE_{axis}"):
        if name in generics:
            return name
    return None


def bool_params(kernel: ast.FunctionDef) -> set[str]:
    """The reference kernel's parameters declared boolean (``ConstBool``, ``ct.Constant[bool]``)."""
    return {
        a.arg
        for a in kernel.args.args
        if a.annotation is not None and "bool" in ast.unparse(a.annotation).lower()
    }
