"""The port's side of the dry run: one recorded C call taken through the launch plan as ``ffi.rs``
takes it (its checks, derived values, the variant it launches, each kernel.rs argument, generic and
grid term), with the plan's expression language (``bot/emit/rustexpr.py``) evaluated as Rust would.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from bot import dtypes
from bot.plan import per_variant
from bot.plan.types import FfiPlan, LaunchPlan, Variant
from bot.read.types import KernelSignature


class EvalError(ValueError):
    pass


@dataclass
class PortLaunch:
    entry: str
    grid: list[int]
    values: dict[str, object]  # kernel.rs parameter or generic -> a tensor description or a number
    kinds: dict[str, str]  # name -> "ten" | "ptr" | "scalar" | "generic" | "dtype flag"
    # every generic in the entry's order, as ffi.rs's launch spells it ("f16", "128"); empty where one
    # cannot be evaluated here (the device compile then skips the launch)
    generics: tuple[str, ...] = ()


def port_launches(plan: LaunchPlan, signature: KernelSignature, call: list) -> list[PortLaunch] | str:
    """The kernel launches ``ffi.rs`` makes for one recorded C call; a string: the launcher's refusal."""
    ffi = plan.ffi
    names = [n for n, _ in ffi.c_params()]
    if len(call) != len(names):
        raise EvalError(f"the wrapper passed {len(call)} arguments to a {len(names)}-parameter launcher")
    env: dict[str, object] = dict(zip(names, call))
    if per_variant.split(ffi):  # the variant first, from scalars; then only its own descriptors
        ffi = per_variant.part(ffi, _chosen(ffi, env))
    nulls = [t.name for t in ffi.tensors if env.get(t.name) is None]
    if nulls:  # ffi.rs borrows every descriptor it reads before it launches
        return f"the launcher returns NULL_PTR (a null descriptor for {', '.join(nulls)})"
    env["dtype"] = _dtype_of(env.get(ffi.dtype_from)) if ffi.dtype_from else ""
    for d in ffi.derived:
        env[d.name] = evaluate(d.expr, env)
    for check in ffi.checks:
        if _truthy(evaluate(check["when"], env)):
            return f"the launcher returns {check['rc']} (its check `{check['when']}`)"
    chosen = ffi.variants if ffi.sequence else [_chosen(ffi, env)]
    entries = {e.name: e for e in signature.entries}
    out = []
    for v in chosen:
        entry = entries[v.entry]
        values: dict[str, object] = {}
        kinds: dict[str, str] = {}
        for param, expr in zip(entry.params, v.args):
            values[param.name] = evaluate(expr, env)
            kinds[param.name] = expr.split("(", 1)[0] if expr.startswith(("ten(", "ptr(")) else "scalar"
        for generic, expr in zip(entry.generics, v.generics):
            if generic.kind == "const":
                values[generic.name] = evaluate(expr, env)
                # a flag of the element type (`cast_tf32(a)`): the reference's kernel reads the dtype
                # itself, so it has no argument to compare with; the dtype rows compare its source
                kinds[generic.name] = "dtype flag" if _of_dtype(expr, ffi) else "generic"
        grid = [int(_number(evaluate(g, env))) for g in v.grid]
        out.append(PortLaunch(v.entry, grid, values, kinds, _generic_words(v.generics, env)))
    return out


def _generic_words(exprs, env: dict) -> tuple[str, ...]:
    words = []
    for expr in exprs:
        try:
            value = evaluate(expr, env)
        except (EvalError, KeyError, TypeError, ValueError, ZeroDivisionError):
            return ()
        words.append(str(value).lower() if isinstance(value, bool) else str(value))
    return tuple(words)


def _of_dtype(expr: str, ffi: FfiPlan) -> bool:
    derived = {d.name: d.expr for d in ffi.derived}
    return derived.get(expr.strip(), expr).strip().startswith("cast_tf32(")


def _chosen(ffi: FfiPlan, env: dict) -> Variant:
    for v in ffi.variants:
        if v.when in ("always", "else") or _truthy(evaluate(v.when, env)):
            return v
    raise EvalError("no launch variant applies to this call")


def evaluate(expr: str, env: dict[str, object]):
    """A plan expression (``bot/emit/rustexpr.py``'s language) over the recorded C call, as Rust
    computes it: integer division truncates."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        raise EvalError(f"not a plan expression: {expr!r}") from None
    return _eval(tree, env)


def _eval(node: ast.AST, env: dict):
    """The value of one expression of the launch plan, with ``env`` naming the C call's arguments."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _name(node, env)
    if isinstance(node, ast.UnaryOp):
        return _unary(node, env)
    if isinstance(node, ast.BoolOp):
        values = [_truthy(_eval(v, env)) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.BinOp):
        return _arithmetic(node, env)
    if isinstance(node, ast.Compare):
        return _comparison(node, env)
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _truthy(_eval(node.test, env)) else node.orelse, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _call(node, env)
    raise EvalError(f"cannot evaluate {ast.unparse(node)}")


