"""A launcher whose variants take different tensors: each variant reads only its own descriptors.

Carried host code launches each of several kernel.rs entries in its own C call (the selector
names the entry), passing a null descriptor for every tensor the other entries take. Such a
launcher chooses its variant first, from scalars alone, and then borrows, checks and launches
with that variant's own part of the plan: the descriptors its arguments, grid and generics read,
the derived values and checks over them, the dtype of one of its own tensors. ``ffi.rs`` renders
that part as a function of its own and the dry run takes the same part: one rule for both.
"""

from __future__ import annotations

from dataclasses import replace

from bot import expr
from bot.plan.types import FfiPlan, Variant


def split(ffi: FfiPlan) -> bool:
    """Whether the variants are alternatives chosen by scalars and some tensor is not every
    variant's."""
    if ffi.sequence or len(ffi.variants) < 2:
        return False
    if any(v.when not in ("always", "else") and expr.tensors(v.when) for v in ffi.variants):
        return False  # chosen by a descriptor: every descriptor is read first, as before
    sets = [set(used_tensors(ffi, v)) for v in ffi.variants]
    return any(s != sets[0] for s in sets)


def used_tensors(ffi: FfiPlan, v: Variant) -> list[str]:
    """The C tensors variant ``v`` reads, in the launcher's parameter order."""
    tensors, _scalars = _reads(ffi, v)
    return [t.name for t in ffi.tensors if t.name in tensors]


def part(ffi: FfiPlan, v: Variant) -> FfiPlan:
    """The plan of ``v`` alone: its tensors, the scalars it reads, its derived values and checks."""
    tensors, scalars = _reads(ffi, v)
    own = [t for t in ffi.tensors if t.name in tensors]
    if not own:
        raise expr.ExprError(f"launch variant {v.tag} reads no tensor")
    dtype_from = ffi.dtype_from if ffi.dtype_from in tensors else ""
    if not dtype_from:
        typed = [t for t in own if ffi.dtype_generic and t.elem == ffi.dtype_generic] or own
        inputs = [t for t in typed if t.role == "input"] or typed
        dtype_from = inputs[0].name
    return replace(
        ffi,
        tensors=own,
        dtype_from=dtype_from,
        scalars=[s for s in ffi.scalars if s.name in scalars or s.role == "compile_option"],
        derived=[d for d in ffi.derived if d.name in scalars],
        checks=[c for c in ffi.checks if expr.tensors(c["when"]) <= tensors],
        variants=[replace(v, when="always")],
        sequence=False,
    )


def _reads(ffi: FfiPlan, v: Variant) -> tuple[set[str], set[str]]:
    """(C tensors, scalar and derived names) variant ``v`` reads, derived values followed."""
    exprs = [*v.args, *v.grid, *(g for g in v.generics if g != "dtype" and not g.startswith('"'))]
    tensors: set[str] = set()
    names: set[str] = set()
    derived = {d.name: d.expr for d in ffi.derived}
    todo = list(exprs)
    while todo:
        text = todo.pop()
        tensors |= expr.tensors(text)
        for name in expr.names(text) - names:
            names.add(name)
            if name in derived:
                todo.append(derived[name])
    for check in ffi.checks:  # a check over this variant's tensors only is this variant's
        if expr.tensors(check["when"]) <= tensors:
            names |= expr.names(check["when"])
    return tensors, names
