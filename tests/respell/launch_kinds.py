"""The re-spelling kinds of a launch's host code: grids, conditionals, locals, argument tuples,
nested and method launches, tuple assignments, early returns (tests/respell_corpus.py).
"""

from __future__ import annotations

import ast
import copy

from respell.model import (
    _FUNCTIONS,
    _SCOPES,
    Module,
    _all_pure,
    _assign,
    _bound_here,
    _index,
    _load,
    _names_read,
    _opaque,
    _own_nodes,
    _params,
    _replace,
    _top_statement,
    dotted,
    host_blocks,
    host_functions,
    is_plain,
    is_pure,
    launch_sites,
    owners,
)


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
