"""The launch plan: facts merged by authority into plain data that the emitters render.

``build_plan`` refuses what is a kernel fault (no entry, a ``&mut Tensor`` or partition output, no
output at all), then hands every kernel shape to the one planner, ``launch``; what no source says
becomes a precise question (``MissingFact``), never a crash in an emitter.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bot.errors import Failed
from bot.infer.facts import Facts
from bot.plan import carry, closure, launch
from bot.plan.inputs import read_inputs
from bot.plan.types import LaunchPlan, MissingFact, PyPlan
from bot.read.types import Entry, KernelSignature
from bot.targets.checkout import Checkout
from bot.targets.types import Target


def build_plan(
    target: Target, signature: KernelSignature, facts: Facts, checkout: Checkout, own_half: bool = False
) -> LaunchPlan:
    """The wrapper is the reference's host code carried over wherever it can be, unless the porter's
    contract states the wrapper (docs/carry.md). ``own_half``: the plan's own wrapper half only, what
    a porter's wrapper contract is compared with (``stage_generate.contract_differences``)."""
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
        _refuse_partitions(entry)
        if not entry.outputs:
            raise Failed(
                "kernel",
                f"{entry.name}: no output found (no parameter reaches partition_full_mut, partition_mut or a store)",
                followup="write the output through partition_full_mut / partition_mut / store_ptr_tko",
            )
    inputs = read_inputs(target, signature, facts, checkout)  # the facts the planner reads, once
    plan = launch.plan(inputs)
    plan.more_tests = list(inputs.tests[1:])
    plan.missing += _unbound(plan, inputs.tried.get("python.tensors", ()))
    closure.drop_unread_lets(plan)  # a reference's own `grid = ...` the FFI computes: an unused local
    # a contract that states the wrapper (any python.* key) is the porter's word: the plan's own
    # wrapper half honours it, so it is carried over only where that half still asks
    porter_wrapper = any(f.source.kind == "contract" for f in facts.under("python").values())
    flags: list[str] | None = None  # the boolean C arguments, once carrying has read them
    if not own_half and (
        not porter_wrapper or (plan.missing and all(carry.answers(m.key) for m in plan.missing))
    ):
        # what the wrapper half could not distil, the reference's host code says as code
        carried, flags = carry_into(target, signature, facts, inputs, plan)
        if carried is not None:
            return carried
    if not plan.missing:
        # the plan's own wrapper (a porter's contract, or where carrying gave way) still launches
        # the reference's kernels: their boolean parameters are checked 0 or 1 as a carried launch
        # checks them (read once: where carrying gave way, its mapping has read them already)
        if flags is None:
            flags = _reference_flags(target, signature, facts, plan)
        own = {c.name for c in plan.ffi.scalars}
        plan.ffi.checks = flag_checks([f for f in flags if f in own], plan.ffi.checks)
    return plan


def _reference_flags(target: Target, signature: KernelSignature, facts: Facts, plan: LaunchPlan) -> list[str]:
    """The C arguments a ``ct.Constant[bool]`` parameter of the reference's kernels feeds, by the
    carried launch's own mapping onto ``plan``'s FFI; none when the reference cannot be read."""
    reference = _reference(target, facts)
    if reference is None:
        return []
    text, rel, module, name = reference
    return carry.plan(text, rel, module, name, signature, plan.ffi, _loader(target.repo)).flags


