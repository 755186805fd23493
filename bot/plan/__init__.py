"""The launch plan: facts merged by authority into plain data that the emitters render.

``build_plan`` picks the host pattern from the kernel's shape and hands over to that
pattern's planner; a pattern the planner cannot recognise is a precise BLOCKED(host).
"""

from __future__ import annotations

from bot.checkout import Checkout
from bot.errors import Failed
from bot.infer.facts import Facts
from bot.plan import common, general, rows
from bot.types import KernelSignature, LaunchPlan, Target


def build_plan(target: Target, signature: KernelSignature, facts: Facts, checkout: Checkout) -> LaunchPlan:
    if not signature.entries:
        raise Failed(
            "kernel",
            f"{target.op}: kernel.rs has no #[cutile::entry(...)] function",
            followup="declare the entry with #[cutile::entry()] (parentheses required) inside the #[cutile::module]",
        )
    for entry in signature.entries:
        mutable = [p.name for p in entry.params if p.kind == "tensor" and p.mutable]
        if mutable:
            raise Failed(
                "kernel",
                f"{entry.name}: output parameter(s) {', '.join(mutable)} declared &mut Tensor; an explicit launch "
                "grid then fails with 'Specified launch grid does not match inferred tensor partition grid'",
                followup=f"declare {', '.join(mutable)} as &Tensor and write it via partition_full_mut (or use *mut E)",
            )
        if not entry.outputs:
            raise Failed(
                "kernel",
                f"{entry.name}: no output found (no parameter reaches partition_full_mut, partition_mut or a store)",
                followup="write the output through partition_full_mut / partition_mut / store_ptr_tko",
            )
    if len(signature.entries) == 1 and rows.matches(signature.entries[0]):
        plan = rows.plan(target, signature, signature.entries[0], facts, checkout)
    else:
        plan = general.plan(target, signature, facts, checkout)
    plan.more_tests = common.test_wirings(checkout)[1:]
    return plan
