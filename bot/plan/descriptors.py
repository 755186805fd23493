"""The C descriptors of a launch and the types they carry: every tensor or pointer parameter of the
entries as one ``CTensor`` (outputs first), the element generic and the dtypes the FFI dispatches
over it, and the type slots (a second type generic such as an accumulator's ``E2``), each with its
source."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot import dtypes
from bot.infer import naming
from bot.plan import common
from bot.plan.inputs import FfiInputs
from bot.plan.types import CTensor, Derived, TypeSlot, Variant
from bot.read.types import Entry
from bot.targets.types import Source

# The dtypes a type slot may be given (the contract's ``ffi.type_generics.<G>``), and the ones a
# scalar typed by the slot can cross the C ABI as.
SLOT_DTYPES = (*dtypes.UNPACKED, "dtype")
SCALAR_SLOT_TYPES = ("f32", "i32")


@dataclass
class Descriptors:
    tensors: list[CTensor]  # outputs first, then inputs, in parameter order
    elem: str  # the element generic ("" when the entry has none: the element type is fixed)
    slots: dict[str, TypeSlot]  # type generic -> what the FFI passes for it
    dtype_from: str  # the C tensor whose dtype drives the element generic
    dtype_source: Source
    dtypes: list[str]  # the dtypes the FFI launches
    dtypes_source: Source
    bases: dict[str, str]  # base name in kernel identifiers ("in" for "in_ptr") -> C tensor name

    def c_name(self, param: str) -> str:
        return next(t.name for t in self.tensors if t.param == param)


def describe(entries: list[Entry], rows: bool, ffi: FfiInputs, missing: common.Missing) -> Descriptors:
    """The descriptors of ``entries``; ``rows``: a row kernel's, every one rows x columns."""
    elem = element_generic(entries[0])
    slots = type_slots(entries, ffi)
    tensors = _tensors(entries)
    _slot_tensors(tensors, slots, elem, missing)
    if rows:
        for t in tensors:
            t.rank = 2  # rows x columns: the wrapper flattens leading dims
    dtype_from, dtype_source = _dtype_driver(tensors, elem, ffi)
    dtypes, dtypes_source = _dispatch_dtypes(elem, tensors, dtype_from, ffi)
    bases = {
        naming.tensor_base(e.param(t.param)): t.name
        for e in entries
        for t in tensors
        if any(p.name == t.param for p in e.params)
    }
    return Descriptors(tensors, elem, slots, dtype_from, dtype_source, dtypes, dtypes_source, bases)


def element_generic(entry: Entry) -> str:
    """The data dtype generic: the first type generic a tensor or pointer is typed with, else the
    first type generic ("" when the entry declares none)."""
    types = [g.name for g in entry.generics if g.kind == "type"]
    used = {p.elem for p in entry.params if p.kind in ("tensor", "ptr")}
    return next((name for name in types if name in used), types[0] if types else "")


def _c_tensors(entry: Entry) -> list[CTensor]:
    """Every tensor/pointer parameter as a C descriptor, outputs first (P11)."""
    made: list[CTensor] = []
    for p in entry.params:
        if p.kind not in ("tensor", "ptr"):
            continue
        name, bind, src = naming.c_tensor_name(p)
        role = "output" if p.name in entry.outputs else "input"
        evidence = entry.output_evidence.get(p.name, "")
        source = Source("kernel", f"{p.name}: output via {evidence}") if role == "output" else src
        made.append(CTensor(name, bind, p.name, p.kind, p.elem, role, p.rank, source))
    return [t for t in made if t.role == "output"] + [t for t in made if t.role == "input"]


def _tensors(entries: list[Entry]) -> list[CTensor]:
    """Descriptors of every entry, merged by parameter name (variants share theirs), outputs first."""
    merged: dict[str, CTensor] = {}
    for entry in entries:
        for t in _c_tensors(entry):
            if t.param not in merged:
                merged[t.param] = t
            elif t.role == "output":
                merged[t.param].role = "output"
    ordered = list(merged.values())
    return [t for t in ordered if t.role == "output"] + [t for t in ordered if t.role == "input"]


# --------------------------------------------------------------------------- dtypes


