"""Facts from a cuTile reference that launches its kernel directly: ``ct.launch(stream, grid, kernel, args)``.

Most TileGym ops (dropout, splitk_reduce, layer_norm_legacy, rope, flash_decode) have this shape,
often behind an ``autograd.Function`` and a helper or two. The reader follows the registered
function into those callees (their parameters bound by ``let`` steps), keeps every statement
before the launch as a wrapper step, and then maps the launch's arguments onto the reference
kernel's parameters by position and from there onto kernel.rs by name:

- a kernel.rs const generic (``TILE_D``, or its twin ``BLOCK_D``) gets the argument as its C
  argument's Python value, ``int(...)`` (a Python ``bool`` flag feeds an ``i32`` generic);
- a kernel.rs scalar of the same name (case aside: ``S_kv`` ~ ``S_KV``, ``P`` ~ ``p``) gets it too,
  so a runtime scalar such as ``eps`` or ``sm_scale`` has its value;
- a kernel.rs tensor of the same name is packed from the argument (``x_flat``); an output is
  whatever the reference writes into: an allocation, a caller's tensor (in place), or either
  (``output = x if inplace else torch.empty_like(x)``);
- the grid gives ``num_programs`` or ``grid_x/y/z``; the returned expression the result.

Control flow the wrapper can say too is kept: ``if not training: return x`` (an early return),
``if inplace: a = x else: a = ...`` (a conditional value), ``if x is None: x = c``, asserts. A
small pure helper of the module (``_mix_seed``) is inlined into the expression that calls it.
Anything else is not guessed: the reader stops and says which line.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from bot.infer import naming
from bot.infer.facts import Facts
from bot.infer.launch_ast import (
    NotThisShape,
    assert_step,
    bind,
    ceil_to_cdiv,
    generic_twin,
    is_call,
    none_default,
    num_sms,
    substitute,
)
from bot.infer.reference import ModuleIndex, ReferenceOp, read_with, registered_function
from bot.types import Entry, KernelSignature, Source, Target

KEYS = ("python.steps", "python.alloc", "python.tensors", "python.result")
_MAX_INLINE = 4  # callee depth
# names a generated wrapper has without importing anything of the reference module
_WRAPPER_NAMES = {"torch", "cdiv", "next_power_of_2", "get_num_sm", "None", "True", "False"}
_BUILTINS = {
    "int",
    "float",
    "bool",
    "min",
    "max",
    "abs",
    "len",
    "tuple",
    "list",
    "range",
    "round",
    "isinstance",
}


@dataclass
class Direct:
    function: str  # "<name>():<line>" of the registered function
    launch_line: int
    steps: list[dict[str, str]]
    tensors: dict[str, str]  # C tensor -> Python expression packed into it
    outputs: dict[str, str]  # output C tensor -> the variable that holds it
    args: dict[str, tuple[str, str]]  # C argument -> (Python value, what it comes from)
    result: str
    tensor_params: list[str] = field(default_factory=list)  # wrapper parameters read as tensors
    unmatched: list[str] = field(default_factory=list)  # reference parameters kernel.rs has no twin of


def gather(target: Target, signature: KernelSignature | None, facts: Facts, ref: ReferenceOp) -> None:
    reading = read_with(read_tree, ref, signature, facts, KEYS)
    if reading is None:
        return
    rel = ref.rel

    def where(what: str) -> Source:
        return Source("reference", f"{rel}: {what}")

    launch = f"ct.launch:{reading.launch_line}"
    # reference parameters kernel.rs has no twin of are said, not silently dropped
    dropped = f"; not in kernel.rs: {', '.join(reading.unmatched)}" if reading.unmatched else ""
    facts.offer("python.steps", reading.steps, where(f"{reading.function} before {launch}{dropped}"))
    facts.offer(
        "python.alloc", {v: v for v in reading.outputs.values()}, where(f"outputs written by {launch}")
    )
    facts.offer("python.tensors", reading.tensors, where(f"arguments of {launch}"))
    if reading.result:
        facts.offer("python.result", reading.result, where(f"{reading.function} returns it"))
    if reading.tensor_params:
        facts.offer("python.tensor_params", reading.tensor_params, where(f"parameters packed by {launch}"))
    for name, (value, what) in reading.args.items():
        facts.offer(f"python.args.{name}", value, where(f"{launch} {what}"))


def read_tree(tree: ast.Module, name: str, signature: KernelSignature) -> Direct | None:
    """The reading of a reference that reaches one ``ct.launch``; None when it reaches none."""
    fn = registered_function(tree, name)
    if fn is None or len(signature.entries) != 1:
        return None
    module = _Module(tree)
    if not module.launches(fn):
        return None
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    flat = _Flattener(module, name, params)
    flat.result = flat.walk(fn, depth=0)
    if flat.launch is None:
        raise NotThisShape(f"{fn.name}() reaches ct.launch only through a path the reader does not follow")
    return _map_launch(flat, module, signature.entries[0], fn)


class _Module(ModuleIndex):
    """The reference's module index (functions, autograd Functions, ``callee``), with its
    ``@ct.kernel`` functions and constants."""

    def __init__(self, tree: ast.Module):
        super().__init__(tree)
        self.kernels = {
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and any("kernel" in ast.unparse(d) for d in n.decorator_list)
        }
        self.constants = {
            n.targets[0].id: n.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Constant)
        }

    def kernel_behind(self, value: ast.expr) -> ast.FunctionDef | None:
        """The one ``@ct.kernel`` module function a helper call hands back (a tuned copy of it)."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            return None
        helper = self.functions.get(value.func.id)
        if helper is None or helper.name in self.kernels:
            return None
        named = {n.id for n in ast.walk(helper) if isinstance(n, ast.Name) and n.id in self.kernels}
        return self.functions[named.pop()] if len(named) == 1 else None

    def launches(self, fn: ast.FunctionDef, depth: int = 0) -> bool:
        """Whether ``fn`` reaches a ``ct.launch``, itself or through callees."""
        for node in ast.walk(fn):
            if _is_launch(node):
                return True
            if depth < _MAX_INLINE and isinstance(node, ast.Call):
                target = self.callee(node)
                if target is not None and target[0] is not fn and self.launches(target[0], depth + 1):
                    return True
        return False

    def pure_helper(self, call: ast.Call) -> ast.expr | None:
        """A module function made of single assignments and one ``return``, inlined at ``call``."""
        fn = self.functions.get(getattr(call.func, "id", ""))
        if fn is None or self.launches(fn) or call.keywords:
            return None
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return None
        local: dict[str, ast.expr] = {}
        for stmt in body[:-1]:
            update = _update(stmt, local)
            if update is None and isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1:
                inner = _update(stmt.body[0], local)  # `if c: x -= k` keeps x otherwise
                if inner is not None and inner[0] in local:
                    test = substitute(stmt.test, local, {})
                    update = (inner[0], ast.IfExp(test=test, body=inner[1], orelse=local[inner[0]]))
            if update is None:
                return None
            local[update[0]] = update[1]
        params = [a.arg for a in fn.args.args]
        if len(call.args) != len(params):
            return None
        return substitute(body[-1].value, local, dict(zip(params, call.args, strict=True)))


