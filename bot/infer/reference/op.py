"""Facts from the cuTile Python reference op, the module discovery found registering the op for the
cuTile backend (``src/tilegym/ops/cutile/**``), read with ``ast``.

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
from dataclasses import dataclass
from pathlib import Path

from bot.infer.facts import Facts
from bot.infer.ops_py import render_signature, tensor_params
from bot.infer.syntax import plain_assign
from bot.targets.discover import cutile_registration
from bot.targets.types import Discovery, Source, Target

_ALLOCATORS = {"empty", "empty_like", "zeros", "zeros_like", "empty_strided"}
_MAX_DEPTH = 8
_MAX_CALL_DEPTH = 4


def reference_path(target: Target, found: Discovery) -> Path:
    """The module that registers the op; without a registration, ``ops/cutile/<op>.py``."""
    if found.reference is not None:
        return target.repo / found.reference.path
    return target.repo / "src" / "tilegym" / "ops" / "cutile" / f"{target.op}.py"


@dataclass(frozen=True)
class ReferenceOp:
    """The reference op file, parsed once."""

    rel: Path  # relative to the repository, for sources
    tree: ast.Module | None  # None when missing or unparsable
    problem: str = ""  # why there is no tree
    name: str = ""  # the dispatch name the op is registered under


def load(target: Target, found: Discovery) -> ReferenceOp:
    path = reference_path(target, found)
    rel = path.relative_to(target.repo)
    name = found.dispatch_name
    if not path.is_file():
        return ReferenceOp(rel, None, "missing", name)
    try:
        return ReferenceOp(rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "", name)
    except SyntaxError as exc:
        return ReferenceOp(rel, None, f"does not parse ({exc.msg}, line {exc.lineno})", name)


def gather(target: Target, facts: Facts, ref: ReferenceOp) -> None:
    rel, tree = ref.rel, ref.tree
    if tree is None:
        facts.note_tried("python.out_cols", f"{rel} ({ref.problem})")
        return
    # where the carried-over wrapper's host code comes from (plan.carry)
    facts.offer(
        "reference.module",
        {"path": rel.as_posix(), "name": ref.name},
        Source("reference", f"{rel.as_posix()} registers {ref.name!r} for the cuTile backend"),
    )
    index = ModuleIndex(tree)
    fn = registered_function(tree, ref.name)
    if fn is None:
        facts.note_tried("python.out_cols", f"{rel}: no register_impl({ref.name!r}, backend='cutile')")
        return
    getter = _returned_function(fn, index)
    if getter is not None:
        where = Source("reference", f"{rel}:{fn.lineno} {fn.name}() returns {getter.name}")
        facts.offer("python.inner_name", getter.name, where)
        facts.offer("python.inner_signature", render_signature(getter.args), where)
        facts.offer("python.tensor_params", _required(getter.args), where)
        fn = getter
    else:
        # below ops.py in authority: used when the public declaration is missing or does not
        # take the keyword names the tests pass
        where = Source("reference", f"{rel}:{fn.lineno} {fn.name}() registered for the cuTile backend")
        facts.offer("python.signature", render_signature(fn.args), where)
        annotated = tensor_params(fn.args)
        if annotated:  # without annotations the launch reader says which parameters are tensors
            facts.offer("python.tensor_params", annotated, where)
    found = _find_allocation(fn, index, depth=0)
    if found is None:
        facts.note_tried(
            "python.out_cols", f"{rel}:{fn.lineno}: no torch.empty/empty_like output allocation reached"
        )
        return
    resolved, last_name, call = found
    where = Source("reference", f"{rel}:{call.lineno} {ast.unparse(call)}")
    facts.offer("python.out_cols", ast.unparse(resolved), where)
    if last_name:
        facts.offer("reference.out_cols_var", last_name, where)


def module_assignments(tree: ast.Module, kinds: type | tuple[type, ...]) -> dict[str, ast.expr]:
    """The module's top-level ``name = value`` whose value is of ``kinds``: name -> value."""
    return {
        n.targets[0].id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and isinstance(n.value, kinds)
    }