def _reference(target: Target, facts: Facts) -> tuple[str, str, str, str] | None:
    """The reference module's text, path, dotted name and registered name, or None."""
    where = facts.get("reference.module")
    if not isinstance(where, dict):
        return None
    rel = str(where["path"])
    try:
        text = (target.repo / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    parts = Path(rel).with_suffix("").parts
    module = ".".join(parts[1:] if parts[0] == "src" else parts)
    return text, rel, module, str(where["name"])


def carry_into(
    target: Target, signature: KernelSignature, facts: Facts, inputs, plan: LaunchPlan
) -> tuple[LaunchPlan | None, list[str]]:
    """The plan whose wrapper is the reference's host code carried over (``plan.carry``), or None
    when the reference cannot be carried, or carrying it leaves a question (why is added to the
    first wrapper question of ``plan``); and the boolean C arguments its mapping found."""
    reference = _reference(target, facts)
    if reference is None:
        return None, []
    text, rel, module, name = reference
    carried_inputs = replace(inputs, carried=True)
    carried_plan = launch.plan(carried_inputs)
    load = _loader(target.repo)
    found = carry.plan(text, rel, module, name, signature, carried_plan.ffi, load)
    if found.paired_scalars.keys() & {d.name for d in carried_plan.ffi.derived}:
        # a scalar the FFI would derive by a naming rule is one the carried launch passes: plan again
        carried_inputs = replace(carried_inputs, carried_scalars=found.paired_scalars)
        carried_plan = launch.plan(carried_inputs)
        found = carry.plan(text, rel, module, name, signature, carried_plan.ffi, load)
    carried_plan.more_tests = list(inputs.tests[1:])
    carried_plan.missing = [m for m in carried_plan.missing if not carry.answers(m.key)] + found.missing
    if found.plan is None or carried_plan.missing:
        # the plan's own questions stay: they are the contract keys a porter can answer
        why = found.refused or "it asks " + "; ".join(f"{m.key} ({m.question})" for m in carried_plan.missing)
        asked = [m for m in plan.missing if carry.answers(m.key)]
        if asked:
            asked[0].tried.append(f"carrying the reference's host code over: {why}")
        return None, found.flags
    carried_plan.carry = found.plan
    carried_plan.ffi.checks = flag_checks(found.flags, carried_plan.ffi.checks)
    carried_plan.python = carried_python(carried_plan.python)
    return carried_plan, found.flags


# what a carried plan still reads of its python half: the registration, the dtypes the test wiring
# and the report name, the configs the perf stage and the report count; the rest is carried as code
CARRIED_PYTHON_KEYS = ("python.signature", "python.dtypes", "python.configs", "python.register")


def carried_python(py: PyPlan) -> PyPlan:
    """``py`` less what the carried code says itself (steps, allocations, launch values, result):
    a carried plan's launch is its ``carry``, so two carried plans differ only where that does."""
    return replace(
        py,
        steps=[],
        alloc={},
        autotune_key="",
        python_grid={},
        device_of="",
        tensors_py={},
        ffi_args={},
        result="",
        out_param="",
        per_element=[],
        sources={k: v for k, v in py.sources.items() if k.startswith(CARRIED_PYTHON_KEYS)},
    )


def flag_checks(flags: list[str], checks: list[dict[str, str]]) -> list[dict[str, str]]:
    """The C arguments the reference's kernels declare boolean (``ct.Constant[bool]``) are 0 or 1:
    checked by the launcher first, before the checks over descriptors; ``checks`` that already hold
    them (a contract's ``ffi.checks``, in its order) are kept as they are."""
    first = [{"when": f"{c} != 0 and {c} != 1", "rc": "INVALID_ARGS"} for c in flags]
    unsaid = [c for c in first if c not in checks]
    return unsaid + checks


def _loader(repo: Path):
    """A dotted module of the checkout -> (its source, its path), for the helpers a reference imports."""

    def load(module: str) -> tuple[str, str] | None:
        parts = module.split(".")
        for base in (Path("src"), Path()):
            for rel in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
                try:
                    return (repo / rel).read_text(encoding="utf-8"), rel.as_posix()
                except (OSError, UnicodeDecodeError):
                    continue
        return None

    return load


def _unbound(plan: LaunchPlan, tried: tuple[str, ...]) -> list[MissingFact]:
    """Every descriptor needs a Python value before anything is rendered: one nobody packs (a second
    output the wrapper does not allocate) is a question, not an emitter crash. (C scalars are
    valued or asked for by ``python_side.fill_args`` on every layout.)"""
    asked = {m.key for m in plan.missing}
    out: list[MissingFact] = []
    for t in plan.ffi.tensors:
        if t.name not in plan.python.tensors_py and "python.tensors" not in asked:
            what = "allocated (python.alloc) and packed" if t.role == "output" else "packed"
            out.append(
                MissingFact(
                    "python.tensors",
                    f"which Python value is {what} for descriptor `{t.name}` (kernel {t.role} `{t.param}`)",
                    list(tried),
                )
            )
    return out


def _refuse_partitions(entry: Entry) -> None:
    """A partition-typed param has no place in a launch the FFI grids itself: refuse it by its real type."""
    for p in entry.params:
        if p.kind != "partition":
            continue
        declared = f"{p.name}: {p.partition_type}"
        head = p.partition_type.split("<", 1)[0]
        if head.split("::")[-1] == "MappedPartitionMut" and not head.startswith("&"):
            # cutile 0.2.0 lowers a by-value MappedPartitionMut like &mut Tensor (a KernelOutput), and
            # the FFI always sets an explicit grid.
            raise Failed(
                "kernel",
                f"{entry.name}: output parameter {declared} is lowered like &mut Tensor (a partition output); "
                "an explicit launch grid then fails with 'Specified launch grid does not match inferred "
                "tensor partition grid'",
                followup=f"declare {p.name} as &Tensor and write it via partition_full_mut (or use *mut E)",
            )
        raise Failed(
            "kernel",
            f"{entry.name}: parameter {declared} is a partition type; cutile 0.2.0 launchers take only "
            "&Tensor, &mut Tensor, by-value MappedPartitionMut, *mut E and scalars",
            followup=f"declare {p.name} as &Tensor and partition it in the kernel body (partition / partition_full_mut)",
        )
