"""The reference's module as the direct reader sees it: its functions and ``@ct.kernel`` functions,
its constants, the checkout modules it imports callees from, which calls reach a ``ct.launch``,
and the small pure helpers the wrapper inlines."""

from __future__ import annotations

import ast
from pathlib import Path

from bot.infer.launch.syntax import returning_body
from bot.infer.reference.op import ModuleIndex, ModuleLoader, module_assignments
from bot.infer.syntax import bind, is_call, plain_assign, substitute

MAX_INLINE = 4  # callee depth


class ReferenceModule(ModuleIndex):
    """The reference's module index (functions, autograd Functions, ``callee``), with its
    ``@ct.kernel`` functions and constants."""

    def __init__(self, tree: ast.Module, loader: ModuleLoader | None = None, rel: Path | None = None):
        super().__init__(tree)
        self.loader, self.rel = loader, rel
        # `from tilegym.ops.cutile.splitk_reduce import splitk_reduce`: name -> (module, level, name)
        self.imports = {
            (a.asname or a.name): (n.module, n.level, a.name)
            for n in tree.body
            if isinstance(n, ast.ImportFrom)
            for a in n.names
        }
        self._imported: dict[tuple, ReferenceModule | None] = {}
        self.torch_aliases = torch_aliases(tree)
        self.kernels = {
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and any("kernel" in ast.unparse(d) for d in n.decorator_list)
        }
        self.constants = module_assignments(tree, ast.Constant)
        # `logger = get_logger(__name__)` (or `logging.getLogger(...)`): a call on it only logs
        self.loggers = {
            name
            for name, value in module_assignments(tree, ast.Call).items()
            if _called_name(value.func) in ("get_logger", "getLogger")
        } | {"logging"}

    def log_call(self, stmt: ast.stmt) -> bool:
        """Whether ``stmt`` is ``logger.debug(...)`` (any level) on one of the module's loggers:
        it writes a log line, nothing the launch reads."""
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        return (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in _LOG_LEVELS
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id in self.loggers
        )

    def kernel_behind(self, value: ast.expr) -> ast.FunctionDef | None:
        """The one ``@ct.kernel`` module function a helper call hands back (a tuned copy of it), or
        that ``_kernel.replace_hints(...)`` retunes; either side of ``tuned if hints else _kernel``
        when both are that one kernel."""
        if isinstance(value, ast.IfExp):
            sides = [self.functions.get(s.id) if isinstance(s, ast.Name) and s.id in self.kernels
                     else self.kernel_behind(s) for s in (value.body, value.orelse)]  # fmt: skip
            return sides[0] if sides[0] is not None and sides[0] is sides[1] else None
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "replace_hints"
            and isinstance(func.value, ast.Name)
        ):
            return self.functions[func.value.id] if func.value.id in self.kernels else None
        if not isinstance(func, ast.Name):
            return None
        handed = [a for a in value.args if isinstance(a, ast.Name) and a.id in self.kernels]
        if len(handed) == 1:  # `cached_replace_hints(_kernel, **hints)`: that kernel, retuned
            return self.functions[handed[0].id]
        helper = self.functions.get(value.func.id)
        if helper is None or helper.name in self.kernels:
            return None
        named = {n.id for n in ast.walk(helper) if isinstance(n, ast.Name) and n.id in self.kernels}
        return self.functions[named.pop()] if len(named) == 1 else None

    def resolve(self, call: ast.Call) -> tuple[ast.FunctionDef, int, ReferenceModule] | None:
        """The function a call runs, the parameters it leaves unfilled, and the module it lives in:
        this one, or one of the checkout's modules this one imports it from."""
        target = self.callee(call)
        if target is not None:
            return target[0], target[1], self
        name = getattr(call.func, "id", "")
        if name not in self.imports or self.loader is None or self.rel is None:
            return None
        module, level, attr = self.imports[name]
        key = (module, level)
        if key not in self._imported:
            loaded = self.loader.load(self.rel, module, level)
            self._imported[key] = ReferenceModule(loaded[0], self.loader, loaded[1]) if loaded else None
        other = self._imported[key]
        fn = other.functions.get(attr) if other is not None else None
        return (fn, 0, other) if fn is not None else None

    def launches(self, fn: ast.FunctionDef, depth: int = 0) -> bool:
        """Whether ``fn`` reaches a ``ct.launch``, itself or through callees."""
        return self.launch_count(fn, depth) > 0

    def launch_count(self, fn: ast.FunctionDef, depth: int = 0) -> int:
        """How many ``ct.launch`` calls ``fn`` reaches, itself or through callees (each call once)."""
        count = 0
        for node in ast.walk(fn):
            if is_launch(node):
                count += 1
            elif depth < MAX_INLINE and isinstance(node, ast.Call):
                target = self.resolve(node)
                if target is not None and target[0] is not fn:
                    count += target[2].launch_count(target[0], depth + 1)
        return count

    def launched_kernels(self, fn: ast.FunctionDef, depth: int = 0) -> set[str]:
        """The kernels ``fn`` launches, itself or through callees, each as written in its launch."""
        names: set[str] = set()
        for node in ast.walk(fn):
            if is_launch(node):
                names |= self._kernels_in(fn, node.args[2])
            elif depth < MAX_INLINE and isinstance(node, ast.Call):
                target = self.resolve(node)
                if target is not None and target[0] is not fn:
                    names |= target[2].launched_kernels(target[0], depth + 1)
        return names

    def _kernels_in(self, fn: ast.FunctionDef, kernel: ast.expr) -> set[str]:
        """The module kernels a launch's kernel argument names, itself or through the values ``fn``
        assigns it (``k = cached_replace_hints(_k, **hints) if hints else _k``); else its text."""
        values = [kernel]
        if isinstance(kernel, ast.Name) and kernel.id not in self.kernels:
            values += [s.value for s in ast.walk(fn) if plain_assign(s) and s.targets[0].id == kernel.id]
        named = {
            n.id for v in values for n in ast.walk(v) if isinstance(n, ast.Name) and n.id in self.kernels
        }
        return named or {ast.unparse(kernel)}

    def pure_helper(self, call: ast.Call) -> ast.expr | None:
        """A module function made of single assignments (a tuple unpacked too), early returns under
        ``if c:`` and one last ``return``, inlined at ``call`` (the early returns as ``x if c else``)."""
        fn = self.functions.get(getattr(call.func, "id", ""))
        if fn is None or self.launches(fn) or call.keywords:
            return None
        body = returning_body(fn)
        if body is None:
            return None
        local: dict[str, ast.expr] = {}
        early: list[tuple[ast.expr, ast.expr]] = []  # (condition, value) of each `if c: return v`
        for stmt in body[:-1]:
            if _early_return(stmt):
                early.append((substitute(stmt.test, local, {}), substitute(stmt.body[0].value, local, {})))
                continue
            # a value set after an early return is read only after it: in that return's `else`
            if _unpacks(stmt):
                bind(stmt.targets[0], substitute(stmt.value, local, {}), local)  # `major, _ = f()`
                continue
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
        value = substitute(body[-1].value, local, {})
        for test, returned in reversed(early):
            value = ast.IfExp(test=test, body=returned, orelse=value)
        return substitute(value, {}, dict(zip(params, call.args, strict=True)))


