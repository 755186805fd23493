"""The reference module as the rewrites read it: its names, host statement lists and launch
sites, scopes, and which expressions are free of side effects (tests/respell_corpus.py).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from dataclasses import dataclass, field

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
