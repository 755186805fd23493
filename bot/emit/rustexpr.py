"""Render plan expressions (docs/plan.md, "expression language") as Rust.

Plan expressions use Python syntax so they parse with ``ast``:
``dim(t,i)``, ``stride(t,i)``, ``ptr(t)``, ``ten(t)``, ``cdiv(x,y)``, ``sel(c,x,y)``,
``cast_tf32(t)``, ``dtype``, names of C scalars or derived values, integers, a quoted dtype
name (``"f32"``, a fixed type generic such as an accumulator slot), and the operators ``+ - * / % == != < <= > >= and or not``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from bot.expr import DTYPE_NAME, ExprError, parse
from bot.expr import names as names  # re-exported: the emitters read plans through this module
from bot.expr import tensors as tensors

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Div: "/", ast.Mod: "%"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def to_rust(expr: str, bind: Callable[[str], str], elem: Callable[[str], str]) -> str:
    """Rust for ``expr``. ``bind(t)`` names the descriptor local of tensor ``t``; ``elem(t)`` its element type."""
    return _Render(bind, elem).render(parse(expr))


def strip_outer(rust: str) -> str:
    """``(a + b)`` -> ``a + b`` when the first parenthesis closes at the very end (rustc's unused_parens)."""
    while rust.startswith("(") and rust.endswith(")"):
        depth = 0
        for i, ch in enumerate(rust):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(rust) - 1:
                return rust
        rust = rust[1:-1]
    return rust


class _Render:
    def __init__(self, bind: Callable[[str], str], elem: Callable[[str], str]):
        self.bind = bind
        self.elem = elem

    def render(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return "true" if node.value else "false"
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return str(node.value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not DTYPE_NAME.fullmatch(node.value):
                raise ExprError(f"a string in a plan expression names a dtype: {node.value!r}")
            return f'"{node.value}"'
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"-{self.render(node.operand)}"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return f"!({self.render(node.operand)})"
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return f"({self.render(node.left)} {_BINOPS[type(node.op)]} {self.render(node.right)})"
        if isinstance(node, ast.BoolOp):
            joiner = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + joiner.join(self.render(v) for v in node.values) + ")"
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
            op = _CMPOPS[type(node.ops[0])]
            return f"({self.render(node.left)} {op} {self.render(node.comparators[0])})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self.call(node.func.id, node.args)
        raise ExprError(f"unsupported in plan expressions: {ast.unparse(node)!r}")

    def call(self, fn: str, args: list[ast.expr]) -> str:
        def tensor(i: int = 0) -> str:
            if len(args) <= i or not isinstance(args[i], ast.Name):
                raise ExprError(f"{fn}() takes a tensor name first")
            return args[i].id

        def index(i: int = 1) -> str:
            if len(args) <= i or not isinstance(args[i], ast.Constant) or not isinstance(args[i].value, int):
                raise ExprError(f"{fn}() takes a literal dimension index")
            return str(args[i].value)

        if fn == "dim":
            return f"{self.bind(tensor())}.dim({index()})"
        if fn == "stride":
            return f"({self.bind(tensor())}.strides[{index()}] as i32)"
        if fn == "ptr":
            return f"{tensor()}_dp"
        if fn == "ten":
            return f"&*{tensor()}_t"
        if fn == "cast_tf32":
            return f"cast_tf32({self.bind(tensor())}.dtype)"
        if fn == "cdiv" and len(args) == 2:
            x, y = self.render(args[0]), self.render(args[1])
            return f"(({x} + {y} - 1) / {y})"
        if fn == "sel" and len(args) == 3:
            c, x, y = (self.render(a) for a in args)
            return f"(if {strip_outer(c)} {{ {strip_outer(x)} }} else {{ {strip_outer(y)} }})"
        if fn in ("max", "min") and len(args) == 2:
            return f"{self.render(args[0])}.{fn}({self.render(args[1])})"
        raise ExprError(f"unknown function in plan expression: {fn}()")
