"""A kernel.rs scalar the cuTile kernel does not take, valued over the tensors the launch hands it.

kernel.rs may take a count the reference computes at its launch but never passes
(``batch_size, n_q_head, seq_len, head_dim = q.shape`` and kernel.rs's ``head_dim``). Where that
local is a function of the tensors the launch passes (their shapes, sizes and strides, with
integer arithmetic), the same function over the kernel's own parameters gives it at every launch
that may run the kernel, a search's trial launches included, which have no such local. The local
must have one binding in its function, made before the launch, and each tensor it reads must be
the launch's own (not rebound after); sites that disagree leave it asked.
"""

from __future__ import annotations

import ast
import symtable

from bot.infer.model.semantic import ModuleModel

_MAX_DEPTH = 8
_TENSOR_ATTRS = {"shape", "ndim"}
_TENSOR_METHODS = {"size", "stride", "numel", "dim"}
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


class _NotOverTensors(Exception):
    """The local is not a function of the tensors the launch passes."""


def launched_scalars(
    model_of, sites, kernel: str, params: list[str], names: list[str]
) -> dict[str, tuple[str, int]]:
    """Each of ``names`` that the launches which may run ``kernel`` (its own, and those of a kernel
    computed at the site, a tuned one from a cache) hold as a local over the tensors they pass, or
    that the callers of a launching function hold over the tensors they hand it for the launch, the
    same everywhere: name -> (its expression over the kernel's ``params``, the first line found).
    ``model_of(site)``: the module model of a site."""
    frames = [
        f for s in sites if s.direct and s.kernel in (kernel, "") for f in _frames(model_of(s), s, params)
    ]
    out: dict[str, tuple[str, int]] = {}
    for name in names:
        found: set[str | None] = set()
        line = 0
        for frame in frames:
            if name not in frame.stores:
                continue  # not a local there: a search's trial launches, say, read the tensors
            found.add(frame.over_tensors(name))
            line = line or frame.line
        if len(found) == 1 and None not in found:
            out[name] = (str(next(iter(found))), line)
    return out


class _Frame:
    """A function that launches the kernel, or calls one that does: its bindings and which of its
    names the launch hands the kernel as which parameter, read before ``line``."""

    def __init__(self, stores: dict[str, list], passed: dict[str, str], line: int) -> None:
        self.stores, self.passed, self.line = stores, passed, line

    def over_tensors(self, local: str) -> str | None:
        try:
            expr = _resolve(ast.Name(local, ast.Load()), self.stores, self.passed, self.line, depth=0)
        except _NotOverTensors:
            return None
        return ast.unparse(expr) if _reads_a_tensor(expr, set(self.passed.values())) else None


def _frames(model: ModuleModel, site, params: list[str]) -> list[_Frame]:
    """The launching function's frame, then its callers' in the module (one call up)."""
    function = model.node_of(site.scope)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(
        site.args, ast.Tuple
    ):
        return []
    stores = _stores(model, function, site.scope)
    passed = {
        a.id: params[i] for i, a in enumerate(site.args.elts) if isinstance(a, ast.Name) and i < len(params)
    }
    frames = [_Frame(stores, passed, site.call.lineno)]
    binding = model.binding(function.name)
    if binding is None or binding.stmt is not function:
        return frames  # a method or a nested function: its calls are not found by its name
    # a parameter handed on to the launch unchanged, from each call of this function
    through = {name: param for name, param in passed.items() if not stores.get(name)}
    arg_names = [a.arg for a in function.args.posonlyargs + function.args.args]
    qualified = f"{model.module}.{function.name}"
    for node, scope in model.walk(model.tree):
        if not isinstance(node, ast.Call) or model.qualified(node.func, scope) != qualified:
            continue
        caller = model.node_of(scope)
        unpacked = any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        )
        if not isinstance(caller, (ast.FunctionDef, ast.AsyncFunctionDef)) or unpacked:
            continue  # `f(*args)`: which argument is which parameter is not written there
        handed = list(zip(arg_names, node.args, strict=False)) + [(k.arg, k.value) for k in node.keywords]
        caller_passed = {
            value.id: through[arg] for arg, value in handed if isinstance(value, ast.Name) and arg in through
        }
        frames.append(_Frame(_stores(model, caller, scope), caller_passed, node.lineno))
    return frames


