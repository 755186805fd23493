"""A corpus of cuTile reference modules re-spelled: the same host code, written another way.

agent-d reads an op's cuTile reference (``tilegym/ops/cutile/<op>.py``) to learn how it launches
its kernels. Each kind below rewrites the reference's host code (functions not decorated
``@ct.kernel`` and not called by a kernel, classes, module-level code) deterministically, with the
``ast`` module, into a module that behaves exactly as the original, so that a reader that depends
on one spelling shows up:

- ``grid_helper``: a launch's grid (or the value its grid name is assigned) computed by a new
  module-level ``_grid_of(<the names it reads>)``;
- ``grid_list``: a grid tuple built as a list, then ``tuple(...)``;
- ``conditional_expr`` / ``conditional_stmt``: an if/else pair of one assignment (or return)
  each as one conditional expression, and the reverse;
- ``renamed_locals``: every local of the host functions renamed ``v0``, ``v1``...;
- ``inlined_locals`` / ``hoisted``: a local read once put into its use; a launch argument's call
  or arithmetic put into a new local;
- ``args_tuple``: a launch's argument tuple built first into ``launch_args``;
- ``nested_launch`` / ``method_launch``: a launch made by a nested ``def _go()``, or by a
  module-level class's ``@staticmethod run(stream, grid, kernel, args)``;
- ``tuple_assign``: two independent assignments in a row as one ``a, b = x, y``;
- ``early_return``: ``if c: return X`` then the rest, the rest moved into an ``else:`` (or the
  reverse);
- ``prod_spelling``: ``math.prod(s)`` <-> ``functools.reduce(operator.mul, s, 1)``,
  ``x.numel()`` -> ``math.prod(x.shape)``, a product of ints ``a * b`` -> ``math.prod((a, b))``;
- ``alias_import``: ``import cuda.tile as ct`` spelled ``as tile_lang``, every use renamed.

Kernels, and the plain functions they call, are left as they are: a top-level one keeps its
source text byte for byte (``alias_import`` alone renames the cuda.tile alias in them).

A rewrite keeps Python's semantics: the order in which side effects happen, and scoping. Where
it moves an evaluation, it moves only expressions built from names, constants, operators and
calls with no side effect (:data:`PURE_CALLS`; :data:`PURE_METHODS`, tensor methods, taken by
name); where a site is not plainly safe (a closure or an exception handler could see a name
bound at another time, a call may change what an expression reads), it is skipped. Each kind is
a function ``module_source -> new_source | None`` (None: no site of that kind in the module),
listed in :data:`KINDS`; :func:`respellings` gives every kind that applied, with ``all``, every
kind one after the other (but ``conditional_stmt``, which would undo ``conditional_expr``).

Not re-spelled: ``x.flatten()`` <-> ``x.reshape(-1)`` (the same for a torch tensor, not for a
NumPy array, and the receiver's type is not known from the text).

At the end, :func:`record`: a module and its re-spellings run on a CPU with every ``ct.launch``
recorded, in the interpreter that has torch and cuda.tile (this module imports only the standard
library). Nothing of TileGym is kept here: the references are read from the wheel at test time.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Three references kept apart as an outside measure: never read, never re-spelled.
HELD_OUT = ("chunk_gated_delta_rule", "recurrent_gated_delta_rule", "fused_linear_cross_entropy")
REFERENCES = "tilegym/ops/cutile"

# Calls and methods with no side effect, whose evaluation may move (canonical dotted names).
PURE_CALLS = frozenset(
    {f"builtins.{n}" for n in ("len", "min", "max", "int", "float", "bool", "abs", "round", "tuple", "str")}
    | {"math.ceil", "math.floor", "math.prod", "math.sqrt", "math.log2", "torch.cuda.current_stream"}
)
PURE_METHODS = frozenset(
    {"stride", "size", "numel", "dim", "element_size", "is_contiguous", "contiguous", "view", "reshape"}
)
# Calls whose value is a Python int, given int (or any, for the shape reads) arguments.
_INT_CALLS = frozenset({"builtins.len", "builtins.int", "math.ceil", "math.floor"})
_INT_METHODS = frozenset({"numel", "dim", "element_size"})
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)

_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_INTROSPECTION = frozenset({"locals", "vars", "eval", "exec", "dir", "globals"})


# --------------------------------------------------------------------------- the module as read


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _names(tree: ast.AST) -> tuple[dict[str, int], set[str]]:
    """How many places bind each name, anywhere in the module; and every name the module spells
    (names, parameters, attributes, keywords, definitions)."""
    count: dict[str, int] = {}
    spelled: set[str] = set()

    def bind(name: str) -> None:
        count[name] = count.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            spelled.add(node.id)
            if not isinstance(node.ctx, ast.Load):
                bind(node.id)
        elif isinstance(node, ast.Attribute):
            spelled.add(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            spelled.add(node.arg)
            if isinstance(node, ast.arg):
                bind(node.arg)
        elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            bind(node.name)
        elif isinstance(node, ast.alias):
            bind(node.asname or node.name.split(".")[0])
            spelled.add(node.name)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bind(name)
    return count, spelled | set(count)


@dataclass
class Module:
    """A reference module parsed once, with what every kind needs to know about it."""

    source: str
    tree: ast.Module
    origins: dict[str, str]  # a top-level import's name -> what it imports ("ceil" -> "math.ceil")
    bindings: dict[str, int]
    device: set[int]  # ids of kernel functions and the plain functions they call
    kept_text: dict[int, str]  # id of a top-level device function -> its source text
    taken: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, source: str) -> Module:
        tree = ast.parse(source)
        origins: dict[str, str] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                for a in stmt.names:
                    origins[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for a in stmt.names:
                    origins[a.asname or a.name] = f"{stmt.module}.{a.name}"
        bindings, spelled = _names(tree)
        mod = cls(source, tree, origins, bindings, set(), {}, spelled)
        mod.device = _device_functions(mod)
        lines = source.splitlines(keepends=True)
        for stmt in tree.body:
            if id(stmt) in mod.device:
                first = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
                mod.kept_text[id(stmt)] = "".join(lines[first - 1 : stmt.end_lineno]).rstrip("\n")
        return mod

    def canonical(self, node: ast.AST) -> str | None:
        """What a called name or attribute chain stands for: ``builtins.len``, ``math.ceil``,
        ``cuda.tile.launch``; None when a binding other than one top-level import could change it."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.origins and self.bindings.get(head, 0) == 1:
            base = self.origins[head]
        elif hasattr(builtins, head) and head not in self.bindings:
            base = f"builtins.{head}"
        else:
            return None
        return f"{base}.{rest}" if rest else base

    def is_launch(self, call: ast.AST) -> bool:
        return isinstance(call, ast.Call) and self.canonical(call.func) == "cuda.tile.launch"

    def fresh(self, stem: str) -> str:
        """A name no part of the module spells yet: ``stem``, else ``stem_1``, ``stem_2``..."""
        name, i = stem, 0
        while name in self.taken:
            i += 1
            name = f"{stem}_{i}"
        self.taken.add(name)
        return name

    def render(self) -> str:
        """The module as source: host code unparsed, each top-level device function as it was."""
        pieces = []
        for stmt in self.tree.body:
            text = self.kept_text.get(id(stmt))
            pieces.append(text if text is not None else ast.unparse(stmt))
        return "\n\n".join(pieces) + "\n"