def _update(stmt: ast.stmt, local: dict[str, ast.expr]) -> tuple[str, ast.expr] | None:
    """``x = v`` or ``x op= v`` on a plain name: (x, its new value over the earlier ones)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, substitute(stmt.value, local, {})
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in local:
        value = ast.BinOp(left=local[stmt.target.id], op=stmt.op, right=substitute(stmt.value, local, {}))
        return stmt.target.id, value
    return None


def _is_launch(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and is_call(node, "launch") and len(node.args) >= 4


def _is_ctx(stmt: ast.stmt) -> bool:
    """``ctx.mark_dirty(x)``, ``ctx.p = p``: autograd bookkeeping the forward-only wrapper drops."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return ast.unparse(stmt.value.func).startswith("ctx.")
    if isinstance(stmt, ast.Assign):
        return all(ast.unparse(t).startswith("ctx.") for t in stmt.targets)
    return False


class _Flattener:
    """The statements on the way to the launch, as wrapper steps, with callees inlined."""

    def __init__(self, module: _Module, op: str, params: list[str]):
        self.module = module
        self.op = op
        self.bound = set(params)  # names with a value at this point of the wrapper
        self.kernel_vars: dict[str, ast.expr] = {}  # `kernel = _select(...)`: the tuned kernel object
        self.steps: list[dict[str, str]] = []
        self.local: dict[str, ast.expr] = {}  # name -> value, for reading the launch's tuples
        self.launch: ast.Call | None = None
        self.result: ast.expr | None = None

    def walk(self, fn: ast.FunctionDef, depth: int) -> ast.expr | None:
        """Steps for ``fn``'s body; returns what ``fn`` returns after the launch."""
        returned: ast.expr | None = None
        for stmt in fn.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) or _is_ctx(stmt):
                continue  # docstring, autograd bookkeeping
            if self.launch is not None:  # after the launch: only the return matters
                if isinstance(stmt, ast.Return):
                    returned = stmt.value
                    break
                raise NotThisShape(f"line {stmt.lineno}: `{_first_line(stmt)}` after the launch")
            if isinstance(stmt, ast.Expr) and _is_launch(stmt.value):
                self.launch = stmt.value
                continue
            call = _inlinable_call(stmt)
            if call is not None and self._reaches_launch(call):
                if depth >= _MAX_INLINE:
                    raise NotThisShape(f"line {stmt.lineno}: the launch is deeper than {_MAX_INLINE} calls")
                value = self._inline(call, depth)
                if isinstance(stmt, ast.Return):
                    returned = value
                    break
                if isinstance(stmt, ast.Assign) and value is not None:
                    if self.launch is not None and not _same_names(stmt.targets[0], value):
                        # a value the callee returns after its launch: the wrapper's steps all run
                        # before the launch, so only handing the same names back can be said
                        raise NotThisShape(
                            f"line {stmt.lineno}: `{_first_line(stmt)}` is computed after the launch"
                        )
                    if self.launch is None:
                        self._let(stmt.targets[0], value)
                continue
            self._statement(stmt)
        return returned

    def _reaches_launch(self, call: ast.Call) -> bool:
        target = self.module.callee(call)
        return target is not None and self.module.launches(target[0])

    def _inline(self, call: ast.Call, depth: int) -> ast.expr | None:
        callee, skip = self.module.callee(call)
        params = [a.arg for a in callee.args.posonlyargs + callee.args.args][skip:]
        defaults = dict(zip(reversed(params), reversed(callee.args.defaults), strict=False))
        given = dict(zip(params, call.args, strict=False))
        given.update({k.arg: k.value for k in call.keywords if k.arg in params})
        for param in params:
            value = given.get(param, defaults.get(param))
            if value is None:
                raise NotThisShape(f"line {call.lineno}: {callee.name}() gets no value for {param}")
            if not (isinstance(value, ast.Name) and value.id == param):
                self._let(ast.Name(param, ast.Store()), value)
            self.bound.add(param)
        return self.walk(callee, depth + 1)

    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            if "current_stream" in ast.unparse(stmt.value):
                return  # the wrapper launches on the stream of the tensors' device itself
            kernel = self.module.kernel_behind(stmt.value)
            if kernel is not None and isinstance(stmt.targets[0], ast.Name):
                # `kernel = _select_rope_kernel(...)`: autotuning picks compile hints; the
                # launcher takes the kernel itself, so the wrapper needs no such step
                self.kernel_vars[stmt.targets[0].id] = kernel
                return
            self._let(stmt.targets[0], stmt.value)
            return
        if isinstance(stmt, ast.Assert):
            self.steps.append(assert_step(stmt, "", self.op))
            return
        if isinstance(stmt, ast.If):
            raised = _raised(stmt)
            if raised is not None:  # `if N > MAX: raise RuntimeError("...")`: the same check
                error, message = raised
                self.steps.append({"check": self._expr(stmt.test), "raise": error, "message": message})
                return
            early = _early_return(stmt)
            if early is not None:
                self.steps.append({"return": self._expr(early), "when": self._expr(stmt.test)})
                return
            default = none_default(stmt)
            if default is not None:
                name, value = default
                self.steps.append({"let": name, "expr": f"{value} if {name} is None else {name}"})
                return
            branches = _conditional_value(stmt)
            if branches is not None:
                target, yes, no = branches
                value = ast.IfExp(test=stmt.test, body=yes, orelse=no)
                self._let(ast.Name(target, ast.Store()), value)
                return
            if self._guarded_block(stmt):
                return
        raise NotThisShape(f"line {stmt.lineno}: cannot follow `{_first_line(stmt)}`")

    def _guarded_block(self, stmt: ast.If) -> bool:
        """``if c:`` over plain assignments and asserts, no else: each assignment keeps the name's
        value otherwise (``None`` for a name the branch introduces), each assert holds under ``c``."""
        body = [s for s in stmt.body if not _is_ctx(s)]
        simple = all(
            (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name))
            or isinstance(s, ast.Assert)
            for s in body
        )
        if stmt.orelse or not body or not simple:
            return False
        test = stmt.test
        if sum(isinstance(s, ast.Assign) for s in body) > 1:
            # the branch is decided once: a later assignment must not see an earlier one's effect
            flag = ast.Name(f"_branch_{stmt.lineno}", ast.Store())
            self._let(flag, stmt.test)
            test = ast.Name(flag.id, ast.Load())
        condition = self._expr(test)
        for s in body:
            if isinstance(s, ast.Assert):
                self.steps.append(assert_step(s, condition, self.op))
                continue
            name = s.targets[0].id
            keep = ast.Name(name, ast.Load()) if name in self.bound else ast.Constant(None)
            self._let(ast.Name(name, ast.Store()), ast.IfExp(test=test, body=s.value, orelse=keep))
        return True

    def _let(self, target: ast.expr, value: ast.expr) -> None:
        if not isinstance(target, (ast.Name, ast.Tuple)):
            raise NotThisShape(f"line {value.lineno}: cannot assign to `{ast.unparse(target)}`")
        value = self._inline_helpers(value)
        bind(target, value, self.local)
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        self.bound |= {ast.unparse(n) for n in names}
        self.steps.append({"let": ", ".join(ast.unparse(n) for n in names), "expr": self._expr(value)})

    def _inline_helpers(self, value: ast.expr) -> ast.expr:
        module = self.module

        class Inline(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                self.generic_visit(node)
                inlined = module.pure_helper(node)
                return inlined if inlined is not None else node

            def visit_Name(self, node: ast.Name) -> ast.AST:
                const = module.constants.get(node.id)
                return copy.deepcopy(const) if const is not None else node

        return Inline().visit(copy.deepcopy(value))

    def _expr(self, node: ast.expr) -> str:
        return ast.unparse(_wrapper_expr(self._inline_helpers(node)))


def _same_names(target: ast.expr, value: ast.expr) -> bool:
    """``q, k = q, k``: the names handed back are the ones assigned (nothing to compute)."""
    return ast.unparse(target).strip("()") == ast.unparse(value).strip("()")


def _first_line(stmt: ast.stmt) -> str:
    return ast.unparse(stmt).splitlines()[0]


def _inlinable_call(stmt: ast.stmt) -> ast.Call | None:
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) else None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) != 1:
        return None
    return value if isinstance(value, ast.Call) else None