def _dtype_driver(tensors: list[CTensor], elem: str, ffi: FfiInputs) -> tuple[str, Source]:
    chosen = ffi.dtype_from
    if chosen is not None and any(t.name == chosen.value for t in tensors):
        return chosen.value, chosen.source
    if not elem:  # no element generic: the driver's dtype is only checked against its fixed type
        t = next((t for t in tensors if t.role == "input"), tensors[0])
        return t.name, Source("kernel", f"no type generic: {t.name} must be {t.elem}")
    for t in tensors:
        if t.role == "input" and t.elem == elem:
            return t.name, Source("policy", f"dtype of the first input of element type {elem}")
    for t in tensors:
        if t.elem == elem:
            return t.name, Source("policy", f"dtype of the first tensor of element type {elem}")
    return tensors[0].name, Source("policy", "dtype of the first tensor")


def _dispatch_dtypes(
    elem: str, tensors: list[CTensor], dtype_from: str, ffi: FfiInputs
) -> tuple[list[str], Source]:
    """The dtypes the FFI launches: the dispatch list, or the one fixed type of an entry without
    an element generic (the kernel decides; there is nothing to dispatch over)."""
    if not elem:
        fixed = next(t.elem for t in tensors if t.name == dtype_from)
        return [fixed], Source(
            "kernel", f"no type generic: the element type is fixed to {fixed}, no dtype dispatch"
        )
    if ffi.dtypes is not None:
        return list(ffi.dtypes.value), ffi.dtypes.source
    return list(common.DEFAULT_DTYPES), Source(
        "policy", "TileGym ops dispatch f32, f16, bf16 for the element generic"
    )


# --------------------------------------------------------------------------- type slots


def type_slots(entries: list[Entry], ffi: FfiInputs) -> dict[str, TypeSlot]:
    """Every type generic that is not its entry's element generic (an accumulator dtype such as
    ``E2``): the dtype the FFI passes for it, by name, in declared order. The contract's
    ``ffi.type_generics.<G>`` names it, else "f32" by rule 31 (the only "policy" source it gives)."""
    slots: dict[str, TypeSlot] = {}
    for entry in entries:
        data = element_generic(entry)
        for g in entry.generics:
            if g.kind != "type" or g.name == data or g.name in slots:
                continue
            explicit = ffi.type_generics.get(g.name)
            slots[g.name] = (
                TypeSlot(g.name, explicit.value, explicit.source)
                if explicit is not None
                else TypeSlot(g.name, "f32", _rule_31(g.name))
            )
    return slots


def _rule_31(generic: str) -> Source:
    return Source(
        "policy",
        f"TileGym coding rule 31: {generic}, a second element-type generic, is an accumulator slot; "
        f'the FFI passes "f32" for it unless the contract (ffi.type_generics.{generic}) says otherwise',
    )


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
        if slot.source.kind == "policy" and not missing.asked(key):  # rule 31's default: no source named it
            missing.add(
                key,
                f"the dtype the FFI passes for type generic {slot.generic}: it types tensor `{t.param}`, so it "
                f"is no accumulator slot ({', '.join(SLOT_DTYPES[:-1])}, or dtype: the element generic's)",
            )
        t.elem = elem if slot.dtype == "dtype" else slot.dtype


def slot_scalar_type(name: str, ty: str, slots: dict[str, TypeSlot], missing: common.Missing) -> str:
    """A scalar typed by a slot generic (``acc_zero: E2``) crosses the C ABI as the slot's dtype."""
    slot = slots.get(ty)
    if slot is None:
        return ty
    if slot.dtype not in SCALAR_SLOT_TYPES:
        if missing.asked(f"ffi.type_generics.{slot.generic}"):
            return "f32"
        missing.add(
            f"ffi.type_generics.{slot.generic}",
            f"scalar `{name}: {ty}` crosses the C ABI only as "
            f"{' or '.join(SCALAR_SLOT_TYPES)}; {slot.generic} is {slot.dtype} ({slot.source})",
        )
        return "f32"
    return slot.dtype


# --------------------------------------------------------------------------- ranks of raw pointers


def pointer_ranks(
    tensors: list[CTensor], derived: list[Derived], variants: list[Variant], checks: list[dict[str, str]]
) -> None:
    """A raw pointer has no declared rank: require the dims its expressions read (checked in the FFI)."""
    exprs = [d.expr for d in derived] + [g for v in variants for g in v.grid] + [c["when"] for c in checks]
    for t in tensors:
        if t.kind != "ptr":
            continue
        used = [
            int(m.group(1)) for e in exprs for m in re.finditer(rf"\b(?:dim|stride)\({t.name},\s*(\d)\)", e)
        ]
        t.rank = max(used) + 1 if used else 1
