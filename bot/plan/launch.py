"""The one launch planner: every kernel shape is a case of the same plan.

Discovery finds the facts, this module merges them into the FFI half of a ``LaunchPlan`` (plain
data, each value with its source) and ``python_side`` fills the wrapper half; emitters only render.
The cases differ in a few decisions, each made here from the kernel's shape and recorded:

- **layout**: a *row* kernel (every tensor a raw pointer, one block-id axis, no grid-stride loop,
  TileGym's silu_and_mul / swiglu) is launched with one block per output row: its descriptors are
  rows x columns (the wrapper flattens leading dims), the grid is ``dim(out,0)`` computed in the
  FFI, and the reference op names the output's column count. Every other kernel is *tiled*: its
  grid terms are C arguments (``num_programs`` or ``grid_x/y/z``) the wrapper computes. So is a
  kernel of the row shape whose directly launched reference was read (``reference_direct``): the
  reference states its descriptors, grid and arguments (an elementwise kernel over raw pointers
  launches over elements, not rows), and its wrapper steps bind every name those arguments read.
- kernel scalars: descriptor fields by naming or the contract, GEMM letters (unless the reference
  passes the scalar: kernel.rs's ``n`` beside a flat input is its ``x.numel()``, not ``dim(x,1)``),
  else C arguments of their own (runtime scalars such as ``eps``) whose Python value the wrapper
  side finds;
- generics: the entry's own, in declared order (the element generic -> the dtype, a second type
  generic -> an accumulator slot, "f32" by TileGym's rule 31 unless the contract names its dtype,
  const -> a C argument or a derived FFI value such as ``CAST_TF32``);
- variants: ``static_persistent_*`` / ``non_persistent_*`` by a selector, literal-specialised
  entries by a dispatch key, or the contract's conditions;
- a *sequence* (``ffi.sequence``: the reference launches the entries one after the other, as
  flash_decode's split-KV kernel and its reduction) launches every entry in that order, each C
  argument name a step shares with an earlier one numbered (``naming.sequence_names``).
"""

from __future__ import annotations

import re

from bot.checkout import Checkout
from bot.infer import naming
from bot.infer.facts import Facts
from bot.plan import common, python_side, row_wrapper
from bot.types import (
    CScalar,
    CTensor,
    Derived,
    Entry,
    FfiPlan,
    KernelSignature,
    LaunchPlan,
    Source,
    Target,
    TypeSlot,
    Variant,
)

_VARIANT_PREFIX = re.compile(r"^(static_persistent|non_persistent)_")
_LITERAL_SUFFIX = re.compile(r"^(?P<base>.+)_(?P<tag>[a-z]?)(?P<value>\d+)$")
POLICY_ORDER = Source(
    "policy", "C scalars: runtime scalars, generic arguments, grid, compile options, selector"
)
TILED = Source("kernel", "not a row kernel: the wrapper computes the grid terms")


ROW_SHAPE = Source("kernel", "raw pointers, one block-id axis, no grid-stride loop: one block per row")


def row_layout(entries: list[Entry], facts: Facts | None = None) -> bool:
    """One entry whose tensors are all raw pointers, one block-id axis, no grid-stride loop, and no
    launch read from the cuTile reference: what the reference states it launches (its descriptors,
    grid and arguments, ``reference_direct``) outranks a guess from the kernel's shape."""
    if len(entries) != 1 or (facts is not None and reference_launch_read(facts)):
        return False
    entry = entries[0]
    tensors = [p for p in entry.params if p.kind in ("tensor", "ptr")]
    return (
        bool(tensors)
        and all(p.kind == "ptr" for p in tensors)
        and entry.block.axes == 1
        and not entry.block.grid_stride
    )


def reference_launch_read(facts: Facts) -> bool:
    """Whether the reader of a directly launched reference mapped its launch onto kernel.rs."""
    source = facts.source("python.tensors")
    return source is not None and source.kind == "reference"


