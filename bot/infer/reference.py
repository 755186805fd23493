"""Facts from the cuTile Python reference op ``src/tilegym/ops/cutile/<op>.py`` (read with ``ast``).

The reference is what stage B ported, so its host code says how outputs are sized. We find
the function registered for the cuTile backend, locate the output allocation
(``torch.empty``/``empty_like``/``zeros``) and resolve its last dimension back to the
function's parameters through the local assignments, e.g.
``hidden_size = original_shape[-1] // 2`` and ``original_shape = input.shape`` give
``input.shape[-1] // 2``. The variable that held that value (``hidden_size``) is how a
kernel scalar of the same name is recognised as the output's column count.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

from bot.infer.facts import Facts
from bot.types import Source, Target

_ALLOCATORS = {"empty", "empty_like", "zeros", "zeros_like", "empty_strided"}
_MAX_DEPTH = 8


def reference_path(target: Target) -> Path:
    return target.repo / "src" / "tilegym" / "ops" / "cutile" / f"{target.op}.py"


def gather(target: Target, facts: Facts) -> None:
    path = reference_path(target)
    rel = path.relative_to(target.repo)
    if not path.is_file():
        facts.note_tried("python.out_cols", f"{rel} (missing)")
        return
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    fn = _registered_function(tree, target.op)
    if fn is None:
        facts.note_tried("python.out_cols", f"{rel}: no register_impl({target.op!r}, backend='cutile')")
        return
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    assigned = _single_assignments(fn)
    alloc = _output_allocation(fn)
    if alloc is None:
        facts.note_tried("python.out_cols", f"{rel}:{fn.lineno}: no torch.empty/empty_like output allocation")
        return
    var, call = alloc
    last, last_name = _last_dim(call)
    if last is None:
        facts.note_tried("python.out_cols", f"{rel}:{call.lineno}: allocation shape not a literal tuple")
        return
    resolved = _resolve(last, assigned, params)
    if not _only_uses(resolved, params):
        facts.note_tried("python.out_cols", f"{rel}:{call.lineno}: {ast.unparse(last)} does not resolve to parameters")
        return
    where = Source("reference", f"{rel}:{call.lineno} {var} = {ast.unparse(call)}")
    facts.offer("python.out_cols", ast.unparse(resolved), where)
    if last_name:
        facts.offer("reference.out_cols_var", last_name, where)


def _registered_function(tree: ast.Module, op: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "id", "") == "register_impl"):
                continue
            names = [a.value for a in deco.args if isinstance(a, ast.Constant)]
            backend = [k.value.value for k in deco.keywords if k.arg == "backend" and isinstance(k.value, ast.Constant)]
            if names and names[0] in (op, f"get_{op}") and backend == ["cutile"]:
                return node
    return None


def _single_assignments(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """Names assigned exactly once in the function, with their value."""
    seen: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
    return {name: values[0] for name, values in seen.items() if len(values) == 1}


def _output_allocation(fn: ast.FunctionDef) -> tuple[str, ast.Call] | None:
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr in _ALLOCATORS
            and getattr(node.value.func.value, "id", "") == "torch"
        ):
            return node.targets[0].id, node.value
    return None


def _last_dim(call: ast.Call) -> tuple[ast.expr | None, str]:
    """The allocation's last dimension and, when it is a plain name, that name."""
    if call.func.attr.endswith("_like"):
        if not call.args:
            return None, ""
        like = call.args[0]
        return ast.Subscript(value=ast.Attribute(value=like, attr="shape"), slice=ast.Constant(-1)), ""
    if not call.args:
        return None, ""
    shape = call.args[0]
    if isinstance(shape, (ast.Tuple, ast.List)) and shape.elts:
        last = shape.elts[-1]
        return last, last.id if isinstance(last, ast.Name) else ""
    return None, ""


class _Substitute(ast.NodeTransformer):
    def __init__(self, assigned: dict[str, ast.expr], params: set[str]):
        self.assigned = assigned
        self.params = params

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.params or node.id not in self.assigned:
            return node
        return copy.deepcopy(self.assigned[node.id])


def _resolve(expr: ast.expr, assigned: dict[str, ast.expr], params: set[str]) -> ast.expr:
    current = copy.deepcopy(expr)
    for _ in range(_MAX_DEPTH):
        new = _Substitute(assigned, params).visit(copy.deepcopy(current))
        if ast.dump(new) == ast.dump(current):
            break
        current = new
    return _simplify_views(current)


def _simplify_views(expr: ast.expr) -> ast.expr:
    """``x.view(...).shape[-1]`` and ``x.contiguous().shape[-1]`` keep the last dim of ``x``."""

    class _Views(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            self.generic_visit(node)
            inner = node.value
            if (
                isinstance(inner, ast.Attribute)
                and inner.attr == "shape"
                and isinstance(inner.value, ast.Call)
                and isinstance(inner.value.func, ast.Attribute)
                and inner.value.func.attr in ("contiguous", "detach")
            ):
                inner.value = inner.value.func.value
            return node

    return _Views().visit(expr)


def _only_uses(expr: ast.expr, params: set[str]) -> bool:
    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    return bool(names) and names <= params