def _device_functions(mod: Module) -> set[int]:
    """Functions decorated ``@ct.kernel`` / ``@ct.kernel(...)``, and the module's functions they
    call by name (a kernel's helpers are kernel code, not host code), transitively."""
    top = {s.name: s for s in mod.tree.body if isinstance(s, _FUNCTIONS)}
    device: dict[int, ast.AST] = {}
    for node in ast.walk(mod.tree):
        if isinstance(node, _FUNCTIONS) and any(_is_kernel_decorator(mod, d) for d in node.decorator_list):
            device[id(node)] = node
        elif isinstance(node, ast.Call) and _is_kernel_decorator(mod, node.func) and node.args:
            target = node.args[0]
            if isinstance(target, ast.Name) and target.id in top:  # ct.kernel(fn)
                device[id(top[target.id])] = top[target.id]
    todo = list(device.values())
    while todo:
        fn = todo.pop()
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in top:
                callee = top[node.func.id]
                if id(callee) not in device:
                    device[id(callee)] = callee
                    todo.append(callee)
    return set(device)


def _is_kernel_decorator(mod: Module, node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    return mod.canonical(node) == "cuda.tile.kernel"


# --------------------------------------------------------------------------- host statement lists


@dataclass
class Block:
    """One list of host statements, with the function it runs in (None: module or class body)."""

    stmts: list[ast.stmt]
    function: ast.FunctionDef | ast.AsyncFunctionDef | None
    in_loop: bool  # inside a loop of that function
    in_class: bool  # directly a class body
    in_try: bool  # inside a try statement of that function (its handlers see the locals)


def host_blocks(mod: Module) -> list[Block]:
    found: list[Block] = []

    def visit(stmts, function, in_loop, in_class, in_try):
        found.append(Block(stmts, function, in_loop, in_class, in_try))
        for s in stmts:
            if isinstance(s, _FUNCTIONS):
                if id(s) not in mod.device:
                    visit(s.body, s, False, False, False)
            elif isinstance(s, ast.ClassDef):
                visit(s.body, None, False, True, False)
            elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
                visit(s.body, function, True, False, in_try)
                visit(s.orelse, function, in_loop, False, in_try)
            elif isinstance(s, ast.If):
                visit(s.body, function, in_loop, False, in_try)
                visit(s.orelse, function, in_loop, False, in_try)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                visit(s.body, function, in_loop, False, in_try)
            elif isinstance(s, (ast.Try, ast.TryStar)):
                for part in (s.body, *(h.body for h in s.handlers), s.orelse):
                    visit(part, function, in_loop, False, True)
                visit(s.finalbody, function, in_loop, False, in_try)
            elif isinstance(s, ast.Match):
                for case in s.cases:
                    visit(case.body, function, in_loop, False, in_try)

    visit(mod.tree.body, None, False, False, False)
    return [b for b in found if b.stmts]


def host_functions(mod: Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every host function, outer ones first."""
    return [b.function for b in host_blocks(mod) if b.function is not None and b.stmts is b.function.body]


@dataclass
class LaunchSite:
    block: Block
    stmt: ast.Expr
    call: ast.Call


def launch_sites(mod: Module) -> list[LaunchSite]:
    """Statements ``ct.launch(stream, grid, kernel, args)``: four positional arguments, nothing else."""
    sites = []
    for block in host_blocks(mod):
        for stmt in block.stmts:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if (
                mod.is_launch(call)
                and len(call.args) == 4
                and not call.keywords
                and not any(isinstance(a, ast.Starred) for a in call.args)
            ):
                sites.append(LaunchSite(block, stmt, call))
    return sites


def _top_statement(mod: Module, node: ast.AST) -> ast.stmt:
    for stmt in mod.tree.body:
        if any(n is node for n in ast.walk(stmt)):
            return stmt
    raise ValueError("node not in module")


def _index(stmts: list[ast.stmt], stmt: ast.stmt) -> int:
    return next(i for i, s in enumerate(stmts) if s is stmt)


def _replace(root: ast.AST, old: ast.AST, new: ast.AST) -> None:
    """Put ``new`` where ``old`` (found by identity) is inside ``root``."""
    for parent in ast.walk(root):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return
    raise ValueError("node not found")


def _load(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def _assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value, lineno=0)


# --------------------------------------------------------------------------- scopes


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes a function, lambda or comprehension evaluates or binds in its own scope. A scope
    nested in it is yielded itself (its name, decorators, defaults and first iterable are
    evaluated here), not its inside."""
    if isinstance(scope, _FUNCTIONS):
        roots: list[ast.AST] = list(scope.body)
    elif isinstance(scope, ast.Lambda):
        roots = [scope.body]
    else:
        gens = scope.generators
        roots = [scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt]
        for i, gen in enumerate(gens):
            roots += [gen.target, *gen.ifs] + ([gen.iter] if i else [])
    todo = list(reversed(roots))
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, _SCOPES):
            todo += reversed(_outer_parts(node))
        else:
            todo += reversed(list(ast.iter_child_nodes(node)))


def _outer_parts(scope: ast.AST) -> list[ast.AST]:
    """The parts of a nested scope its enclosing scope evaluates."""
    if isinstance(scope, _FUNCTIONS):
        a = scope.args
        every = (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
        notes = [x.annotation for x in every if x is not None and x.annotation is not None]
        return [*scope.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d), *notes] + (
            [scope.returns] if scope.returns else []
        )
    if isinstance(scope, ast.Lambda):
        return [*scope.args.defaults, *(d for d in scope.args.kw_defaults if d)]
    return [scope.generators[0].iter]


def _params(scope: ast.AST) -> set[str]:
    if not isinstance(scope, (*_FUNCTIONS, ast.Lambda)):
        return set()
    a = scope.args
    return {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x}


def _bound_here(scope: ast.AST) -> set[str]:
    """Names the scope binds: parameters, assignment targets, loop and ``as`` names, imports,
    nested definitions."""
    names = _params(scope)
    for node in _own_nodes(scope):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
    return names


def owners(scope: ast.AST) -> dict[int, ast.AST | None]:
    """For each name read or bound inside ``scope`` (nested scopes included): the scope that binds
    it, by node id; None for a module-level or builtin name (or one of a scope around ``scope``)."""
    found: dict[int, ast.AST | None] = {}

    def visit(s: ast.AST, outer: dict[str, ast.AST]) -> None:
        env = dict(outer)
        env.update(dict.fromkeys(_bound_here(s), s))
        for node in _own_nodes(s):
            if isinstance(node, ast.Name):
                found[id(node)] = env.get(node.id)
            elif isinstance(node, _SCOPES):
                visit(node, env)

    visit(scope, {})
    return found


def is_plain(mod: Module, function: ast.AST) -> bool:
    """A function whose names a rewrite may reason about: no ``global``/``nonlocal``, no ``:=``,
    no class or ``match`` inside, no kernel inside, no ``locals()`` and its kin."""
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal, ast.NamedExpr, ast.ClassDef, ast.Match)):
            return False
        if isinstance(node, ast.Name) and node.id in _INTROSPECTION:
            return False
        if node is not function and id(node) in mod.device:
            return False
    return True