def _stores(model: ModuleModel, function: ast.AST, scope: symtable.SymbolTable) -> dict[str, list]:
    """name -> every binding of it in ``function``'s own scope: (its value, or None when not a
    plain assignment; the line)."""
    out: dict[str, list] = {}
    plain: set[int] = set()  # the Name nodes a plain assignment binds, counted once
    for node, where in model.walk(function):
        if where is not scope:
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            _bind(node.targets[0], node.value, node.lineno, out, plain)
        elif (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and id(node) not in plain
        ):
            out.setdefault(node.id, []).append((None, node.lineno))
        else:  # the bindings that are no Name node: each makes the name's value unknown here
            for name in _other_bindings(node, function):
                out.setdefault(name, []).append((None, getattr(node, "lineno", 0)))
    return out


def _other_bindings(node: ast.AST, function: ast.AST) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function:
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    return []


def _bind(target: ast.expr, value: ast.expr, line: int, out: dict[str, list], plain: set[int]) -> None:
    if isinstance(target, ast.Name):
        out.setdefault(target.id, []).append((value, line))
        plain.add(id(target))
    elif isinstance(target, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in target.elts):
        for i, element in enumerate(target.elts):
            _bind(element, ast.Subscript(value, ast.Constant(i), ast.Load()), line, out, plain)


def _resolve(
    expr: ast.expr, stores: dict[str, list], passed: dict[str, str], before: int, depth: int
) -> ast.expr:
    """``expr`` with every local replaced by its one value, down to the tensors the launch passes."""
    if depth > _MAX_DEPTH:
        raise _NotOverTensors
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr
    if isinstance(expr, ast.Name):
        bindings = stores.get(expr.id, [])
        if expr.id in passed:
            return _tensor(expr, stores, passed, before)
        # one plain assignment in the function, made before the launch (or the read it feeds)
        if len(bindings) != 1 or bindings[0][0] is None or bindings[0][1] >= before:
            raise _NotOverTensors
        value, line = bindings[0]
        return _resolve(value, stores, passed, line, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, _OPS):
        return ast.BinOp(
            _resolve(expr.left, stores, passed, before, depth + 1),
            expr.op,
            _resolve(expr.right, stores, passed, before, depth + 1),
        )
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return ast.UnaryOp(expr.op, _resolve(expr.operand, stores, passed, before, depth + 1))
    if isinstance(expr, ast.Attribute) and expr.attr in _TENSOR_ATTRS:
        return ast.Attribute(_tensor(expr.value, stores, passed, before), expr.attr, ast.Load())
    if (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Attribute)
        and expr.value.attr == "shape"
    ):
        index = _resolve(expr.slice, stores, passed, before, depth + 1)
        return ast.Subscript(_resolve(expr.value, stores, passed, before, depth + 1), index, ast.Load())
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _TENSOR_METHODS
        and not expr.keywords
    ):
        tensor = _tensor(expr.func.value, stores, passed, before)
        call_args = [_resolve(a, stores, passed, before, depth + 1) for a in expr.args]
        return ast.Call(ast.Attribute(tensor, expr.func.attr, ast.Load()), call_args, [])
    raise _NotOverTensors


def _tensor(expr: ast.expr, stores: dict[str, list], passed: dict[str, str], before: int) -> ast.expr:
    """A tensor the launch passes, bound for the last time before it is read here (so the launch
    passes the same one: ``x = x.contiguous()`` first is fine, a rebinding after is not)."""
    if not isinstance(expr, ast.Name) or expr.id not in passed:
        raise _NotOverTensors
    if any(line >= before for _value, line in stores.get(expr.id, [])):
        raise _NotOverTensors
    return ast.Name(passed[expr.id], ast.Load())


def _reads_a_tensor(expr: ast.expr, params: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(expr))