def _raised(stmt: ast.If) -> tuple[str, str] | None:
    """``if cond: raise SomeError("text")`` with no else: (SomeError, text)."""
    if stmt.orelse or len(stmt.body) != 1 or not isinstance(stmt.body[0], ast.Raise):
        return None
    exc = stmt.body[0].exc
    if not (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)):
        return None
    text = exc.args[0] if exc.args else None
    message = text.value if isinstance(text, ast.Constant) and isinstance(text.value, str) else exc.func.id
    return exc.func.id, message


def _early_return(stmt: ast.If) -> ast.expr | None:
    """``if cond: return x`` (autograd bookkeeping aside) with no else: the returned value."""
    body = [s for s in stmt.body if not _is_ctx(s)]
    if stmt.orelse or len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    return body[0].value


def _conditional_value(stmt: ast.If) -> tuple[str, ast.expr, ast.expr] | None:
    """``if c: a = x else: a = y`` (bookkeeping aside): (a, x, y)."""

    def single(body: list[ast.stmt]) -> tuple[str, ast.expr] | None:
        body = [s for s in body if not _is_ctx(s)]
        if len(body) == 1 and isinstance(body[0], ast.Assign) and isinstance(body[0].targets[0], ast.Name):
            return body[0].targets[0].id, body[0].value
        return None

    yes, no = single(stmt.body), single(stmt.orelse)
    if yes is None or no is None or yes[0] != no[0]:
        return None
    return yes[0], yes[1], no[1]