def _names_read(node: ast.AST) -> list[str]:
    """Names the expression reads, in order of first appearance in the source."""
    seen: dict[str, None] = {}
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name):
            seen.setdefault(n.id, None)
        todo += reversed(list(ast.iter_child_nodes(n)))
    return list(seen)


# --------------------------------------------------------------------------- side effects


def is_pure(mod: Module, node: ast.AST | None) -> bool:
    """An expression whose evaluation changes nothing (it may still raise): names, constants,
    operators, attribute reads, subscripts, displays, and calls of :data:`PURE_CALLS` and
    :data:`PURE_METHODS`."""
    if node is None:
        return True
    if isinstance(node, ast.Call):
        head = mod.canonical(node.func)
        if head in PURE_CALLS:
            receiver_ok = True
        elif isinstance(node.func, ast.Attribute) and node.func.attr in PURE_METHODS:
            receiver_ok = is_pure(mod, node.func.value)
        else:
            return False
        return receiver_ok and all(is_pure(mod, x) for x in (*node.args, *(k.value for k in node.keywords)))
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    allowed = (
        ast.Attribute,
        ast.Subscript,
        ast.Slice,
        ast.BinOp,
        ast.UnaryOp,
        ast.BoolOp,
        ast.Compare,
        ast.IfExp,
        ast.Tuple,
        ast.List,
        ast.Set,
        ast.Dict,
        ast.Starred,
        ast.JoinedStr,
        ast.FormattedValue,
        ast.expr_context,
        ast.operator,
        ast.unaryop,
        ast.boolop,
        ast.cmpop,
    )
    if not isinstance(node, allowed):
        return False
    return all(is_pure(mod, child) for child in ast.iter_child_nodes(node))


def _all_pure(mod: Module, nodes: list[ast.AST]) -> bool:
    return all(is_pure(mod, n) for n in nodes)


def _opaque(node: ast.AST) -> bool:
    """Holds something a moved or wrapped expression must not carry: ``:=``, ``yield``, ``await``,
    a lambda or comprehension, ``super`` or a private (mangled) name."""
    for n in ast.walk(node):
        if isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, *_SCOPES)):
            return True
        if isinstance(n, ast.Name) and (n.id == "super" or n.id.startswith("__")):
            return True
    return False


# --------------------------------------------------------------------------- the kinds


def _changed(mod: Module, count: int) -> str | None:
    return mod.render() if count else None


def grid_helper(source: str) -> str | None:
    """A launch's grid expression moved into a module-level ``_grid_of(...)`` taking the names it reads."""
    mod = Module.parse(source)
    done: set[int] = set()
    count = 0
    for site in launch_sites(mod):
        grid = site.call.args[1]
        holder: ast.AST = site.call
        if isinstance(grid, ast.Name):  # `grid = (...)` earlier in the same block
            earlier = site.block.stmts[: _index(site.block.stmts, site.stmt)]
            assigns = [
                s
                for s in earlier
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and dotted(s.targets[0]) == grid.id
            ]
            if not assigns or id(assigns[-1]) in done:
                continue
            holder, grid = assigns[-1], assigns[-1].value
        if _opaque(grid) or isinstance(grid, ast.Name):
            continue
        if any(isinstance(n, (ast.IfExp, ast.BoolOp)) for n in ast.walk(grid)):
            continue  # every name is now read at the call: one a branch skipped may be unbound
        names = _names_read(grid)
        helper = mod.fresh("_grid_of")
        args = ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]
        )
        body: list[ast.stmt] = [ast.Return(value=copy.deepcopy(grid))]
        definition = ast.FunctionDef(name=helper, args=args, body=body, decorator_list=[], lineno=0)
        top = _top_statement(mod, site.stmt)
        _replace(holder, grid, ast.Call(func=_load(helper), args=[_load(n) for n in names], keywords=[]))
        mod.tree.body.insert(_index(mod.tree.body, top), definition)
        done.add(id(holder))
        count += 1
    return _changed(mod, count)


def grid_list(source: str) -> str | None:
    """A grid tuple literal built as a list first, then ``tuple(items)``."""
    mod = Module.parse(source)
    if "tuple" in mod.bindings:
        return None
    count = 0
    for site in launch_sites(mod):
        stmts = site.block.stmts
        grid, holder, where = site.call.args[1], site.call, site.stmt
        if isinstance(grid, ast.Name):  # `grid = (...)` earlier: the list is built where the tuple was
            earlier = stmts[: _index(stmts, site.stmt)]
            assigns = [
                s
                for s in earlier
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and dotted(s.targets[0]) == grid.id
            ]
            if not assigns:
                continue
            where = holder = assigns[-1]
            grid = holder.value
            hoist = True
        else:  # built before the launch statement, its items then come before the stream argument
            hoist = is_pure(mod, site.call.args[0]) and is_pure(mod, grid)
        if not isinstance(grid, ast.Tuple) or any(isinstance(e, ast.Starred) for e in grid.elts):
            continue
        items = ast.List(elts=grid.elts, ctx=ast.Load())
        if hoist and site.block.function is not None:  # a new local, never a new global
            name = mod.fresh("grid_items")
            stmts.insert(_index(stmts, where), _assign(name, items))
            built: ast.expr = _load(name)
        else:
            built = items
        _replace(holder, grid, ast.Call(func=_load("tuple"), args=[built], keywords=[]))
        count += 1
    return _changed(mod, count)


