"""The names the carried program's refusals read: which test cases it refuses as the reference does.

A test that skips a case for the cuTile backend on a name the reference's refusals read (the
reference raises ``if is_causal``, the test skips ``if backend == "cutile" and is_causal``) skips
it for cutile-rs too (``bot/emit/testfile_wiring.py``): the carried wrapper is the reference's code,
so it refuses that case the same way. The names are read off the carried functions: the test of
every ``if`` around a ``raise`` or around a call that launches a kernel kernel.rs does not port
(the carried launch raises, naming it) or runs a function that may, and every ``assert``; each
local followed to the parameters its function assigns it from, and each parameter of a carried
function to what its callers in the same module pass for it. Only a function's own names count
(its parameters and locals), not the module's.
"""

from __future__ import annotations

import ast

from bot.infer.model.program import Program, Unit
from bot.infer.model.semantic import ModuleModel, bound_names, parameter_names

_MAX_ROUNDS = 16


def refused_by(program: Program, units: list[Unit], unported: set[Unit]) -> list[str]:
    """The parameters and locals the refusals of the carried ``units`` read, sorted. ``unported``:
    the kernels no kernel.rs entry ports."""
    functions = _functions(program, units)
    raising = _raising_functions(program, functions, unported)
    flows = {key: _Flow(fn) for key, fn in functions.items()}
    found: dict[tuple[Unit, str], set[str]] = {}
    for key, fn in functions.items():
        refuses = lambda call, module=key[0].module: _refuses(program, call, module, unported, raising)  # noqa: E731
        found[key] = flows[key].followed({n for test in _guards(fn, refuses) for n in _reads(test)})
    for _ in range(_MAX_ROUNDS):  # a parameter read by a refusal: what each caller passes for it
        grown = False
        for key, fn in functions.items():
            for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                callee = _carried_callee(program, call, key[0].module)
                if callee not in functions:
                    continue
                args = _arguments_for(functions[callee], call, found[callee], after_ctx=bool(callee[1]))
                more = flows[key].followed({n for arg in args for n in _reads(arg)}) - found[key]
                if more:
                    found[key] |= more
                    grown = True
        if not grown:
            break
    return sorted(set().union(*found.values()) if found else set())


def _functions(program: Program, units: list[Unit]) -> dict[tuple[Unit, str], ast.FunctionDef]:
    """The carried functions: (unit, "") for a module function, (unit, method) for a class's."""
    out: dict[tuple[Unit, str], ast.FunctionDef] = {}
    for unit in units:
        for binding in program.bindings(unit)[:1]:
            if binding.kind == "function" and isinstance(binding.stmt, ast.FunctionDef):
                out[(unit, "")] = binding.stmt
            elif binding.kind == "class" and isinstance(binding.stmt, ast.ClassDef):
                for stmt in binding.stmt.body:
                    if isinstance(stmt, ast.FunctionDef):
                        out[(unit, stmt.name)] = stmt
    return out


def _refuses(
    program: Program, call: ast.Call, module: str, unported: set[Unit], raising: set[tuple[Unit, str]]
) -> bool:
    """A call that hands an unported kernel on (``ct.launch(s, grid, k, args)``, a search over it)
    or runs a carried function that may launch one."""
    kernels = {Unit(module, a.id) for a in call.args if isinstance(a, ast.Name)}
    return bool(kernels & unported) or _carried_callee(program, call, module) in raising


def _carried_callee(program: Program, call: ast.Call, module: str) -> tuple[Unit, str] | None:
    runs = called(program.models[module], call)
    return (Unit(module, runs[0]), runs[1]) if runs is not None else None


def _raising_functions(program: Program, functions: dict, unported: set[Unit]) -> set[tuple[Unit, str]]:
    """The carried functions a call of which may launch an unported kernel, transitively."""
    raising: set[tuple[Unit, str]] = set()
    for _ in range(_MAX_ROUNDS):
        more = {
            key
            for key, fn in functions.items()
            if key not in raising
            and any(
                _refuses(program, c, key[0].module, unported, raising)
                for c in ast.walk(fn)
                if isinstance(c, ast.Call)
            )
        }
        if not more:
            break
        raising |= more
    return raising


def called(model: ModuleModel, call: ast.Call) -> tuple[str, str] | None:
    """What a call runs, as (the module name, its method): ``f(...)`` -> (f, ""); ``F.apply(...)``,
    or a name bound to ``F.apply`` (``op = _OpFunction.apply``), -> (F, "forward"): the autograd
    Function's ``forward``, which takes ``ctx`` before the call's arguments."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "apply" and isinstance(func.value, ast.Name):
        return func.value.id, "forward"
    if not isinstance(func, ast.Name):
        return None
    binding = model.binding(func.id)
    if binding is not None and binding.kind == "value" and isinstance(binding.stmt, ast.Assign):
        alias = binding.stmt.value
        if isinstance(alias, ast.Attribute) and alias.attr == "apply" and isinstance(alias.value, ast.Name):
            return alias.value.id, "forward"
    return func.id, ""


def _guards(fn: ast.AST, refuses) -> list[ast.expr]:
    """The tests of the ``if``s around each ``raise`` of ``fn`` and each call that ``refuses``,
    and each ``assert``'s test."""
    tests: list[ast.expr] = []

    def visit(node: ast.AST, around: list[ast.expr]) -> None:
        if isinstance(node, ast.Raise) or (isinstance(node, ast.Call) and refuses(node)):
            tests.extend(around)
        elif isinstance(node, ast.Assert):
            tests.append(node.test)
        for name, value in ast.iter_fields(node):
            inside = (
                around + [node.test] if isinstance(node, ast.If) and name in ("body", "orelse") else around
            )
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    visit(child, inside)

    visit(fn, [])
    return list({id(t): t for t in tests}.values())


def _reads(expr: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class _Flow:
    """One function's assignments, read once: which of its names each of its names comes from."""

    def __init__(self, fn: ast.FunctionDef) -> None:
        self.params = parameter_names(fn)
        self.own = self.params | {n for stmt in fn.body for n in bound_names(stmt)}
        self.sources: dict[str, set[str]] = {}
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                        self.sources.setdefault(name, set()).update(_reads(node.value))

    def followed(self, names: set[str]) -> set[str]:
        """Those of ``names`` that are the function's own, and the parameters they are assigned
        from, transitively (the inputs a test can name; a local between them is not one)."""
        seen: set[str] = set()
        todo = [n for n in names if n in self.own]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += [n for n in self.sources.get(name, ()) if n in self.own and n not in seen]
        return {n for n in seen if n in names or n in self.params}


def _arguments_for(fn: ast.FunctionDef, call: ast.Call, params: set[str], after_ctx: bool) -> list[ast.expr]:
    """The expressions ``call`` passes for those of ``fn``'s ``params`` it passes by position or name."""
    positional = [a.arg for a in fn.args.posonlyargs + fn.args.args][1 if after_ctx else 0 :]
    out = [arg for name, arg in zip(positional, call.args, strict=False) if name in params]
    if any(isinstance(a, ast.Starred) for a in call.args):
        out = []  # which argument is which parameter is not written at the call
    return out + [k.value for k in call.keywords if k.arg in params]
