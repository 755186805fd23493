"""Shapes of single statements the direct reader recognises on its way to the launch: autograd
bookkeeping to drop, plain assignments, ``if c: raise``, ``if c: return x``, a value chosen by an
``if``/``else``, and an ``if`` after the launch that only shapes what the wrapper returns."""

from __future__ import annotations

import ast
import copy

from bot.infer.syntax import plain_assign, substitute


def is_dropped(stmt: ast.stmt) -> bool:
    """A statement the forward-only wrapper drops, as it gives the launch nothing: autograd
    bookkeeping (``ctx.mark_dirty(x)``, ``ctx.p = p``), a local ``import warnings`` and the
    ``warnings.warn(...)`` it serves (a note to the caller; the value it guards is read apart)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = ast.unparse(stmt.value.func)
        return func.startswith("ctx.") or func == "warnings.warn"
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


def in_place_call(stmt: ast.stmt, bound: set[str]) -> ast.Call | None:
    """``t.fill_(v)`` on a tensor the steps bound: PyTorch's in-place methods (a trailing ``_``)
    change ``t`` and return it, so the step ``t = t.fill_(v)`` is the same statement. Else None."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    owner, method = call.func.value, call.func.attr
    if not (isinstance(owner, ast.Name) and owner.id in bound):
        return None
    in_place = method.endswith("_") and not method.startswith("_")
    return call if in_place else None


def host_value(value: ast.expr) -> bool:
    """Arithmetic on plain names through plain functions (``next_power_of_2(num_experts)``): no
    attribute, item or method of anything, so no tensor a launch wrote is read."""
    return not any(isinstance(n, (ast.Attribute, ast.Subscript)) for n in ast.walk(value)) and all(
        isinstance(n.func, ast.Name) for n in ast.walk(value) if isinstance(n, ast.Call)
    )


def raise_check(stmt: ast.If) -> tuple[str, str] | None:
    """``if cond: raise SomeError("text")`` with no else: (SomeError, text)."""
    if stmt.orelse:
        return None
    return raised(stmt.body)


def raised(block: list[ast.stmt]) -> tuple[str, str] | None:
    """A block that is one ``raise SomeError("text")``: (SomeError, text); an f-string's text keeps
    its fields (the wrapper's message is an f-string then), anything else says the error's name."""
    if len(block) != 1 or not isinstance(block[0], ast.Raise):
        return None
    exc = block[0].exc
    if not (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)):
        return None
    text = exc.args[0] if exc.args else None
    if isinstance(text, ast.Constant) and isinstance(text.value, str):
        return exc.func.id, text.value
    return exc.func.id, _fstring_text(text) or exc.func.id


def _fstring_text(node: ast.expr | None) -> str:
    """``f"dim {dim} out of range"`` as ``dim {dim} out of range``; "" when a field has a format
    spec, quotes or braces of its own (not safe to write into the wrapper's f-string again)."""
    if not isinstance(node, ast.JoinedStr):
        return ""
    parts: list[str] = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if any(c in value.value for c in "{}"):
                return ""
            parts.append(value.value)
            continue
        if not isinstance(value, ast.FormattedValue) or value.format_spec is not None:
            return ""
        field = ast.unparse(value.value)
        if any(c in field for c in "{}'\"\\"):
            return ""
        conversion = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[value.conversion]
        parts.append(f"{{{field}{conversion}}}")
    return "".join(parts)


def message_names(message: str) -> set[str]:
    """The names an f-string message's fields read (``got {x.dtype}``: x)."""
    if "{" not in message:
        return set()
    try:
        tree = ast.parse(f"f{message!r}", mode="eval")
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def if_chain(stmt: ast.If) -> list[tuple[ast.If | None, list[ast.stmt]]]:
    """``if a: .. elif b: .. else: ..`` as its branches in order: (the ``if`` node testing it,
    its block), the ``else`` block last with None."""
    branches: list[tuple[ast.If | None, list[ast.stmt]]] = []
    node: ast.If | None = stmt
    while node is not None:
        branches.append((node, [s for s in node.body if not is_dropped(s)]))
        orelse = [s for s in node.orelse if not is_dropped(s)]
        if len(orelse) == 1 and isinstance(orelse[0], ast.If):
            node = orelse[0]
            continue
        if orelse:
            branches.append((None, orelse))
        node = None
    return branches