def conditional_expr(source: str) -> str | None:
    """``if c: x = a`` / ``else: x = b`` turned into ``x = a if c else b`` (and ``if c: return a`` /
    ``else: return b`` into ``return a if c else b``)."""
    mod = Module.parse(source)
    count = 0
    for block in host_blocks(mod):
        for i, stmt in enumerate(block.stmts):
            if not (isinstance(stmt, ast.If) and len(stmt.body) == 1 and len(stmt.orelse) == 1):
                continue
            then, other = stmt.body[0], stmt.orelse[0]
            if isinstance(then, ast.Return) and isinstance(other, ast.Return) and block.function is not None:
                none = ast.Constant(value=None)
                chosen = ast.IfExp(test=stmt.test, body=then.value or none, orelse=other.value or none)
                block.stmts[i] = ast.Return(value=chosen)
                count += 1
                continue
            if not all(isinstance(s, ast.Assign) and len(s.targets) == 1 for s in (then, other)):
                continue
            target = then.targets[0]
            if not isinstance(target, ast.Name) or not isinstance(other.targets[0], ast.Name):
                continue
            if target.id != other.targets[0].id:
                continue
            chosen = ast.IfExp(test=stmt.test, body=then.value, orelse=other.value)
            block.stmts[i] = ast.Assign(targets=[target], value=chosen, lineno=stmt.lineno)
            count += 1
    return _changed(mod, count)


def conditional_stmt(source: str) -> str | None:
    """``x = a if c else b`` turned into ``if c: x = a`` / ``else: x = b`` (the reverse of
    ``conditional_expr``)."""
    mod = Module.parse(source)
    count = 0
    for block in host_blocks(mod):
        for i, stmt in enumerate(block.stmts):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, value = stmt.targets[0], stmt.value
            if not isinstance(target, ast.Name) or not isinstance(value, ast.IfExp):
                continue
            then = ast.Assign(targets=[target], value=value.body, lineno=stmt.lineno)
            other = ast.Assign(targets=[copy.deepcopy(target)], value=value.orelse, lineno=stmt.lineno)
            block.stmts[i] = ast.If(test=value.test, body=[then], orelse=[other])
            count += 1
    return _changed(mod, count)


def renamed_locals(source: str) -> str | None:
    """Every local variable of the host functions renamed ``v0``, ``v1``...; parameters stay."""
    mod = Module.parse(source)
    counter = [0]

    def next_name() -> str:
        while f"v{counter[0]}" in mod.taken:
            counter[0] += 1
        return mod.fresh(f"v{counter[0]}")

    count = 0
    for function in host_functions(mod):
        if not is_plain(mod, function):
            continue
        kept = _params(function)
        for node in _own_nodes(function):  # imports and definitions keep their names
            if isinstance(node, ast.alias):
                kept.add(node.asname or node.name.split(".")[0])
            elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
                kept.add(node.name)
        local = sorted(_bound_here(function) - kept, key=lambda n: (_first_use(function, n), n))
        if not local:
            continue
        new = {name: next_name() for name in local}
        owner = owners(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and owner.get(id(node)) is function and node.id in new:
                node.id = new[node.id]
        for node in _own_nodes(function):
            if isinstance(node, ast.ExceptHandler) and node.name in new:
                node.name = new[node.name]
        count += len(new)
    return _changed(mod, count)


def _first_use(function: ast.AST, name: str) -> tuple[int, int]:
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id == name:
            return (node.lineno, node.col_offset)
    return (0, 0)


def inlined_locals(source: str) -> str | None:
    """A local assigned once and read once (the next statements, not in a loop) inlined into its use."""
    mod = Module.parse(source)
    count = 0
    for function in host_functions(mod):
        if not is_plain(mod, function):
            continue
        while _inline_one(mod, function):
            count += 1
    return _changed(mod, count)


def _inline_one(mod: Module, function: ast.AST) -> bool:
    owner = owners(function)
    stores: dict[str, list[ast.Name]] = {}
    loads: dict[str, list[ast.Name]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and owner.get(id(node)) is function:
            (loads if isinstance(node.ctx, ast.Load) else stores).setdefault(node.id, []).append(node)
    other_bindings = _params(function)  # bound otherwise than by a name target
    for node in _own_nodes(function):
        if isinstance(node, ast.alias):
            other_bindings.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.ExceptHandler)) and node.name:
            other_bindings.add(node.name)
    for block in host_blocks(mod):
        if block.function is not function or block.in_loop or block.in_try:
            continue
        for i, stmt in enumerate(block.stmts):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target = stmt.targets[0]
            if not isinstance(target, ast.Name) or target.id in other_bindings:
                continue
            name, value = target.id, stmt.value
            if len(stores.get(name, [])) != 1 or len(loads.get(name, [])) != 1:
                continue
            if not is_pure(mod, value) or _opaque(value) or name in _names_read(value):
                continue
            use = loads[name][0]
            later = _inline_target(mod, block.stmts[i + 1 :], use, set(_names_read(value)))
            if later is None:
                continue
            _replace(later, use, copy.deepcopy(value))
            del block.stmts[i]
            return True
    return False


def _inline_target(mod: Module, rest: list[ast.stmt], use: ast.Name, reads: set[str]) -> ast.stmt | None:
    """The statement of ``rest`` holding ``use`` when inlining there moves nothing observable:
    the statements before it only bind other names to pure values, and inside it the use is
    evaluated once, unconditionally, after nothing but pure evaluation."""
    for stmt in rest:
        if any(n is use for n in ast.walk(stmt)):
            break
        if not (isinstance(stmt, ast.Assign) and is_pure(mod, stmt.value)):
            return None
        for target in stmt.targets:
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            if not all(isinstance(t, ast.Name) and t.id not in reads for t in elts):
                return None
    else:
        return None
    if not isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) or _opaque(stmt):
        return None
    path = _path_to(stmt, use)
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, ast.BoolOp) and child is not parent.values[0]:
            return None
        if isinstance(parent, ast.IfExp) and child is not parent.test:
            return None
    order = _evaluation_order(stmt)
    before = order[: next(k for k, n in enumerate(order) if n is use)]
    if not all(is_pure(mod, n) for n in before if isinstance(n, ast.Call)):
        return None
    return stmt


def _evaluation_order(root: ast.AST) -> list[ast.AST]:
    """The nodes of a statement in the order Python finishes evaluating them (children first; an
    assignment's value before its targets, a dict's keys and values in turn)."""
    order: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            children: list[ast.AST] = [node.value, *node.targets]
        elif isinstance(node, ast.Dict):
            children = [x for k, v in zip(node.keys, node.values) for x in (k, v) if x is not None]
        elif isinstance(node, ast.Call):
            children = [node.func, *node.args, *(k.value for k in node.keywords)]
        else:
            children = list(ast.iter_child_nodes(node))
        for child in children:
            visit(child)
        order.append(node)

    visit(root)
    return order


def _path_to(root: ast.AST, node: ast.AST) -> list[ast.AST]:
    """The nodes from ``root`` down to ``node``, both included."""
    if root is node:
        return [root]
    for child in ast.iter_child_nodes(root):
        below = _path_to(child, node)
        if below:
            return [root, *below]
    return []


