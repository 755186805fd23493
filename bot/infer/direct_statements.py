"""Shapes of single statements the direct reader recognises on its way to the launch: autograd
bookkeeping to drop, plain assignments, ``if c: raise``, ``if c: return x``, a value chosen by an
``if``/``else``, and an ``if`` after the launch that only shapes what the wrapper returns."""

from __future__ import annotations

import ast

from bot.infer.launch_ast import substitute


def is_ctx(stmt: ast.stmt) -> bool:
    """``ctx.mark_dirty(x)``, ``ctx.p = p``: autograd bookkeeping the forward-only wrapper drops."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return ast.unparse(stmt.value.func).startswith("ctx.")
    if isinstance(stmt, ast.Assign):
        return all(ast.unparse(t).startswith("ctx.") for t in stmt.targets)
    return False


def post_branch(stmt: ast.stmt, post: dict[str, ast.expr]) -> bool:
    """``if c: y = f(y) [else: y = g(y)]`` after the launch, plain assignments only: each name's
    value becomes ``f(y) if c else y`` in what the wrapper returns. False when not that shape."""
    if not isinstance(stmt, ast.If) or not all(plain_assign(s) for s in stmt.body + stmt.orelse):
        return False
    for block, test in ((stmt.body, stmt.test), (stmt.orelse, ast.UnaryOp(op=ast.Not(), operand=stmt.test))):
        for s in block:
            name = s.targets[0].id
            keep = post.get(name, ast.Name(name, ast.Load()))
            post[name] = ast.IfExp(
                test=substitute(test, {}, post), body=substitute(s.value, {}, post), orelse=keep
            )
    return True


def plain_assign(stmt: ast.stmt) -> bool:
    """``name = value``: one target, a plain name."""
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)


def same_names(target: ast.expr, value: ast.expr) -> bool:
    """``q, k = q, k``: the names handed back are the ones assigned (nothing to compute)."""
    return ast.unparse(target).strip("()") == ast.unparse(value).strip("()")


def first_line(stmt: ast.stmt) -> str:
    """What an error message quotes of a statement."""
    return ast.unparse(stmt).splitlines()[0]


def inlinable_call(stmt: ast.stmt) -> ast.Call | None:
    """The call a statement is made of (``f(x)``, ``y = f(x)``, ``return f(x)``), else None."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) else None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) != 1:
        return None
    return value if isinstance(value, ast.Call) else None


def raise_check(stmt: ast.If) -> tuple[str, str] | None:
    """``if cond: raise SomeError("text")`` with no else: (SomeError, text)."""
    if stmt.orelse or len(stmt.body) != 1 or not isinstance(stmt.body[0], ast.Raise):
        return None
    exc = stmt.body[0].exc
    if not (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)):
        return None
    text = exc.args[0] if exc.args else None
    message = text.value if isinstance(text, ast.Constant) and isinstance(text.value, str) else exc.func.id
    return exc.func.id, message


def early_return(stmt: ast.If) -> ast.expr | None:
    """``if cond: return x`` (autograd bookkeeping aside) with no else: the returned value."""
    body = [s for s in stmt.body if not is_ctx(s)]
    if stmt.orelse or len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    return body[0].value


def conditional_value(stmt: ast.If) -> tuple[str, ast.expr, ast.expr] | None:
    """``if c: a = x else: a = y`` (bookkeeping aside): (a, x, y)."""

    def single(body: list[ast.stmt]) -> tuple[str, ast.expr] | None:
        body = [s for s in body if not is_ctx(s)]
        if len(body) == 1 and isinstance(body[0], ast.Assign) and isinstance(body[0].targets[0], ast.Name):
            return body[0].targets[0].id, body[0].value
        return None

    yes, no = single(stmt.body), single(stmt.orelse)
    if yes is None or no is None or yes[0] != no[0]:
        return None
    return yes[0], yes[1], no[1]