def item_assignment(stmt: ast.stmt) -> tuple[str, ast.expr, ast.expr] | None:
    """``shape[i] = v`` (or ``shape[i] op= v``) on a plain name: (shape, i, the new item)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AugAssign):
        target = stmt.target
        value = ast.BinOp(left=copy.deepcopy(target), op=stmt.op, right=stmt.value)
    else:
        return None
    if not (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and not isinstance(target.slice, ast.Slice)
    ):
        return None
    if isinstance(value, ast.BinOp):
        value.left = _loaded(value.left)
    return target.value.id, target.slice, value


def replaced_item(name: str, index: ast.expr, item: ast.expr) -> ast.expr:
    """The list ``name`` with its item ``index`` replaced by ``item``, as one expression: slices
    around a constant index, else the item where ``i == index % len(name)``."""
    seq = ast.Name(name, ast.Load())
    if (
        isinstance(index, ast.UnaryOp)
        and isinstance(index.op, ast.USub)
        and isinstance(index.operand, ast.Constant)
    ):
        index = ast.Constant(-index.operand.value)
    if isinstance(index, ast.Constant) and isinstance(index.value, int) and not isinstance(index.value, bool):
        k = index.value
        head = ast.Subscript(value=seq, slice=ast.Slice(upper=ast.Constant(k)), ctx=ast.Load())
        value = ast.BinOp(left=head, op=ast.Add(), right=ast.List(elts=[item], ctx=ast.Load()))
        if k == -1:
            return value
        tail = ast.Subscript(
            value=copy.deepcopy(seq), slice=ast.Slice(lower=ast.Constant(k + 1)), ctx=ast.Load()
        )
        return ast.BinOp(left=value, op=ast.Add(), right=tail)
    i, d = ast.Name("_i", ast.Load()), ast.Name("_d", ast.Load())
    length = ast.Call(func=ast.Name("len", ast.Load()), args=[copy.deepcopy(seq)], keywords=[])
    where = ast.Compare(
        left=i, ops=[ast.Eq()], comparators=[ast.BinOp(left=index, op=ast.Mod(), right=length)]
    )
    pairs = ast.Tuple(elts=[ast.Name("_i", ast.Store()), ast.Name("_d", ast.Store())], ctx=ast.Store())
    enum = ast.Call(func=ast.Name("enumerate", ast.Load()), args=[seq], keywords=[])
    return ast.ListComp(
        elt=ast.IfExp(test=where, body=item, orelse=d),
        generators=[ast.comprehension(target=pairs, iter=enum, ifs=[], is_async=0)],
    )


def _loaded(node: ast.expr) -> ast.expr:
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        if hasattr(n, "ctx"):
            n.ctx = ast.Load()
    return node


def early_return(stmt: ast.If) -> ast.expr | None:
    """``if cond: return x`` (autograd bookkeeping aside) with no else: the returned value."""
    body = [s for s in stmt.body if not is_dropped(s)]
    if stmt.orelse or len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    return body[0].value


def conditional_value(stmt: ast.If) -> tuple[str, ast.expr, ast.expr] | None:
    """``if c: a = x else: a = y`` (bookkeeping aside): (a, x, y)."""

    def single(body: list[ast.stmt]) -> tuple[str, ast.expr] | None:
        body = [s for s in body if not is_dropped(s)]
        if len(body) == 1 and isinstance(body[0], ast.Assign) and isinstance(body[0].targets[0], ast.Name):
            return body[0].targets[0].id, body[0].value
        return None

    yes, no = single(stmt.body), single(stmt.orelse)
    if yes is None or no is None or yes[0] != no[0]:
        return None
    return yes[0], yes[1], no[1]