def hoisted(source: str) -> str | None:
    """A launch argument's call or arithmetic (``x.stride(0)``, ``a * b``) hoisted into a local before it."""
    mod = Module.parse(source)
    count = 0
    for site in launch_sites(mod):
        if site.block.function is None:
            continue
        stream, grid, kernel, args = site.call.args
        # what the launch evaluates, in order, each with the node holding it
        ordered: list[tuple[ast.expr, ast.AST]] = [(stream, site.call)]
        ordered += [(e, grid) for e in grid.elts] if isinstance(grid, ast.Tuple) else [(grid, site.call)]
        ordered += [(kernel, site.call)]
        ordered += [(e, args) for e in args.elts] if isinstance(args, ast.Tuple) else [(args, site.call)]
        for k, (candidate, holder) in enumerate(ordered):
            if k == 0 or not isinstance(candidate, (ast.Call, ast.BinOp)):
                continue
            if _opaque(candidate) or not _all_pure(mod, [e for e, _ in ordered[: k + 1]]):
                break
            name = mod.fresh("hoisted")
            _replace(holder, candidate, _load(name))
            stmts = site.block.stmts
            stmts.insert(_index(stmts, site.stmt), _assign(name, candidate))
            count += 1
            break
    return _changed(mod, count)


def args_tuple(source: str) -> str | None:
    """A launch's arguments tuple built first into ``launch_args``, passed by name."""
    mod = Module.parse(source)
    count = 0
    for site in launch_sites(mod):
        args = site.call.args[3]
        if site.block.function is None or not isinstance(args, ast.Tuple):
            continue
        if not _all_pure(mod, site.call.args) or _opaque(args):  # the tuple now comes first
            continue
        name = mod.fresh("launch_args")
        site.call.args[3] = _load(name)
        stmts = site.block.stmts
        stmts.insert(_index(stmts, site.stmt), _assign(name, args))
        count += 1
    return _changed(mod, count)


def nested_launch(source: str) -> str | None:
    """A launch moved into a nested ``def _go(): ct.launch(...)`` defined just before, called in its place."""
    mod = Module.parse(source)
    count = 0
    for site in launch_sites(mod):
        if site.block.function is None or _opaque(site.call):
            continue
        name = mod.fresh("_go")
        empty = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        definition = ast.FunctionDef(name=name, args=empty, body=[site.stmt], decorator_list=[], lineno=0)
        call = ast.Expr(value=ast.Call(func=_load(name), args=[], keywords=[]))
        stmts = site.block.stmts
        i = _index(stmts, site.stmt)
        stmts[i : i + 1] = [definition, call]
        count += 1
    return _changed(mod, count)


def method_launch(source: str) -> str | None:
    """A launch made through a module-level class's ``@staticmethod run(stream, grid, kernel, args)``."""
    mod = Module.parse(source)
    sites = launch_sites(mod)
    spelled = {dotted(s.call.func) for s in sites}
    if len(spelled) != 1 or "staticmethod" in mod.bindings:
        return None
    launch = ast.parse(spelled.pop(), mode="eval").body
    params = ["stream", "grid", "kernel", "args"]
    body = ast.Expr(value=ast.Call(func=launch, args=[_load(p) for p in params], keywords=[]))
    args = ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=p) for p in params], kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    run = ast.FunctionDef(
        name="run", args=args, body=[body], decorator_list=[_load("staticmethod")], lineno=0
    )
    name = mod.fresh("_Launcher")
    holder = ast.ClassDef(name=name, bases=[], keywords=[], body=[run], decorator_list=[])
    first = min(_index(mod.tree.body, _top_statement(mod, s.stmt)) for s in sites)
    for site in sites:
        site.call.func = ast.Attribute(value=_load(name), attr="run", ctx=ast.Load())
    mod.tree.body.insert(first, holder)
    return _changed(mod, len(sites))


def tuple_assign(source: str) -> str | None:
    """Two consecutive independent assignments ``a = x`` / ``b = y`` merged into ``a, b = x, y``."""
    mod = Module.parse(source)
    count = 0
    for function in host_functions(mod):
        if not is_plain(mod, function):
            continue
        owner = owners(function)
        closed_over = {  # locals a nested scope reads: they could see `a` bound early or late
            n.id
            for scope in ast.walk(function)
            if scope is not function and isinstance(scope, _SCOPES)
            for n in ast.walk(scope)
            if isinstance(n, ast.Name) and owner.get(id(n)) is function
        }
        for block in host_blocks(mod):
            if block.function is not function or block.in_try:  # a handler could see `a` unbound
                continue
            i = 0
            while i + 1 < len(block.stmts):
                first, second = block.stmts[i], block.stmts[i + 1]
                if _mergeable(first, second, closed_over):
                    targets = [first.targets[0], second.targets[0]]
                    block.stmts[i : i + 2] = [
                        ast.Assign(
                            targets=[ast.Tuple(elts=targets, ctx=ast.Store())],
                            value=ast.Tuple(elts=[first.value, second.value], ctx=ast.Load()),
                            lineno=first.lineno,
                        )
                    ]
                    count += 1
                i += 1
    return _changed(mod, count)


def _mergeable(first: ast.stmt, second: ast.stmt, closed_over: set[str]) -> bool:
    if not all(isinstance(s, ast.Assign) and len(s.targets) == 1 for s in (first, second)):
        return False
    a, b = first.targets[0], second.targets[0]
    if not (isinstance(a, ast.Name) and isinstance(b, ast.Name)) or a.id == b.id:
        return False
    # `y` is now evaluated before `a` is bound: it must not read `a`, nor reach it through a closure
    return a.id not in _names_read(second.value) and a.id not in closed_over and not _opaque(second.value)


def early_return(source: str) -> str | None:
    """``if c: return X`` followed by the rest, given an ``else:`` holding the rest (or the reverse)."""
    mod = Module.parse(source)
    count = 0
    for block in host_blocks(mod):
        if block.function is None:
            continue
        stmts = block.stmts

        def exits(s: ast.stmt) -> bool:
            return isinstance(s, ast.If) and isinstance(s.body[-1], (ast.Return, ast.Raise))

        wrap = [i for i, s in enumerate(stmts[:-1]) if exits(s) and not s.orelse]
        unwrap = [i for i, s in enumerate(stmts) if exits(s) and s.orelse]
        if wrap:
            i = wrap[0]
            stmts[i].orelse = stmts[i + 1 :]
            del stmts[i + 1 :]
        elif unwrap:
            i = unwrap[0]
            rest = stmts[i].orelse
            stmts[i].orelse = []
            stmts[i + 1 : i + 1] = rest
        else:
            continue
        count += 1
    return _changed(mod, count)