class ModuleIndex:
    """Module-level functions and autograd Function classes, for following calls."""

    def __init__(self, tree: ast.Module):
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        # `attention_decode = _AttentionDecodeFunction.apply`: a module-level name for a callable
        self.aliases = module_assignments(tree, (ast.Name, ast.Attribute))

    def callee(self, call: ast.Call, hops: int = 0) -> tuple[ast.FunctionDef, int] | None:
        """The function a call runs and how many leading parameters the call does not fill."""
        if isinstance(call.func, ast.Name) and call.func.id in self.functions:
            return self.functions[call.func.id], 0
        if isinstance(call.func, ast.Name) and call.func.id in self.aliases and hops < 4:
            aliased = ast.Call(func=self.aliases[call.func.id], args=call.args, keywords=call.keywords)
            return self.callee(aliased, hops + 1)
        if isinstance(call.func, ast.Attribute) and call.func.attr == "apply":
            owner = getattr(call.func.value, "id", "")
            cls = self.classes.get(owner)
            if cls is not None:
                for item in cls.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "forward":
                        return item, 1  # ctx
        return None


class ModuleLoader:
    """Modules of the checkout a reference imports from (``from tilegym.ops.cutile.splitk_reduce
    import splitk_reduce``, ``from .utils import x``), parsed once each."""

    def __init__(self, repo: Path):
        self.repo = repo
        self._parsed: dict[Path, tuple[ast.Module, Path] | None] = {}

    def load(self, importer: Path, module: str | None, level: int) -> tuple[ast.Module, Path] | None:
        """(tree, path relative to the repository) of the module an import in ``importer`` names."""
        parts = (module or "").split(".") if module else []
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            candidates = [base.joinpath(*parts)]
        else:
            candidates = [Path("src").joinpath(*parts), Path(*parts)] if parts else []
        for stem in candidates:
            for rel in (stem.with_suffix(".py"), stem / "__init__.py"):
                if (self.repo / rel).is_file():
                    return self._parse(rel)
        return None

    def _parse(self, rel: Path) -> tuple[ast.Module, Path] | None:
        if rel not in self._parsed:
            try:
                tree = ast.parse((self.repo / rel).read_text(encoding="utf-8"), filename=str(rel))
                self._parsed[rel] = (tree, rel)
            except (OSError, SyntaxError, ValueError):
                self._parsed[rel] = None
        return self._parsed[rel]


def _returned_function(fn: ast.FunctionDef, index: ModuleIndex) -> ast.FunctionDef | None:
    """For a getter (``return swiglu``), the module-level function it hands out."""
    for node in fn.body:
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
            return index.functions.get(node.value.id)
    return None


def _required(args: ast.arguments) -> list[str]:
    positional = args.posonlyargs + args.args
    return [a.arg for a in positional[: len(positional) - len(args.defaults)]]


def _params(fn: ast.FunctionDef) -> set[str]:
    return {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}


def _find_allocation(fn: ast.FunctionDef, index: ModuleIndex, depth: int):
    """(last dim over ``fn``'s parameters, the variable that held it, the allocation call), or None."""
    params = _params(fn)
    assigned = _single_assignments(fn)
    alloc = _output_allocation(fn)
    if alloc is not None:
        _, call = alloc
        last, last_name = _last_dim(call)
        if last is not None:
            resolved = _resolve(last, assigned, params)
            if _only_uses(resolved, params):
                return resolved, last_name, call
    if depth >= _MAX_CALL_DEPTH:
        return None
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        target = index.callee(node)
        if target is None or target[0] is fn:
            continue
        callee, skip = target
        found = _find_allocation(callee, index, depth + 1)
        if found is None:
            continue
        expr, last_name, call = found
        names = [a.arg for a in callee.args.posonlyargs + callee.args.args][skip:]
        mapping = {name: arg for name, arg in zip(names, node.args) if not isinstance(arg, ast.Starred)}
        mapped = _Substitute(mapping, set()).visit(copy.deepcopy(expr))
        resolved = _resolve(mapped, assigned, params)
        if _only_uses(resolved, params):
            return resolved, last_name, call
    return None


def registered_function(tree: ast.Module, op: str) -> ast.FunctionDef | None:
    """The function registered for the cuTile backend under ``op`` (or its getter ``get_<op>``),
    by decorator or by the call form ``register_impl(...)(fn)`` (discovery's one rule)."""
    wanted = (op, f"get_{op}")
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            if any(cutile_registration(deco) in wanted for deco in node.decorator_list):
                return node
        elif isinstance(node, ast.Call) and cutile_registration(node.func) in wanted and node.args:
            fn = functions.get(getattr(node.args[0], "id", ""))
            if fn is not None:
                return fn
    return None


def _single_assignments(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """Names assigned exactly once in the function, with their value."""
    seen: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        if plain_assign(node):
            seen.setdefault(node.targets[0].id, []).append(node.value)
    return {name: values[0] for name, values in seen.items() if len(values) == 1}


def _output_allocation(fn: ast.FunctionDef) -> tuple[str, ast.Call] | None:
    for node in ast.walk(fn):
        if (
            plain_assign(node)
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
