"""How the porter's contract changes the launch, against the launch agent-d reads without it.

A numeric mismatch, NaN outputs, an illegal address or a hang after the ABI smoke passed are the
kernel's when the host launched it as the reference does. When a contract (or stage B's contract
block) makes the launch differ from what agent-d reads from the reference and the checkout, the
host side is the suspect: these differences are what the classifier names (docs/classification.md).
"""

from __future__ import annotations

from bot.plan.types import LaunchPlan


def differences(plan: LaunchPlan, reference: LaunchPlan) -> list[str]:
    """Each launch value of ``plan`` that ``reference`` (the plan without the contract) sets otherwise;
    empty when the reference plan is incomplete (nothing to compare with)."""
    if reference.missing:
        return []
    found: list[str] = []
    theirs = {v.entry: v for v in reference.ffi.variants}
    for ours in plan.ffi.variants:
        ref = theirs.get(ours.entry)
        if ref is None:
            continue
        for what in ("grid", "args", "generics"):
            _compare(found, f"{ours.entry} {what}", getattr(ours, what), getattr(ref, what))
    _compare_maps(
        found,
        "ffi",
        {d.name: d.expr for d in plan.ffi.derived},
        {d.name: d.expr for d in reference.ffi.derived},
    )
    if reference.carry is not None:
        # the carried launch passes its own value there at run time: the contract replaces it
        passed = {c.name for c in reference.ffi.scalars} - {d.name for d in reference.ffi.derived}
        for d in plan.ffi.derived:
            if d.name in passed:
                found.append(
                    f"ffi {d.name}: `{d.expr}` where the reference passes its own value at the launch"
                )
    _compare(found, "ffi checks", plan.ffi.checks, reference.ffi.checks)
    py, ref_py = plan.python, reference.python
    _compare_maps(found, "python.alloc", py.alloc, ref_py.alloc)
    _compare_maps(found, "python.args", py.ffi_args, ref_py.ffi_args)
    _compare_maps(found, "python.grid", py.python_grid, ref_py.python_grid)
    _compare_maps(found, "python", _lets(plan), _lets(reference))
    _compare(found, "python.result", py.result, ref_py.result)
    return found


def _lets(plan: LaunchPlan) -> dict[str, str]:
    return {s.target: s.expr for s in plan.python.steps if s.kind == "let"}


def _compare(found: list[str], where: str, ours: object, theirs: object) -> None:
    if ours != theirs:
        found.append(f"{where}: {_shown(ours)} where the reference gives {_shown(theirs)}")


def _compare_maps(found: list[str], where: str, ours: dict, theirs: dict) -> None:
    for name in sorted(ours.keys() & theirs.keys()):
        _compare(found, f"{where} {name}", ours[name], theirs[name])


def _shown(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return f"`{value}`" if not isinstance(value, dict) else str(value)
