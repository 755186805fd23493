"""Pieces of TileGym's autotuned cuTile host code, read and rewritten with ``ast``.

Used by both reference readers (``reference.launch``, ``reference.direct``) and their pieces
(the pieces others share are in ``bot.infer.syntax``): rewriting the reference's expressions into the wrapper's (``cfg`` fields renamed to kernel.rs
generics, ``ceil(x / y)`` to ``cdiv``, the SM query to TileGym's cached ``get_num_sm()``).
"""

from __future__ import annotations

import ast

from bot.infer.syntax import is_call


class NotThisShape(Exception):
    """The reference does not have the shape this reader understands (the message says where)."""


def none_default_step(stmt: ast.If) -> dict[str, str] | None:
    """``if x is None: x = <const>`` as the wrapper step ``x = <const> if x is None else x``."""
    test = stmt.test
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and ast.unparse(test.comparators[0]) == "None"
        and not stmt.orelse
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], ast.Assign)
        and ast.unparse(stmt.body[0].targets[0]) == test.left.id
        and isinstance(stmt.body[0].value, ast.Constant)
    ):
        name, value = test.left.id, ast.unparse(stmt.body[0].value)
        return {"let": name, "expr": f"{value} if {name} is None else {name}"}
    return None


def assert_step(stmt: ast.Assert, condition: str, op: str) -> dict[str, str]:
    failed = f"not ({ast.unparse(stmt.test)})"
    if condition:
        failed = f"({condition}) and {failed}"
    message = stmt.msg.value if isinstance(stmt.msg, ast.Constant) else f"requires {ast.unparse(stmt.test)}"
    return {"check": failed, "raise": "ValueError", "message": f"cutile-rs {op}: {message}"}


def returning_body(fn: ast.FunctionDef) -> list[ast.stmt] | None:
    """``fn``'s statements, docstring aside, when the last returns a value; else None."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    return body


def lambda_tuple(fn: ast.expr) -> list[ast.expr]:
    if not isinstance(fn, ast.Lambda) or not isinstance(fn.body, ast.Tuple):
        raise NotThisShape(f"expected `lambda cfg: (...)`, got {ast.unparse(fn)}")
    return list(fn.body.elts)


def lambda_dict(fn: ast.expr) -> dict[str, ast.expr]:
    if not isinstance(fn, ast.Lambda) or not isinstance(fn.body, ast.Dict):
        raise NotThisShape(f"expected `lambda cfg: {{...}}`, got {ast.unparse(fn)}")
    return {getattr(k, "value", ""): v for k, v in zip(fn.body.keys, fn.body.values, strict=True)}


def cfg_field(expr: ast.expr) -> str | None:
    """The config field ``cfg.X`` or ``getattr(cfg, "X", default)`` reads, else None."""
    if isinstance(expr, ast.Attribute) and getattr(expr.value, "id", "") == "cfg":
        return expr.attr
    if (
        isinstance(expr, ast.Call)
        and getattr(expr.func, "id", "") == "getattr"
        and len(expr.args) >= 2
        and getattr(expr.args[0], "id", "") == "cfg"
        and isinstance(expr.args[1], ast.Constant)
        and isinstance(expr.args[1].value, str)
    ):
        return expr.args[1].value
    return None


def rename_fields(expr: ast.expr, rename: dict[str, str]) -> ast.expr:
    class Rename(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            self.generic_visit(node)
            if getattr(node.value, "id", "") == "cfg" and node.attr in rename:
                node.attr = rename[node.attr]
            return node

        def visit_Call(self, node: ast.Call) -> ast.AST:  # getattr(cfg, "num_ctas", 1)
            self.generic_visit(node)
            if (
                getattr(node.func, "id", "") == "getattr"
                and len(node.args) >= 2
                and getattr(node.args[0], "id", "") == "cfg"
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in rename
            ):
                node.args[1] = ast.Constant(rename[node.args[1].value])
            return node

    return Rename().visit(expr)


def ceil_to_cdiv(expr: ast.expr) -> ast.expr:
    """``ceil(x / y)`` or ``math.ceil(x / y)`` -> ``cdiv(x, y)``: integer arithmetic, exact for any size."""

    class Cdiv(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if (
                ast.unparse(node.func) in ("ceil", "math.ceil")
                and len(node.args) == 1
                and isinstance(node.args[0], ast.BinOp)
                and isinstance(node.args[0].op, ast.Div)
            ):
                div = node.args[0]
                return ast.Call(func=ast.Name("cdiv", ast.Load()), args=[div.left, div.right], keywords=[])
            return node

    return Cdiv().visit(expr)


def ct_cdiv(expr: ast.expr) -> ast.expr:
    """``ct.cdiv(x, y)`` (cuTile's own) -> the wrapper's ``cdiv(x, y)``."""

    class Cdiv(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if ast.unparse(node.func) == "ct.cdiv" and len(node.args) == 2 and not node.keywords:
                return ast.Call(func=ast.Name("cdiv", ast.Load()), args=node.args, keywords=[])
            return node

    return Cdiv().visit(expr)


def products(expr: ast.expr) -> ast.expr:
    """``functools.reduce(operator.mul, xs, start)`` (or ``reduce`` imported, or a multiplying
    lambda) -> ``math.prod(xs, start=start)``; a start of 1 is prod's own."""

    def multiplies(fn: ast.expr) -> bool:
        if ast.unparse(fn) in ("operator.mul", "mul", "operator.__mul__"):
            return True
        if isinstance(fn, ast.Lambda) and len(fn.args.args) == 2 and isinstance(fn.body, ast.BinOp):
            a, b = (x.arg for x in fn.args.args)
            names = {ast.unparse(fn.body.left), ast.unparse(fn.body.right)}
            return isinstance(fn.body.op, ast.Mult) and names == {a, b}
        return False

    class Prod(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if (
                ast.unparse(node.func) in ("functools.reduce", "reduce")
                and len(node.args) in (2, 3)
                and not node.keywords
                and multiplies(node.args[0])
            ):
                start = node.args[2] if len(node.args) == 3 else None
                keywords = [] if start is None or ast.unparse(start) == "1" else [ast.keyword("start", start)]
                prod = ast.Attribute(value=ast.Name("math", ast.Load()), attr="prod", ctx=ast.Load())
                return ast.Call(func=prod, args=[node.args[1]], keywords=keywords)
            return node

    return Prod().visit(expr)


def num_sms(expr: ast.expr) -> ast.expr:
    """The SM count query -> TileGym's cached ``get_num_sm()``."""

    class Sms(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            self.generic_visit(node)
            if node.attr == "multi_processor_count" and is_call(node.value, "get_device_properties"):
                return ast.Call(func=ast.Name("get_num_sm", ast.Load()), args=[], keywords=[])
            return node

    return Sms().visit(expr)


def device_capability(expr: ast.expr) -> ast.expr:
    """``torch.cuda.get_device_capability()`` -> the wrapper's ``_device_capability()``, asked once
    per device (bot/emit/wrapper_py.py)."""

    class Capability(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if ast.unparse(node) == "torch.cuda.get_device_capability()":
                return ast.Call(func=ast.Name("_device_capability", ast.Load()), args=[], keywords=[])
            return node

    return Capability().visit(expr)


def flag_check(c_arg: str) -> dict[str, str]:
    """The FFI's check of a C argument that feeds a boolean generic: 0 or 1, nothing else."""
    return {"when": f"{c_arg} != 0 and {c_arg} != 1", "rc": "INVALID_ARGS"}
