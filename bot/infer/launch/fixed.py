"""bmm's branch that launches its kernel directly with fixed tile sizes, read as one variant:
its one config is those sizes, and its grid follows the config launched."""

from __future__ import annotations

import ast
import copy

from bot.infer.launch.syntax import NotThisShape, ceil_to_cdiv
from bot.infer.launch.variant import Variant, VariantReader
from bot.infer.syntax import bind, generic_twin, is_call, substitute
from bot.read.types import Entry


def fixed_variant(reader: VariantReader, body: list[ast.stmt], condition: str, holds: str) -> Variant | None:
    """A branch that ends in ``ct.launch`` with fixed tile sizes (bmm's non-persistent path):
    one variant whose one config is those sizes. None when ``body`` is not that shape."""
    launch = body[-1] if body else None
    if not (isinstance(launch, ast.Expr) and is_call(launch.value, "launch") and len(launch.value.args) >= 4):
        return None
    local = _branch_locals(reader, body[:-1], holds)
    call = launch.value
    kernel_name = getattr(call.args[2], "id", "")
    kernel = reader.functions.get(kernel_name)
    if kernel is None or not isinstance(call.args[3], ast.Tuple):
        raise NotThisShape(f"line {call.lineno}: ct.launch of {ast.unparse(call.args[2])} not read")
    entry = reader.entry(kernel_name)
    config, fed = _fixed_sizes(kernel_name, kernel, entry, call.args[3], local)
    terms = _grid_terms(reader, call, local, fed)
    return Variant(
        condition,
        kernel_name,
        entry.name,
        terms[0],
        [("", [config])],
        [],
        "fixed sizes",
        {k: k for k in config},
        call.lineno,
        grid_xyz=terms + ["1"] * (3 - len(terms)),
        ref_params=[a.arg for a in kernel.args.args],
    )


def _branch_locals(reader: VariantReader, body: list[ast.stmt], holds: str) -> dict[str, ast.expr]:
    """The branch's statements before its launch: asserts kept for the reader, assignments bound,
    a caller's override of the defaults dropped (noted); anything else is not this shape."""
    local: dict[str, ast.expr] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assert):
            reader.launch_asserts.append((stmt, holds))
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            bind(stmt.targets[0], stmt.value, local)
        elif isinstance(stmt, ast.If) and _defaults_override(stmt) is not None:
            name, default = _defaults_override(stmt)
            local[name] = default  # caller overrides (kwargs) are not honoured
            reader.dropped_notes.append(f"line {stmt.lineno}: {name} overrides from the caller not taken")
        else:
            raise NotThisShape(f"line {stmt.lineno}: cannot follow `{ast.unparse(stmt).splitlines()[0]}`")
    return local


def _fixed_sizes(
    kernel_name: str, kernel: ast.FunctionDef, entry: Entry, args: ast.Tuple, local: dict[str, ast.expr]
) -> tuple[dict[str, object], dict[str, str]]:
    """(the one config: kernel.rs generic -> the fixed size the launch passes, the branch's local
    that feeds a generic -> that generic)."""
    generics = {g.name for g in entry.generics if g.kind == "const"}
    config: dict[str, object] = {}
    fed: dict[str, str] = {}
    for ref, arg in zip([a.arg for a in kernel.args.args], args.elts, strict=False):
        twin = generic_twin(ref, generics)
        value = _static(arg, local)
        if twin is not None:
            if not (isinstance(value, ast.Constant) and isinstance(value.value, int)):
                raise NotThisShape(f"{kernel_name}: {ref} gets {ast.unparse(arg)}, not a fixed size")
            config[twin] = value.value
            if isinstance(arg, ast.Name):
                fed[arg.id] = twin
    return config, fed


def _grid_terms(
    reader: VariantReader, call: ast.Call, local: dict[str, ast.expr], fed: dict[str, str]
) -> list[str]:
    """The launch's grid terms in the caller's names; a tile size in the grid is the config's
    (``cfg.BM``), so the grid follows the config launched."""
    grid = call.args[1]
    grid = local.get(grid.id, grid) if isinstance(grid, ast.Name) else grid
    if not isinstance(grid, ast.Tuple):
        raise NotThisShape(f"line {call.lineno}: the grid {ast.unparse(call.args[1])} is not a tuple")
    cfg_of = {
        name: ast.Attribute(ast.Name("cfg", ast.Load()), twin, ast.Load()) for name, twin in fed.items()
    }
    unfed = {k: v for k, v in local.items() if k not in fed}
    return [
        ast.unparse(ceil_to_cdiv(reader.caller_names(_static(substitute(t, {}, cfg_of), unfed))))
        for t in grid.elts
    ]


def _static(expr: ast.expr, local: dict[str, ast.expr]) -> ast.expr:
    """``expr`` over the branch's locals, a literal dict's ``.get("k")`` read: what a fixed size is."""

    class Read(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "get"
                and isinstance(func.value, ast.Dict)
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                for k, v in zip(func.value.keys, func.value.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == node.args[0].value:
                        return copy.deepcopy(v)
            return node

    return Read().visit(substitute(expr, local, {}))


def _defaults_override(stmt: ast.If) -> tuple[str, ast.expr] | None:
    """``if x is None: x = defaults else: x = {**defaults, **x}``: (x, defaults)."""
    test = stmt.test
    if not (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], ast.Assign)
        and ast.unparse(stmt.body[0].targets[0]) == test.left.id
    ):
        return None
    return test.left.id, stmt.body[0].value