def _wrapper_expr(node: ast.expr) -> ast.expr:
    """The reference's spelling turned into the wrapper's: ``math.ceil(a / b)`` -> ``cdiv(a, b)``,
    the SM count query -> ``get_num_sm()``."""
    return num_sms(ceil_to_cdiv(copy.deepcopy(node)))


def _map_launch(flat: _Flattener, module: _Module, entry: Entry, fn: ast.FunctionDef) -> Direct:
    function = f"{fn.name}():{fn.lineno}"
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    launch = flat.launch
    grid = _tuple(launch.args[1], flat.local, "grid")
    kernel_name = getattr(launch.args[2], "id", "")
    kernel = flat.kernel_vars.get(kernel_name) or module.functions.get(kernel_name)
    kernel_name = kernel.name if kernel is not None else kernel_name
    if kernel is None:
        raise NotThisShape(
            f"line {launch.lineno}: kernel {ast.unparse(launch.args[2])} is not a module function"
        )
    args = _tuple(launch.args[3], flat.local, "arguments")
    ref_params = [a.arg for a in kernel.args.args]
    if len(args) != len(ref_params):
        raise NotThisShape(
            f"line {launch.lineno}: {len(args)} arguments for {kernel_name}'s {len(ref_params)}"
        )
    generics = {g.name for g in entry.generics if g.kind == "const"}
    by_lower = {p.name.lower(): p for p in entry.params}
    tensors: dict[str, str] = {}
    outputs: dict[str, str] = {}
    values: dict[str, tuple[str, str]] = {}
    unmatched: list[str] = []
    inputs: list[str] = []  # wrapper parameters the kernel reads as tensors, in kernel order
    for ref, arg in zip(ref_params, args, strict=True):
        text = flat._expr(arg)
        twin = generic_twin(ref, generics) or next((g for g in generics if g.lower() == ref.lower()), None)
        param = by_lower.get(ref.lower()) or by_lower.get(f"{ref.lower()}_ptr")
        if twin is not None:
            c_arg, _ = naming.generic_arg_name(twin)
            values[c_arg] = (f"int({text})", f"argument {ref} -> generic {twin}")
        elif param is not None and param.kind in ("tensor", "ptr"):
            c_name, _bind, _src = naming.c_tensor_name(param)
            tensors[c_name] = text
            root = _root(arg, flat.local)
            if param.name in entry.outputs:
                outputs[c_name] = root
            if root in params and root not in inputs:  # the caller's tensor, read or written in place
                inputs.append(root)
        elif param is not None:
            values[param.name] = (text, f"argument {ref} -> scalar {param.name}")
        else:
            unmatched.append(ref)
    missing = [naming.c_tensor_name(p)[0] for p in entry.params if p.kind in ("tensor", "ptr")]
    missing = [c for c in missing if c not in tensors]
    if missing:
        raise NotThisShape(
            f"line {launch.lineno}: kernel.rs tensors {', '.join(missing)} have no twin among "
            f"{kernel_name}'s parameters {', '.join(ref_params)}"
        )
    values.update(_grid_args(grid, entry, flat))
    returned = flat._expr(flat.result) if flat.result is not None else ""
    _check_names(flat, params, tensors, values, returned)
    return Direct(function, launch.lineno, flat.steps, tensors, outputs, values, returned, inputs, unmatched)