def plan(target: Target, signature: KernelSignature, facts: Facts, checkout: Checkout) -> LaunchPlan:
    missing = common.Missing()
    entries = list(signature.entries)
    order = _sequence(entries, facts, missing)
    if order is not None:
        entries = order
    renames = naming.sequence_names(entries) if order is not None else [{} for _ in entries]
    first = entries[0]
    elem = common.element_generic(first)
    slots = _type_slots(entries, facts)
    tensors = _tensors(entries)
    _slot_tensors(tensors, slots, elem, missing)
    rows = row_layout(entries, facts)
    if rows:
        for t in tensors:
            t.rank = 2  # rows x columns: the wrapper flattens leading dims
    dtype_from, dtype_src = common.dtype_driver(tensors, elem, facts)
    dtypes, dtypes_src = common.dispatch_dtypes(elem, tensors, dtype_from, facts)
    bases = {
        naming.tensor_base(e.param(t.param)): t.name for e in entries for t in tensors if _has(e, t.param)
    }

    runtime: list[CScalar] = []
    generic_args: list[CScalar] = []
    grid_args: list[CScalar] = []
    derived: list[Derived] = []
    seen: set[str] = set()

    def add(bucket: list[CScalar], scalar: CScalar) -> None:
        if scalar.name not in seen:
            seen.add(scalar.name)
            bucket.append(scalar)

    def derive(name: str, expr: str, source: Source) -> None:
        if all(d.name != name for d in derived):
            derived.append(Derived(name, expr, source))

    row_out = next(t for t in tensors if t.role == "output")
    if rows:
        derive("n_rows", f"dim({row_out.name},0)", ROW_SHAPE)
    if order is not None:
        selector, when_of = None, {e.name: "always" for e in entries}
    else:
        selector, when_of = _variant_selection(entries, facts, missing)
    variants: list[Variant] = []
    for entry, rename in zip(entries, renames, strict=True):
        generics = []
        data_generic = common.element_generic(entry)
        for g in entry.generics:
            if g.kind == "type":
                slot = slots.get(g.name) if g.name != data_generic else None
                generics.append("dtype" if slot is None or slot.dtype == "dtype" else f'"{slot.dtype}"')
                continue
            value, source, derived_expr = _generic_value(g.name, dtype_from, facts)
            value = rename.get(value, value)
            if derived_expr is not None:
                derive(value, derived_expr, source)
            else:
                add(generic_args, CScalar(value, "i32", "generic", g.name, source))
            generics.append(value)
        args = []
        for p in entry.params:
            if p.kind == "tensor":
                args.append(f"ten({_c_name(tensors, p.name)})")
            elif p.kind == "ptr":
                args.append(f"ptr({_c_name(tensors, p.name)})")
            else:
                name = rename.get(p.name, p.name)
                ty = _slot_scalar_type(p.name, p.ty, slots, missing)
                expr, source = _scalar_value(p.name, ty, entry, bases, tensors, facts, name)
                if expr is None and rows:
                    expr, source = _row_columns(p.name, row_out.name, facts) or (expr, source)
                if expr is None:
                    add(
                        runtime,
                        CScalar(
                            name, "f32" if ty.startswith("f") else "i32", "runtime_scalar", p.name, source
                        ),
                    )
                else:
                    derive(name, expr, source)
                args.append(name)
        grid, grid_source = _grid(entry, facts, rows)
        grid = [rename.get(g, g) for g in grid]
        for g in grid:
            if g in ("num_programs", "grid_x", "grid_y", "grid_z") or g in rename.values():
                add(grid_args, CScalar(g, "i32", "grid", "", grid_source))
        variants.append(
            Variant(
                when_of[entry.name], entry.name, generics, args, grid, entry.name, grid_source, entry.unsafe
            )
        )
    variants.sort(key=lambda v: v.when in ("else", "always"))  # the catch-all closes the chain

    if not rows:
        _pointer_ranks(tensors, derived, variants, facts)
    scalars = runtime + generic_args + grid_args + common.compile_option_scalars()
    if selector is not None:
        scalars.append(selector)
    ffi = FfiPlan(
        symbol=target.symbol,
        module=signature.module,
        style=checkout.style,
        tensors=tensors,
        dtype_from=dtype_from,
        dtype_generic=elem,
        dtypes=dtypes,
        scalars=scalars,
        derived=derived,
        variants=variants,
        checks=common.contract_checks(facts),
        sequence=order is not None,
        type_slots=list(slots.values()),
        sources={
            "style": checkout.style_source,
            "dtype_from": dtype_src,
            "dtypes": dtypes_src,
            "order": POLICY_ORDER,
            "layout": _layout_source(entries, rows, facts),
            **({"sequence": facts.source("ffi.sequence")} if order is not None else {}),
        },
        file_uses=list(signature.file_uses),
    )
    # the wrapper half: the row defaults for a row kernel, the general rules otherwise; both honour
    # every wrapper key of the contract
    python = (row_wrapper.plan if rows else python_side.plan)(target, ffi, facts, missing)
    tests = common.test_wiring(target, checkout)
    return LaunchPlan(target.op, ffi, python, tests, missing.items, int(facts.get("contract.lines", 0) or 0))


