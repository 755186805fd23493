"""A kernel.rs scalar the cuTile kernel does not take, valued over the tensors the launch hands it.

kernel.rs may take a count the reference computes at its launch but never passes
(``batch_size, n_q_head, seq_len, head_dim = q.shape`` and kernel.rs's ``head_dim``). Where that
local is a function of the tensors the launch passes (their shapes, sizes and strides, with
integer arithmetic), the same function over the kernel's own parameters gives it at every launch
that may run the kernel, a search's trial launches included, which have no such local. Every
binding of the local in its function must be made before the launch and give the same function
(branches that unpack one shape two ways agree on the dimension they share), and each tensor it
reads must be the launch's own (not rebound after); sites that disagree leave it asked.

A local the launch's tensor was shaped with is that dimension of it: after
``q = query.view(bs, n, h, d)`` and ``q = q.transpose(1, 2).contiguous()``, ``bs`` is
``q.shape[0]``. Followed only through top-level rebindings made before the launch, each a reshape
(``view``, ``reshape``), a permutation by constant axes (``transpose``, ``permute``) or a copy of
the same shape (``contiguous``, ``clone``, ...), and only for a local bound at most once, before
that reshape.

The launch's arguments are a tuple written at the site, a name bound once to one, or what a
function defined in the launching function returns when its body is that one ``return``
(``def args_fn(cfg): return (a, b, batch_size, cfg.TILE)``, ``ct.launch(..., args_fn(best))``):
its own parameters are not the launching function's names, so an element reading one passes none.
"""

from __future__ import annotations

import ast
import symtable

from bot.infer.model.semantic import ModuleModel, bound_names, parameter_names

_MAX_DEPTH = 8
_TENSOR_ATTRS = {"shape", "ndim"}
_TENSOR_METHODS = {"size", "stride", "numel", "dim"}
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_RESHAPES = {"view", "reshape"}
_SAME_SHAPE = {"contiguous", "clone", "detach", "to", "float", "half", "bfloat16", "cuda"}


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

    def __init__(self, stores: dict[str, list], passed: dict[str, str], line: int, top: set[int]) -> None:
        self.stores, self.passed, self.line = stores, passed, line
        self.top = top  # the values the function's own statements assign: bindings that always run

    def over_tensors(self, local: str) -> str | None:
        try:
            expr = _resolve(ast.Name(local, ast.Load()), self.stores, self.passed, self.line, depth=0)
        except _NotOverTensors:
            return self.shaped_with(local)
        return ast.unparse(expr) if _reads_a_tensor(expr, set(self.passed.values())) else None

    def shaped_with(self, local: str) -> str | None:
        """``local`` as the dimension of a launched tensor that was shaped with it, in the order
        the launch passes the tensors."""
        bindings = self.stores.get(local, [])
        for name, param in self.passed.items():
            if any(line >= self.line for _value, line in self.stores.get(name, [])):
                continue  # rebound at or after the launch: not the tensor the launch passes
            for axis, dim in enumerate(self.shape(name, self.line, 0) or []):
                if dim is None or not isinstance(dim[0], ast.Name) or dim[0].id != local:
                    continue
                if len(bindings) <= 1 and all(line < dim[1] for _value, line in bindings):
                    return f"{param}.shape[{axis}]"
        return None

    def shape(self, name: str, before: int, depth: int) -> list | None:
        """The dimensions of the tensor ``name`` holds just before ``before`` where its rebindings
        say them: each (the expression it was shaped with, the line) or None; None if unknown."""
        earlier = [binding for binding in self.stores.get(name, []) if binding[1] < before]
        if not earlier or depth > _MAX_DEPTH:
            return None
        value, line = max(earlier, key=lambda binding: binding[1])
        if value is None or id(value) not in self.top:
            return None  # a binding that may not run (in a branch or a loop) says nothing
        return self._shape_of(value, line, depth + 1)

    def _shape_of(self, expr: ast.expr, line: int, depth: int) -> list | None:
        if isinstance(expr, ast.Name):
            return self.shape(expr.id, line, depth)
        if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute) or expr.keywords:
            return None
        method, args = expr.func.attr, expr.args
        if method in _RESHAPES:
            if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
                args = args[0].elts
            if any(isinstance(a, ast.Starred) for a in args):
                return None
            return [None if _constant(a) == -1 else (a, line) for a in args]
        inner = self._shape_of(expr.func.value, line, depth + 1)
        if method in _SAME_SHAPE or inner is None:
            return inner
        axes = [_constant(a) for a in args]
        if not all(type(a) is int and -len(inner) <= a < len(inner) for a in axes):
            return None
        axes = [a % len(inner) for a in axes]
        if method == "transpose" and len(axes) == 2:
            swapped = list(inner)
            swapped[axes[0]], swapped[axes[1]] = inner[axes[1]], inner[axes[0]]
            return swapped
        if method == "permute" and sorted(axes) == list(range(len(inner))):
            return [inner[a] for a in axes]
        return None