def _tuple(node: ast.expr, local: dict[str, ast.expr], what: str) -> list[ast.expr]:
    if isinstance(node, ast.Name) and node.id in local:
        node = local[node.id]
    if not isinstance(node, (ast.Tuple, ast.List)):
        raise NotThisShape(f"the launch {what} `{ast.unparse(node)}` is not a tuple")
    return list(node.elts)


_VIEWS = {"view", "reshape", "contiguous", "flatten", "view_as", "detach"}


def _root(node: ast.expr, local: dict[str, ast.expr]) -> str:
    """The variable behind ``out.view(-1)`` or ``out_flat = out.view(-1)``: what holds the output."""
    for _ in range(8):
        if isinstance(node, ast.Name) and isinstance(local.get(node.id), ast.Name):
            node = local[node.id]  # x = input: a callee's parameter bound to the caller's name
            continue
        if isinstance(node, ast.Name) and isinstance(local.get(node.id), ast.Call):
            inner = local[node.id]
        elif isinstance(node, ast.Call):
            inner = node
        else:
            break
        func = inner.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in _VIEWS
            and isinstance(func.value, (ast.Name, ast.Call))
        ):
            break
        node = func.value
    return ast.unparse(node)


def _grid_args(grid: list[ast.expr], entry: Entry, flat: _Flattener) -> dict[str, tuple[str, str]]:
    terms = [flat._expr(g) for g in grid] + ["1"] * (3 - len(grid))
    if entry.block.axes <= 1:
        if any(t != "1" for t in terms[1:]):
            raise NotThisShape(
                f"the launch grid ({', '.join(terms)}) is not 1-D, kernel.rs reads one block axis"
            )
        return {"num_programs": (terms[0], "grid")}
    return {name: (term, "grid") for name, term in zip(("grid_x", "grid_y", "grid_z"), terms, strict=True)}


def _check_names(
    flat: _Flattener, params: list[str], tensors: dict[str, str], values: dict, returned: str
) -> None:
    """Every name the wrapper evaluates must exist there: the wrapper's parameters, what a step
    binds, builtins and the wrapper's helpers. A module constant was inlined; a module function
    or global the generated wrapper does not have stops the reading, named."""
    known = set(params) | _WRAPPER_NAMES | _BUILTINS
    texts: list[str] = []
    for step in flat.steps:
        texts += [step[k] for k in ("expr", "check", "return", "when") if k in step]
        if "let" in step:
            known |= {n.strip() for n in step["let"].split(",")}
    texts += list(tensors.values()) + [v for v, _ in values.values()] + [returned]
    unknown = sorted(
        {
            n.id
            for text in texts
            if text
            for n in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(n, ast.Name) and n.id not in known
        }
    )
    if unknown:
        raise NotThisShape(f"the wrapper would need {', '.join(unknown)} of the reference module")