def _type_slots(entries: list[Entry], facts: Facts) -> dict[str, TypeSlot]:
    """Every type generic that is not its entry's element generic (an accumulator dtype such as
    ``E2``): the dtype the FFI passes for it, by name, in declared order."""
    slots: dict[str, TypeSlot] = {}
    for entry in entries:
        data = common.element_generic(entry)
        for g in entry.generics:
            if g.kind == "type" and g.name != data and g.name not in slots:
                dtype, source = common.type_slot(g.name, facts)
                slots[g.name] = TypeSlot(g.name, dtype, source)
    return slots


def _slot_tensors(
    tensors: list[CTensor], slots: dict[str, TypeSlot], elem: str, missing: common.Missing
) -> None:
    """A tensor typed by a slot generic takes the slot's dtype. Such a generic is no accumulator (rule 31
    does not decide it), so only a source that names its dtype may: otherwise it is asked for."""
    for t in tensors:
        slot = slots.get(t.elem)
        if slot is None:
            continue
        key = f"ffi.type_generics.{slot.generic}"
        if slot.source.kind == "policy" and not _asked(missing, key):  # rule 31's default: no source named it
            missing.add(
                key,
                f"the dtype the FFI passes for type generic {slot.generic}: it types tensor `{t.param}`, so it "
                f"is no accumulator slot ({', '.join(common.SLOT_DTYPES[:-1])}, or dtype: the element generic's)",
            )
        t.elem = elem if slot.dtype == "dtype" else slot.dtype


def _slot_scalar_type(name: str, ty: str, slots: dict[str, TypeSlot], missing: common.Missing) -> str:
    """A scalar typed by a slot generic (``acc_zero: E2``) crosses the C ABI as the slot's dtype."""
    slot = slots.get(ty)
    if slot is None:
        return ty
    if slot.dtype not in common.SCALAR_SLOT_TYPES:
        if _asked(missing, f"ffi.type_generics.{slot.generic}"):
            return "f32"
        missing.add(
            f"ffi.type_generics.{slot.generic}",
            f"scalar `{name}: {ty}` crosses the C ABI only as "
            f"{' or '.join(common.SCALAR_SLOT_TYPES)}; {slot.generic} is {slot.dtype} ({slot.source})",
        )
        return "f32"
    return slot.dtype


def _asked(missing: common.Missing, key: str) -> bool:
    return any(m.key == key for m in missing.items)


def _layout_source(entries: list[Entry], rows: bool, facts: Facts) -> Source:
    if rows:
        return ROW_SHAPE
    if row_layout(entries):  # the shape of a row kernel, launched as its reference launches it
        read = facts.source("python.tensors")
        return Source("reference", f"{read.detail}: a row kernel's shape, launched as the reference does")
    return TILED


def _has(entry: Entry, name: str) -> bool:
    return any(p.name == name for p in entry.params)


def _tensors(entries: list[Entry]) -> list[CTensor]:
    """Descriptors of every entry, merged by parameter name (variants share theirs), outputs first."""
    merged: dict[str, CTensor] = {}
    for entry in entries:
        for t in common.c_tensors(entry):
            if t.param not in merged:
                merged[t.param] = t
            elif t.role == "output":
                merged[t.param].role = "output"
    ordered = list(merged.values())
    return [t for t in ordered if t.role == "output"] + [t for t in ordered if t.role == "input"]


def _c_name(tensors: list[CTensor], param: str) -> str:
    return next(t.name for t in tensors if t.param == param)


def _sequence(entries: list[Entry], facts: Facts, missing: common.Missing) -> list[Entry] | None:
    """The entries in the order ``ffi.sequence`` launches them, or None when they are alternatives."""
    named = facts.get("ffi.sequence")
    if not isinstance(named, list):
        return None
    by_name = {e.name: e for e in entries}
    if sorted(map(str, named)) != sorted(by_name):
        missing.add(
            "ffi.sequence",
            f"the launch order of every entry exactly once ({', '.join(sorted(by_name))}); got {named}",
            facts,
        )
        return None
    return [by_name[str(n)] for n in named]


