"""Small AST helpers of the flattener: what a guarded branch may hold, renaming an inlined
callee's names, and the reference's spelling turned into the wrapper's."""

from __future__ import annotations

import ast
import copy

from bot.infer.direct.statements import raised
from bot.infer.launch.syntax import ceil_to_cdiv, ct_cdiv, device_capability, num_sms, products


def simple_block(block: list[ast.stmt]) -> bool:
    """Plain assignments, asserts, ``if c: x = f(x)`` and ``if c: raise E(..)`` inside: what a
    guarded branch may hold."""
    return all(
        (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name))
        or isinstance(s, ast.Assert)
        or (
            isinstance(s, ast.If)
            and (simple_block(s.body) or raised(s.body) is not None)
            and simple_block(s.orelse)
        )
        for s in block
    )


def none_of(flags: list[ast.expr]) -> ast.expr | None:
    """``not f`` / ``not (f or g)``: none of the earlier branches was taken (None: no earlier one)."""
    if not flags:
        return None
    held = flags[0] if len(flags) == 1 else ast.BoolOp(op=ast.Or(), values=list(flags))
    return ast.UnaryOp(op=ast.Not(), operand=held)


def is_list_value(value: ast.expr) -> bool:
    """``list(...)``, ``[...]`` or a list comprehension: a value whose items may be assigned."""
    return isinstance(value, (ast.List, ast.ListComp)) or (
        isinstance(value, ast.Call) and getattr(value.func, "id", "") == "list"
    )


def passed_through(fn: ast.FunctionDef, call: ast.Call, skip: int) -> set[str]:
    """Parameters of ``fn`` the call hands the caller's variable of the same name, never reassigned."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][skip:]
    given = dict(zip(params, call.args, strict=False))
    given.update({k.arg: k.value for k in call.keywords if k.arg})
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return {p for p, v in given.items() if isinstance(v, ast.Name) and v.id == p and p not in stored}


def renamed(fn: ast.FunctionDef, bound: set[str], keep: set[str]) -> tuple[ast.FunctionDef, dict[str, str]]:
    """A copy of ``fn`` whose parameters and assigned names that are already bound get a number
    (``head_dim`` -> ``head_dim_2``), those in ``keep`` aside."""
    own = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    own |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    taken = bound | own
    renames: dict[str, str] = {}
    for name in sorted((own & bound) - keep):
        i = 2
        while f"{name}_{i}" in taken:
            i += 1
        renames[name] = f"{name}_{i}"
        taken.add(renames[name])
    return with_names(fn, renames), renames


def with_names(fn: ast.FunctionDef, renames: dict[str, str]) -> ast.FunctionDef:
    """A copy of ``fn`` with every name and parameter in ``renames`` renamed."""

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            node.id = renames.get(node.id, node.id)
            return node

        def visit_arg(self, node: ast.arg) -> ast.AST:
            node.arg = renames.get(node.arg, node.arg)
            return node

    return Rename().visit(copy.deepcopy(fn))


def wrapper_expr(node: ast.expr) -> ast.expr:
    """The reference's spelling turned into the wrapper's: ``math.ceil(a / b)`` and ``ct.cdiv(a, b)``
    -> ``cdiv(a, b)``, the SM count query -> ``get_num_sm()``, ``functools.reduce(operator.mul, xs,
    1)`` -> ``math.prod(xs)``, the device capability -> ``_device_capability()``."""
    return device_capability(products(ct_cdiv(num_sms(ceil_to_cdiv(copy.deepcopy(node))))))