def _name(node: ast.Name, env: dict):
    if node.id in env:
        return env[node.id]
    if node.id in ("true", "True"):
        return True
    if node.id in ("false", "False"):
        return False
    raise EvalError(f"unknown name {node.id!r}")


def _unary(node: ast.UnaryOp, env: dict):
    v = _eval(node.operand, env)
    if isinstance(node.op, ast.USub):
        return -_number(v)
    if isinstance(node.op, ast.Not):
        return not _truthy(v)
    return v


def _arithmetic(node: ast.BinOp, env: dict):
    """Rust's integer arithmetic: division truncates toward zero, the remainder takes the dividend's sign."""
    a, b = _number(_eval(node.left, env)), _number(_eval(node.right, env))
    if isinstance(node.op, ast.Add):
        return a + b
    if isinstance(node.op, ast.Sub):
        return a - b
    if isinstance(node.op, ast.Mult):
        return a * b
    if isinstance(node.op, (ast.Div, ast.FloorDiv)):
        if isinstance(a, int) and isinstance(b, int):
            if b == 0:
                raise EvalError(f"division by zero in {ast.unparse(node)}")
            return int(a / b) if abs(a) < 2**52 else (abs(a) // abs(b)) * (1 if (a >= 0) == (b > 0) else -1)
        return a / b
    if isinstance(node.op, ast.Mod):
        return int(math.fmod(a, b)) if isinstance(a, int) and isinstance(b, int) else math.fmod(a, b)
    raise EvalError(f"unsupported operator in {ast.unparse(node)}")


def _comparison(node: ast.Compare, env: dict) -> bool:
    left = _eval(node.left, env)
    for op, right_node in zip(node.ops, node.comparators):
        right = _eval(right_node, env)
        ok = {
            ast.Eq: lambda x, y: x == y,
            ast.NotEq: lambda x, y: x != y,
            ast.Lt: lambda x, y: x < y,
            ast.LtE: lambda x, y: x <= y,
            ast.Gt: lambda x, y: x > y,
            ast.GtE: lambda x, y: x >= y,
        }[type(op)](left, right)
        if not ok:
            return False
        left = right
    return True


def _call(node: ast.Call, env: dict):
    """The plan's helper functions: a tensor's dims and strides, cdiv, sel, min/max and the casts."""
    fn, args = node.func.id, node.args
    if fn in ("dim", "stride"):
        desc = _tensor(_eval(args[0], env))
        axis = int(_number(_eval(args[1], env)))
        key = "shape" if fn == "dim" else "strides"
        if axis >= len(desc[key]):
            raise EvalError(f"{ast.unparse(node)}: the tensor has rank {len(desc[key])}")
        return int(desc[key][axis])
    if fn in ("ptr", "ten", "cast_tf32"):
        return (
            _tensor(_eval(args[0], env))
            if fn != "cast_tf32"
            else int(_dtype_of(_eval(args[0], env)) == "f32")
        )
    if fn == "cdiv":
        a, b = int(_number(_eval(args[0], env))), int(_number(_eval(args[1], env)))
        if b == 0:
            raise EvalError(f"division by zero in {ast.unparse(node)}")
        return -(-a // b)
    if fn == "sel":
        return _eval(args[1] if _truthy(_eval(args[0], env)) else args[2], env)
    if fn in ("min", "max"):
        values = [_number(_eval(a, env)) for a in args]
        return min(values) if fn == "min" else max(values)
    if fn in ("i32", "i64", "u32", "u64", "usize", "int"):
        return int(_number(_eval(args[0], env)))
    if fn in ("f32", "float"):
        return float(_number(_eval(args[0], env)))
    raise EvalError(f"cannot evaluate {ast.unparse(node)}")


def _tensor(value) -> dict:
    if isinstance(value, dict) and value.get("kind") == "tensor":
        return value
    raise EvalError(f"not a tensor descriptor: {value!r}")


def _number(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    raise EvalError(f"not a number: {value!r}")


def _truthy(value) -> bool:
    return bool(_number(value)) if not isinstance(value, str) else bool(value)


# the torch dtype a descriptor records -> the cutile generic string ffi.rs dispatches on
_RUST_DTYPES = dtypes.FROM_TORCH


def _dtype_of(desc) -> str:
    return _RUST_DTYPES.get(desc.get("dtype", ""), desc.get("dtype", "")) if isinstance(desc, dict) else ""