def _variant_selection(entries: list[Entry], facts: Facts, missing: common.Missing):
    """(selector C scalar or None, entry -> its ``when`` condition)."""
    if len(entries) == 1:
        return None, {entries[0].name: "always"}
    explicit = facts.get("ffi.variants")
    if isinstance(explicit, dict):
        src = facts.source("ffi.variants")
        when = {name: str(cond) for name, cond in explicit.items()}
        sel = facts.get("ffi.selector")
        selector = CScalar(str(sel), "i32", "selector", "", src) if isinstance(sel, str) else None
        return selector, {e.name: when.get(e.name, "else") for e in entries}
    prefixes = {e.name: _VARIANT_PREFIX.match(e.name) for e in entries}
    if all(prefixes.values()) and len(entries) == 2:
        src = Source(
            "naming",
            "static_persistent_* / non_persistent_* entries: selector `persistent` (0 = non-persistent)",
        )
        return CScalar("persistent", "i32", "selector", "", src), {
            e.name: ("persistent != 0" if prefixes[e.name].group(1) == "static_persistent" else "else")
            for e in entries
        }
    literal = [(_LITERAL_SUFFIX.match(e.name), e) for e in entries]
    key = facts.get("ffi.dispatch_key")
    if all(m for m, _ in literal) and len({m.group("base") for m, _ in literal}) == 1:
        if isinstance(key, str):
            return None, {e.name: f"{key} == {m.group('value')}" for m, e in literal}
        missing.add(
            "ffi.dispatch_key",
            "the FFI expression whose value picks among the literal-specialised entries "
            + ", ".join(e.name for e in entries)
            + " (e.g. dim(q,3))",
            facts,
        )
        return None, {e.name: f"0 == {m.group('value')}" for m, e in literal}
    missing.add(
        "ffi.variants",
        "which condition selects each of "
        + ", ".join(e.name for e in entries)
        + " (ffi.variants: {entry: condition}, ffi.selector: C argument)",
        facts,
    )
    return None, {e.name: ("else" if i == len(entries) - 1 else "0 != 0") for i, e in enumerate(entries)}


def _generic_value(name: str, dtype_from: str, facts: Facts) -> tuple[str, Source, str | None]:
    """(C argument or derived local, source, the local's FFI expression or None for an argument)."""
    key = f"ffi.derived_generics.{name}"
    if facts.has(key) or name == "CAST_TF32":
        src = facts.source(key) or Source(
            "naming", "CAST_TF32 is derived in the FFI: 1 for f32 inputs (TileGym's tf32 rule)"
        )
        explicit = facts.get(key)
        return name.lower(), src, str(explicit) if explicit is not None else f"cast_tf32({dtype_from})"
    arg, src = common.generic_arg(name, facts)
    return arg, src, None


def _scalar_value(name, ty, entry, bases, tensors, facts, c_name="") -> tuple[str | None, Source]:
    """FFI expression for a kernel scalar, or (None, source) when it is a C argument of its own."""
    known = common.known_scalar(name, bases, facts)
    if known:
        expr, src = known
        return (None, src) if expr == "arg" else (expr, src)  # "arg": the contract keeps it a C argument
    gemm = naming.gemm_dim(name, entry, tensors)
    if gemm:
        read = facts.source(f"python.args.{c_name or name}")
        if read is not None and read.kind == "reference":
            # what the reference passes (`n = x.numel()`) outranks a guess from the letter alone
            return None, Source("reference", f"{read.detail}: a C argument the wrapper passes")
        return gemm
    return None, Source(
        "policy", f"`{name}: {ty}` has no descriptor meaning: a C argument the wrapper passes"
    )


def _row_columns(name: str, out: str, facts: Facts) -> tuple[str, Source] | None:
    """A row kernel's scalar that the reference op sizes the output's columns with (``hidden_size``)."""
    if facts.get("reference.out_cols_var") != name:
        return None
    src = facts.source("reference.out_cols_var")
    return f"dim({out},1)", Source("reference", f"{src.detail} -> `{name}` is the output's column count")


def _grid(entry: Entry, facts: Facts, rows: bool) -> tuple[list[str], Source]:
    explicit = common.contract_grid(entry, facts)
    if explicit:
        return explicit
    if rows:
        return ["n_rows", "1", "1"], ROW_SHAPE
    block = entry.block
    names = naming.grid_arg_names(entry)  # the reader values the same names
    if block.axes <= 1:
        why = (
            "grid-stride loop: the host sizes a 1-D grid" if block.grid_stride else "1-D block id: a 1-D grid"
        )
        return names + ["1", "1"], Source("kernel", f"{entry.name}: {why} (C argument num_programs)")
    return names + ["1"] * (3 - block.axes), Source(
        "kernel", f"{entry.name}: {block.axes}-axis block id ({block.evidence})"
    )


def _pointer_ranks(
    tensors: list[CTensor], derived: list[Derived], variants: list[Variant], facts: Facts
) -> None:
    """A raw pointer has no declared rank: require the dims its expressions read (checked in the FFI)."""
    exprs = (
        [d.expr for d in derived]
        + [g for v in variants for g in v.grid]
        + [c["when"] for c in common.contract_checks(facts)]
    )
    for t in tensors:
        if t.kind != "ptr":
            continue
        used = [
            int(m.group(1)) for e in exprs for m in re.finditer(rf"\b(?:dim|stride)\({t.name},\s*(\d)\)", e)
        ]
        t.rank = max(used) + 1 if used else 1