def prod_spelling(source: str) -> str | None:
    """A product spelled another way: ``math.prod(s)`` <-> ``functools.reduce(operator.mul, s, 1)``,
    ``x.numel()`` -> ``math.prod(x.shape)``, a product of ints ``a * b`` -> ``math.prod((a, b))``."""
    mod = Module.parse(source)
    importable = set()  # modules the new spellings may name: imported already, or free to import
    for name in ("math", "functools", "operator"):
        if (mod.origins.get(name) == name and mod.bindings.get(name) == 1) or name not in mod.taken:
            importable.add(name)
    if "math" not in importable:
        return None
    products = _Products(mod, importable)
    for function in [None, *host_functions(mod)]:
        products.respell(function)
    if not products.count:
        return None
    for name in sorted(products.used, reverse=True):
        if mod.origins.get(name) != name:
            mod.tree.body.insert(_first_code(mod.tree), ast.Import(names=[ast.alias(name=name)]))
    return mod.render()


def _first_code(tree: ast.Module) -> int:
    """Where a new import goes: after the docstring and ``from __future__`` imports."""
    i = 0
    while i < len(tree.body):
        s = tree.body[i]
        docstring = i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
        if not (docstring or (isinstance(s, ast.ImportFrom) and s.module == "__future__")):
            break
        i += 1
    return i


class _Products(ast.NodeTransformer):
    """The product sites of one host function's own code at a time (``None``: module-level code)."""

    def __init__(self, mod: Module, importable: set[str]) -> None:
        self.mod = mod
        self.importable = importable
        self.used: set[str] = set()
        self.count = 0
        self.function: ast.AST | None = None
        self.owner: dict[int, ast.AST | None] = {}
        self.ints: set[str] = set()

    def respell(self, function: ast.AST | None) -> None:
        if function is None:  # module-level code, once the modules it may name are imported
            body = self.mod.tree.body
            imports = [
                i
                for i, s in enumerate(body)
                if isinstance(s, ast.Import) and {a.name for a in s.names} & {"math", "functools", "operator"}
            ]
            roots = [
                s
                for s in body[max(imports, default=-1) + 1 :]
                if not isinstance(s, (*_FUNCTIONS, ast.ClassDef))
                and not any(id(n) in self.mod.device for n in ast.walk(s))
            ]
            self.owner, self.ints = {}, set()
        elif is_plain(self.mod, function):
            roots = list(function.body)
            self.owner = owners(function)
            self.ints = _int_locals(self.mod, function, self.owner)
        else:
            return
        self.function = function
        for root in roots:
            self.visit(root)  # statements stay; only expressions inside them are replaced

    def visit_FunctionDef(self, node):  # a nested host function is respelled as a function of its own
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_BinOp(self, node):
        factors = _factors(node)
        if len(factors) < 2 or _opaque(node):
            return self.generic_visit(node)
        if not all(_is_int(self.mod, f, self.function, self.owner, self.ints) for f in factors):
            return self.generic_visit(node)
        return self._prod(ast.Tuple(elts=[self.visit(f) for f in factors], ctx=ast.Load()))

    def visit_Call(self, node):
        head = self.mod.canonical(node.func)
        simple = not node.keywords and not _opaque(node)
        if (
            head == "math.prod"
            and len(node.args) == 1
            and simple
            and {"functools", "operator"} <= self.importable
        ):
            self.used |= {"functools", "operator"}
            self.count += 1
            reduce = ast.parse("functools.reduce", mode="eval").body
            mul = ast.parse("operator.mul", mode="eval").body
            return ast.Call(
                func=reduce, args=[mul, self.visit(node.args[0]), ast.Constant(value=1)], keywords=[]
            )
        if head == "functools.reduce" and simple and _is_mul_from_one(self.mod, node):
            return self._prod(self.visit(node.args[1]))
        if isinstance(node.func, ast.Attribute) and node.func.attr == "numel" and not node.args and simple:
            return self._prod(ast.Attribute(value=self.visit(node.func.value), attr="shape", ctx=ast.Load()))
        return self.generic_visit(node)

    def _prod(self, iterable: ast.expr) -> ast.Call:
        self.used.add("math")
        self.count += 1
        return ast.Call(func=ast.parse("math.prod", mode="eval").body, args=[iterable], keywords=[])


def _is_mul_from_one(mod: Module, call: ast.Call) -> bool:
    """``reduce(operator.mul, s, 1)``: a product from 1, as ``math.prod(s)`` computes it."""
    if len(call.args) != 3:
        return False
    op, _, start = call.args
    return (
        mod.canonical(op) == "operator.mul"
        and isinstance(start, ast.Constant)
        and type(start.value) is int
        and start.value == 1
    )


def _factors(node: ast.BinOp) -> list[ast.expr]:
    """``a * b * c`` as ``[a, b, c]`` (left to right, as Python multiplies them)."""
    if not isinstance(node.op, ast.Mult):
        return []
    left = _factors(node.left) if isinstance(node.left, ast.BinOp) else []
    return [*(left or [node.left]), node.right]


def _is_int(mod: Module, node: ast.AST, function: ast.AST | None, owner: dict, known: set[str]) -> bool:
    """An expression whose value is a Python int: int constants, ``known`` locals of ``function``,
    :func:`_is_int_read` reads, and ``+ - * // %`` of those."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Name):
        return function is not None and owner.get(id(node)) is function and node.id in known
    if isinstance(node, ast.BinOp):
        return (
            isinstance(node.op, _INT_OPS)
            and _is_int(mod, node.left, function, owner, known)
            and _is_int(mod, node.right, function, owner, known)
        )
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and _is_int(
            mod, node.operand, function, owner, known
        )
    return _is_int_read(mod, node)


def _is_int_read(mod: Module, node: ast.AST) -> bool:
    """A read whose value is a Python int: ``x.shape[i]``, ``x.size(i)``, ``x.stride(i)``,
    ``x.numel()``, ``x.dim()``, ``len(s)``, ``math.ceil(v)``, ``int(v)``."""
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            index = index.operand
        return (
            _is_shape(node.value)
            and is_pure(mod, node.value)
            and isinstance(index, ast.Constant)
            and type(index.value) is int
        )
    if not isinstance(node, ast.Call) or node.keywords or not is_pure(mod, node):
        return False
    if mod.canonical(node.func) in _INT_CALLS:
        return len(node.args) == 1
    if isinstance(node.func, ast.Attribute):
        if node.func.attr in _INT_METHODS:
            return not node.args
        if node.func.attr in ("size", "stride"):
            return len(node.args) == 1
    return False


def _int_locals(mod: Module, function: ast.AST, owner: dict[int, ast.AST | None]) -> set[str]:
    """The function's locals that only ever hold Python ints: each binding an assignment of an int
    expression (:func:`_is_int`) or an unpacking of ``x.shape``, or an int ``+= -= *= //= %=``."""
    values: dict[str, list[ast.AST | None]] = {}  # name -> the values bound to it (None: not an int)
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
                elif isinstance(target, ast.Tuple) and _is_shape(node.value):
                    for t in target.elts:
                        if isinstance(t, ast.Name):
                            values.setdefault(t.id, []).append(ast.Constant(value=0))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            ok = isinstance(node.op, _INT_OPS)
            values.setdefault(node.target.id, []).append(
                ast.BinOp(left=node.target, op=node.op, right=node.value) if ok else None
            )
    stores: dict[str, int] = {}  # every binding by a name target (loops, `with ... as`, `del`)
    for node in _own_nodes(function):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
    known = {
        n
        for n, bound in values.items()
        if n not in _params(function) and None not in bound and stores.get(n) == len(bound)
    }
    while True:  # the largest set whose every binding is an int, given the set
        keep = {n for n in known if all(_is_int(mod, v, function, owner, known) for v in values[n])}
        if keep == known:
            return known
        known = keep