def _early_return(stmt: ast.stmt) -> bool:
    """``if c: return v`` with nothing else."""
    return (
        isinstance(stmt, ast.If)
        and not stmt.orelse
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], ast.Return)
        and stmt.body[0].value is not None
    )


def _unpacks(stmt: ast.stmt) -> bool:
    """``a, b = v`` onto plain names."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Tuple)
        and all(isinstance(e, ast.Name) for e in stmt.targets[0].elts)
    )


def _update(stmt: ast.stmt, local: dict[str, ast.expr]) -> tuple[str, ast.expr] | None:
    """``x = v`` or ``x op= v`` on a plain name: (x, its new value over the earlier ones)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, substitute(stmt.value, local, {})
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in local:
        value = ast.BinOp(left=local[stmt.target.id], op=stmt.op, right=substitute(stmt.value, local, {}))
        return stmt.target.id, value
    return None


def torch_aliases(tree: ast.Module) -> dict[str, str]:
    """Names the module imports from torch under a name of their own, with their full name
    (``import torch.nn.functional as F``, ``from torch.nn import functional as F``: F ->
    torch.nn.functional): the wrapper imports only ``torch`` and spells them out."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name.split(".")[0] == "torch":
                    out[a.asname] = a.name
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "torch"
        ):
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def is_launch(node: ast.AST) -> bool:
    """``ct.launch(stream, grid, kernel, args)``."""
    return isinstance(node, ast.Call) and is_call(node, "launch") and len(node.args) >= 4


_LOG_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})


def _called_name(func: ast.expr) -> str:
    """``get_logger`` for ``get_logger`` and ``logging.getLogger`` alike."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""