def _frames(model: ModuleModel, site, params: list[str]) -> list[_Frame]:
    """The launching function's frame, then its callers' in the module (one call up); none where
    the launch's arguments are not a tuple written there (``_site_tuple``)."""
    function = model.node_of(site.scope)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    stores = _stores(model, function, site.scope)
    top = _top_values(function)
    written = _site_tuple(function, site.args, site.call.lineno, stores, top)
    if written is None:
        return []
    elts, shadowed, line = written
    passed: dict[str, str] = {}
    for i, a in enumerate(elts[: len(params)]):
        if isinstance(a, ast.Starred):
            break  # the elements after it have no known position
        if isinstance(a, ast.Name) and a.id not in shadowed:
            passed[a.id] = params[i]
    frames = [_Frame(stores, passed, line, top)]
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
        frames.append(_Frame(_stores(model, caller, scope), caller_passed, node.lineno, _top_values(caller)))
    return frames


def _site_tuple(
    function: ast.AST, args: ast.expr | None, line: int, stores: dict[str, list], top: set[int]
) -> tuple[list[ast.expr], set[str], int] | None:
    """The tuple a launch's arguments are, as written in ``function``: at the site, through a name
    bound once to it, or returned by a function defined in ``function``'s body
    (``def args_fn(cfg): return (a, b, cfg.TILE)`` and ``args_fn(best)`` at the site). Its elements,
    the names in them that are not ``function``'s (that function's parameters), and the line it is
    evaluated on (tensors rebound after it are not the ones passed); None if not so written."""
    if isinstance(args, ast.Name):
        args, line = _bound_once(args.id, line, stores, top) or (None, line)
    if isinstance(args, ast.Tuple):
        return args.elts, set(), line
    if not isinstance(args, ast.Call) or not isinstance(args.func, ast.Name):
        return None
    name = args.func.id
    for _ in range(_MAX_DEPTH):  # `make = args_fn` before `make(cfg)`
        alias = _bound_once(name, line, stores, top)
        if alias is None or not isinstance(alias[0], ast.Name):
            break
        name = alias[0].id
    nested = [s for s in getattr(function, "body", []) if isinstance(s, ast.FunctionDef) and s.name == name]
    if len(nested) != 1 or len(stores.get(name, [])) != 1 or nested[0].lineno >= line:
        return None  # not one def of the name, made before the call, in the function's own body
    fn = nested[0]
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    if fn.decorator_list or len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    if not isinstance(body[0].value, ast.Tuple):
        return None
    # its own names (a parameter, a walrus) are not the launching function's
    return body[0].value.elts, parameter_names(fn) | bound_names(body[0]), line


def _bound_once(
    name: str, before: int, stores: dict[str, list], top: set[int]
) -> tuple[ast.expr, int] | None:
    """The value of ``name``'s one binding, a statement of the function's own made before ``before``."""
    bindings = stores.get(name, [])
    if len(bindings) != 1:
        return None
    value, line = bindings[0]
    return (value, line) if value is not None and id(value) in top and line < before else None


def _top_values(function: ast.AST) -> set[int]:
    """The values (by id) the function body's own assignments bind: not one in a branch or a loop,
    nor on the line of an ``if`` (``if flag: q = q.view(...)``)."""
    return {
        id(s.value)
        for s in getattr(function, "body", [])
        if isinstance(s, ast.Assign) and len(s.targets) == 1
    }


def _constant(expr: ast.expr) -> object:
    """An int constant's value (``-1`` included); None for anything else."""
    if (
        isinstance(expr, ast.UnaryOp)
        and isinstance(expr.op, ast.USub)
        and isinstance(expr.operand, ast.Constant)
    ):
        value = expr.operand.value
        return -value if type(value) is int else None
    return expr.value if isinstance(expr, ast.Constant) and type(expr.value) is int else None


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
        # plain assignments in the function, made before the launch (or the read it feeds), all
        # of one value (`Q_A, K_A, M = a.shape` in one branch, `Q_A, M, K_A = a.shape` in the other)
        if not bindings or any(value is None or line >= before for value, line in bindings):
            raise _NotOverTensors
        values = [_resolve(value, stores, passed, line, depth + 1) for value, line in bindings]
        if len({ast.unparse(v) for v in values}) != 1:
            raise _NotOverTensors
        return values[0]
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