def _is_shape(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "shape"


def alias_import(source: str) -> str | None:
    """``import cuda.tile as ct`` re-spelled ``as tile_lang``, every use renamed, kernels included."""
    mod = Module.parse(source)
    found = [
        (stmt, a)
        for stmt in mod.tree.body
        if isinstance(stmt, ast.Import)
        for a in stmt.names
        if a.name == "cuda.tile" and a.asname
    ]
    if len(found) != 1:
        return None
    _, alias = found[0]
    old = alias.asname
    if mod.bindings.get(old) != 1 or "globals" in mod.taken:
        return None
    new = mod.fresh("tile_lang")
    alias.asname = new
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
    for stmt in mod.tree.body:  # the kept kernel text, renamed token by token where that is exact
        if id(stmt) in mod.kept_text:
            text = _renamed_tokens(mod.kept_text[id(stmt)], old, new)
            same = text is not None and ast.dump(ast.parse(text).body[0]) == ast.dump(stmt)
            mod.kept_text[id(stmt)] = text if same else ast.unparse(stmt)
    return mod.render()


def _renamed_tokens(text: str, old: str, new: str) -> str | None:
    """``text`` with each name token ``old`` (not an attribute, not a keyword argument) renamed."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE)]
    places = []
    for k, tok in enumerate(significant):
        if tok.type != tokenize.NAME or tok.string != old:
            continue
        before = significant[k - 1].string if k else ""
        after = significant[k + 1].string if k + 1 < len(significant) else ""
        if before == "." or after == "=" and before in ("(", ","):
            continue
        places.append(tok.start)
    lines = text.split("\n")
    for row, col in sorted(places, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old) :]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the corpus


KINDS: tuple[str, ...] = (
    "grid_helper",
    "grid_list",
    "conditional_expr",
    "conditional_stmt",
    "renamed_locals",
    "inlined_locals",
    "hoisted",
    "args_tuple",
    "nested_launch",
    "method_launch",
    "tuple_assign",
    "early_return",
    "prod_spelling",
    "alias_import",
)
REWRITES: dict[str, Callable[[str], str | None]] = {
    "grid_helper": grid_helper,
    "grid_list": grid_list,
    "conditional_expr": conditional_expr,
    "conditional_stmt": conditional_stmt,
    "renamed_locals": renamed_locals,
    "inlined_locals": inlined_locals,
    "hoisted": hoisted,
    "args_tuple": args_tuple,
    "nested_launch": nested_launch,
    "method_launch": method_launch,
    "tuple_assign": tuple_assign,
    "early_return": early_return,
    "prod_spelling": prod_spelling,
    "alias_import": alias_import,
}
ALL = "all"


def every_kind(source: str) -> str | None:
    """Every kind that applies, one after the other, in the order of :data:`KINDS` (but
    ``conditional_stmt``)."""
    current, applied = source, False
    for kind in KINDS:
        if kind == "conditional_stmt":  # it would undo conditional_expr
            continue
        new = REWRITES[kind](current)  # a kind returns None unless it rewrote a site
        if new is not None:
            current, applied = new, True
    return current if applied else None


def respellings(module_source: str) -> dict[str, str]:
    """Each kind (and ``all``) that applied to the module and changed it -> the new source."""
    return dict(_respellings(module_source))


@functools.lru_cache(maxsize=32)  # the table and the tests ask for the same modules
def _respellings(module_source: str) -> tuple[tuple[str, str], ...]:
    original = ast.dump(ast.parse(module_source))
    found = []
    for kind, rewrite in [*REWRITES.items(), (ALL, every_kind)]:
        new = rewrite(module_source)
        if new is not None and ast.dump(ast.parse(new)) != original:
            found.append((kind, new))
    return tuple(found)


def kernel_dumps(source: str, alias_as: str = "") -> list[str]:
    """``ast.dump`` of every function decorated ``@ct.kernel``, in order; with ``alias_as``, the
    cuda.tile alias of the module spelled that way first (to compare across ``alias_import``)."""
    mod = Module.parse(source)
    alias = next((a.asname for a in _cuda_tile_aliases(mod.tree)), None)
    dumps = []
    for node in ast.walk(mod.tree):
        if isinstance(node, _FUNCTIONS) and any(_is_kernel_decorator(mod, d) for d in node.decorator_list):
            node = copy.deepcopy(node)
            if alias_as and alias:
                for n in ast.walk(node):
                    if isinstance(n, ast.Name) and n.id == alias:
                        n.id = alias_as
            dumps.append(ast.dump(node))
    return dumps


def _cuda_tile_aliases(tree: ast.Module) -> list[ast.alias]:
    return [
        a
        for s in tree.body
        if isinstance(s, ast.Import)
        for a in s.names
        if a.name == "cuda.tile" and a.asname
    ]


# --------------------------------------------------------------------------- the references


def reference_files(wheel_root: Path) -> list[Path]:
    """The wheel's cuTile reference modules, the held-out three left out by file name unread."""
    root = wheel_root / REFERENCES
    return sorted(
        p
        for p in root.rglob("*.py")
        if p.name != "__init__.py" and not any(held in p.stem for held in HELD_OUT)
    )


def find_reference(wheel_root: Path, op: str) -> Path | None:
    """The op's reference: the module named ``<op>.py``, else the one holding ``register_impl("<op>"``."""
    if any(held in op for held in HELD_OUT):
        return None
    files = reference_files(wheel_root)
    named = [p for p in files if p.stem == op]
    if named:
        return named[0]
    mark = re.compile(r"register_impl\(\s*[\"']" + re.escape(op) + r"[\"']")
    return next((p for p in files if mark.search(p.read_text(encoding="utf-8"))), None)


def table(wheel_root: Path, ops: list[str] | None = None) -> list[tuple[str, str]]:
    """``(op, kind)`` for each kind that re-spelled the op's reference (``ops``: by default the
    fixture ops and the five cutile-rs ops of the wheel)."""
    rows = []
    for op in ops if ops is not None else corpus_ops():
        path = find_reference(wheel_root, op)
        if path is None:
            continue
        applied = respellings(path.read_text(encoding="utf-8"))
        rows += [(op, kind) for kind in (*KINDS, ALL) if kind in applied]
    return rows


FIXTURE_KERNELS = Path(__file__).parent / "fixtures" / "tilegym_ops"
WHEEL_OPS = ("silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink")


def corpus_ops() -> list[str]:
    """The ops whose references the corpus re-spells: ``tests/fixtures/tilegym_ops/<op>_kernel``
    and the wheel's five cutile-rs ops."""
    fixture = sorted(
        d.name.removesuffix("_kernel") for d in FIXTURE_KERNELS.iterdir() if d.name.endswith("_kernel")
    )
    ops = fixture + [op for op in WHEEL_OPS if op not in fixture]
    return [op for op in ops if not any(held in op for held in HELD_OUT)]


def registered_functions(source: str, op: str) -> list[str]:
    """The module's functions decorated ``register_impl("<op>", backend="cutile")``; where none is
    registered under the op's own name, every function it registers for cutile."""
    found: list[tuple[str, str]] = []
    for node in ast.parse(source).body:
        if not isinstance(node, _FUNCTIONS):
            continue
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and dotted(d.func) == "register_impl" and d.args:
                name = d.args[0].value if isinstance(d.args[0], ast.Constant) else None
                backend = next((k.value.value for k in d.keywords if k.arg == "backend"), None)
                if isinstance(name, str) and backend == "cutile":
                    found.append((name, node.name))
    own = [fn for name, fn in found if name == op]
    return own or [fn for _, fn in found]


# --------------------------------------------------------------------------- launches recorded
#
# Run in the interpreter with torch and cuda.tile (tests/checkout_support.py's torch_python()),
# not the suite's: only the standard library is imported at module level above.

# Inputs built without knowing the op: every required parameter annotated int, float or bool gets
# a small value of that type, every other one a float32 tensor of one shape, the shapes tried in
# this order until a call launches.
GENERIC_SHAPES = ((64, 64), (4, 64), (2, 64, 64), (1, 2, 64, 64))
_SCALARS = {"int": 2, "float": 0.5, "bool": False}
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def record(jobs_file: str, out_file: str, agent_d_root: str, wheel_root: str) -> None:
    """Each job's sources executed as its module and its registered functions called on generic
    inputs, every ``ct.launch`` recorded (bot/dryrun/plugin.py's CPU shim and recorder)."""
    import json
    import os
    import sys

    os.environ["TILEGYM_DISABLE_AUTOTUNE"] = "1"  # the first config, as the dry run launches
    sys.path[:0] = [agent_d_root, wheel_root]
    import torch

    import bot.dryrun.plugin as plugin  # importing it installs the shim and the recorder

    _zeroed_allocations(torch)
    _bare_packages(Path(wheel_root))
    jobs = json.loads(Path(jobs_file).read_text(encoding="utf-8"))
    results = {}
    for job in jobs:
        results[job["op"]] = {
            label: _run_module(plugin, torch, job, Path(path)) for label, path in job["sources"].items()
        }
    results["held_out_imported"] = sorted(m for m in sys.modules if any(h in m for h in HELD_OUT))
    Path(out_file).write_text(json.dumps(results, indent=1, sort_keys=True, default=repr), encoding="utf-8")


def _zeroed_allocations(torch) -> None:
    """``torch.empty`` and its kin give zeros: the recorded digests of outputs then repeat."""
    for name in ("empty", "empty_like", "empty_strided"):
        allocate = getattr(torch, name)

        def zeroed(*args, _allocate=allocate, **kwargs):
            tensor = _allocate(*args, **kwargs)
            with torch.no_grad():
                return tensor.zero_()

        setattr(torch, name, zeroed)


def _bare_packages(wheel_root: Path) -> None:
    """``tilegym``, ``tilegym.ops`` and the reference packages as bare packages: their
    ``__init__`` would import every reference module, the held-out ones included."""
    import sys
    import types

    for name in ("tilegym", "tilegym.ops", "tilegym.ops.cutile"):
        package = types.ModuleType(name)
        package.__path__ = [str(wheel_root / name.replace(".", "/"))]
        sys.modules[name] = package
    for folder in sorted((wheel_root / REFERENCES).iterdir()):
        if folder.is_dir() and (folder / "__init__.py").is_file():
            name = "tilegym.ops.cutile." + folder.name
            package = types.ModuleType(name)
            package.__path__ = [str(folder)]
            sys.modules[name] = package


def _run_module(plugin, torch, job: dict, path: Path) -> dict:
    """One source run as the job's module: what its registered functions launched, per input tried."""
    import inspect
    import sys
    import types

    name = job["module"]
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__package__ = name.rpartition(".")[0]
    sys.modules[name] = module
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    except Exception as exc:  # the comparison shows it, side by side with the original's
        return {"exec_error": _error(exc)}
    plugin._patch_cuda_tile()
    calls = {}
    for entry in job["entries"]:
        function = module.__dict__.get(entry)
        if function is not None and not _required(inspect, function):
            made = function()  # a getter (`get_swiglu()`): its function is the op
            function = made if inspect.isfunction(made) else None
        calls[entry] = [] if function is None else _calls(plugin, torch, inspect, function)
    return {"calls": calls}


def _required(inspect, function) -> list:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(function).parameters.values()
    return [p for p in params if p.default is inspect.Parameter.empty and p.kind in kinds]


def _calls(plugin, torch, inspect, function) -> list[dict]:
    """The function called with each generic input in turn, up to the first that launches."""
    import random

    attempts = []
    for shape in GENERIC_SHAPES:
        torch.manual_seed(0)
        random.seed(0)
        args = []
        for p in _required(inspect, function):
            note = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
            args.append(_SCALARS[note] if note in _SCALARS else torch.randn(shape, dtype=torch.float32))
        plugin._CURRENT[:] = ["respell"]
        plugin.RECORDS["respell"] = {"launches": []}
        try:
            result, error = function(*args), ""
        except Exception as exc:
            result, error = None, _error(exc)
        launches = [_plain(launch) for launch in plugin.RECORDS["respell"]["launches"]]
        attempts.append(
            {"shape": list(shape), "error": error, "launches": launches, "result": _described(plugin, result)}
        )
        if launches and not error:
            break
    plugin._CURRENT[:] = []
    return attempts


def _described(plugin, value):
    if isinstance(value, (tuple, list)):
        return [_described(plugin, v) for v in value]
    return _plain(plugin.describe(value)) if value is not None else None


def _plain(value):
    """JSON-ready, with object addresses taken out (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return _ADDRESS.sub("0x?", value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return _ADDRESS.sub("0x?", repr(value))


def _error(exc: BaseException) -> str:
    return _ADDRESS.sub("0x?", f"{type(exc).__name__}: {exc}")[:300]
