"""The wrapper's names, checked on the plan itself before anything is rendered.

Every value the wrapper computes (a step, an allocation, a C argument, the result) is a Python
expression. The plan is closed when each name such an expression reads is bound before it: a
parameter of the registered function, an earlier step, an allocation, or a name the wrapper module
always defines. ``unbound`` lists the names that are not, each with the plan key that holds the
value, so the verdict can say which value agent-d got wrong and which contract key replaces it.

``drop_unread_lets`` removes single-name ``let`` steps that nothing after them reads (a reference's
``grid = (...)`` or ``stream = ...`` that the FFI computes itself): they would be unused locals.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from bot.plan.types import LaunchPlan, PyPlan, PyStep

# Names the emitted wrapper module defines or imports whenever an expression uses them
# (bot/emit/wrapper_py.py renders each helper when the body text calls it).
MODULE_NAMES = frozenset(
    {
        "torch",
        "math",
        "SimpleNamespace",
        "cdiv",
        "next_power_of_2",
        "get_num_sm",
        "is_autotune_disabled",
        "_device_capability",
        "_autotune_configs",
        "_compile_option",
        "_AUTO_COMPILE_OPTION",
        "_DTYPES",
        "_KERNEL",
        "_FFI_NAME",
    }
)
BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Unbound:
    name: str  # the name read and never bound
    key: str  # the contract key whose value reads it ("python.args.n_cols")
    value: str  # the expression as planned
    source: str  # where that value came from ("" when the plan keeps no source for it)


def reads(expr: str) -> set[str]:
    """Free names an expression reads (names bound by its own comprehensions and lambdas excluded)."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return set()
    loaded, local = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else local).add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
    return loaded - local


def binds(target: str) -> set[str]:
    """Names an assignment target binds (``a, b`` binds both; ``x[0]`` and ``x.y`` bind nothing)."""
    try:
        tree = ast.parse(f"{target} = None", mode="exec")
    except SyntaxError:
        return set()
    stmt = tree.body[0]
    assert isinstance(stmt, ast.Assign)
    return {
        n.id
        for t in stmt.targets
        for n in ast.walk(t)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def step_reads(step: PyStep) -> set[str]:
    if step.kind == "check":
        found = reads(step.expr)
        if "{" in step.message:  # rendered as an f-string
            found |= reads("f" + repr(step.message))
        return found
    if step.kind == "detach":
        return set(step.names)
    if step.kind == "let":
        target_reads = reads(step.target) - binds(step.target)  # `x[0] = ...` reads x
        return reads(step.expr) | target_reads
    if step.kind == "return":
        return reads(step.target) | reads(step.expr)
    return set()


def step_binds(step: PyStep) -> set[str]:
    if step.kind == "let":
        return binds(step.target)
    if step.kind == "detach":
        return set(step.names)
    return set()


def parameters(signature: str) -> set[str]:
    """Parameter names of ``def f(<signature>)``."""
    try:
        tree = ast.parse(f"def f({signature}):\n    pass\n")
    except SyntaxError:
        return set()
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return set(names)


def _tail_reads(py: PyPlan, tensors: list[str], scalars: list[str]) -> set[str]:
    """What everything after the steps reads: allocations, the launch's arguments, the result."""
    found: set[str] = set()
    for expr in py.alloc.values():
        found |= reads(expr)
    for name in tensors:
        found |= reads(py.tensors_py.get(name, ""))
    for each in py.per_element:
        found |= reads(each.list_expr)
    for name in scalars:
        found |= reads(py.ffi_args.get(name, ""))
    found |= reads(py.result) | set(py.alloc)
    if py.autotune_key:
        found |= reads(py.autotune_key)
    for group in py.configs:
        found |= (
            reads(str(group.get("when", "True"))) if group.get("when") not in ("always", "else") else set()
        )
    return found


def drop_unread_lets(plan: LaunchPlan) -> int:
    """Remove single-name ``let`` steps nothing after them reads; returns how many were removed."""
    py = plan.python
    tail = _tail_reads(py, [t.name for t in plan.ffi.tensors], [s.name for s in plan.ffi.scalars])
    removed = 0
    changed = True
    while changed:
        changed = False
        for i in range(len(py.steps) - 1, -1, -1):
            step = py.steps[i]
            target = binds(step.target) if step.kind == "let" else set()
            if len(target) != 1 or step.target.strip() not in target:
                continue
            later = set(tail)
            for other in py.steps[i + 1 :]:
                later |= step_reads(other)
            if not target & later:
                del py.steps[i]
                removed += 1
                changed = True
    return removed


def unbound(plan: LaunchPlan) -> list[Unbound]:
    """Each name a wrapper value reads before (or without) anything binding it, in wrapper order."""
    py, ffi = plan.python, plan.ffi
    bound = set(MODULE_NAMES) | BUILTINS | parameters(py.signature)
    if py.register_kind == "getter":
        bound |= parameters(py.inner_signature)
    found: list[Unbound] = []
    seen: set[tuple[str, str]] = set()

    def need(names: set[str], key: str, value: str, source: str = "") -> None:
        for name in sorted(names - bound):
            if (name, key) not in seen:
                seen.add((name, key))
                found.append(Unbound(name, key, value, source))

    for step in py.steps:
        value = {"let": f"{step.target} = {step.expr}", "check": step.expr, "return": step.expr}.get(
            step.kind, ", ".join(step.names)
        )
        need(step_reads(step), "python.steps", value, str(step.source or ""))
        bound |= step_binds(step)
    alloc_source = str(py.sources.get("python.alloc", ""))
    after_steps = set(bound)
    if py.launch_mode == "autotune":
        bound |= {"configs", "cfg"}  # inside kernel_fn(cfg), after the config choice
    for var, expr in py.alloc.items():
        need(reads(expr), f"python.alloc.{var}", expr, alloc_source)
        bound.add(var)
    for each in py.per_element:  # `for Ai, ... in zip(group_A, ...)`: the lists, then the loop's items
        need(
            reads(each.list_expr), f"python.per_element.{each.tensor}", each.list_expr, str(each.source or "")
        )
    bound |= {each.item for each in py.per_element}
    for t in ffi.tensors:
        expr = py.tensors_py.get(t.name, "")
        need(reads(expr), f"python.tensors.{t.name}", expr, str(py.sources.get("python.tensors", "")))
    for s in ffi.scalars:
        expr = py.ffi_args.get(s.name, "")
        need(reads(expr), f"python.args.{s.name}", expr, str(py.sources.get(f"python.args.{s.name}", "")))
    if py.launch_mode == "autotune":
        # after kernel_fn only the first output is bound (autotune_launch returns it)
        bound = after_steps | {"configs"} | set(list(py.alloc)[:1])
        need(reads(py.autotune_key), "python.key", py.autotune_key, str(py.sources.get("python.key", "")))
    need(reads(py.result), "python.result", py.result, str(py.sources.get("python.result", "")))
    return found
