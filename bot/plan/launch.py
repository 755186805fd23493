"""The one launch planner: every kernel shape is a case of the same plan.

Discovery finds the facts, this module merges them into the FFI half of a ``LaunchPlan`` (plain
data, each value with its source) and ``python_side`` fills the wrapper half; emitters only render.
The cases differ in a few decisions, each made here from the kernel's shape and recorded:

- **layout**: a *row* kernel (every tensor a raw pointer, one block-id axis, no grid-stride loop,
  TileGym's silu_and_mul / swiglu) is launched with one block per output row: its descriptors are
  rows x columns (the wrapper flattens leading dims), the grid is ``dim(out,0)`` computed in the
  FFI, and the reference op names the output's column count. Every other kernel is *tiled*: its
  grid terms are C arguments (``num_programs`` or ``grid_x/y/z``) the wrapper computes. So is a
  kernel of the row shape whose reference is carried over: the carried host code computes its own
  grid and passes its own descriptors (an elementwise kernel over raw pointers launches over
  elements, not rows).
- kernel scalars: descriptor fields by naming or the contract, GEMM letters (unless the carried
  launch passes the scalar: kernel.rs's ``n`` beside a flat input is its ``x.numel()``, not ``dim(x,1)``),
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
from dataclasses import dataclass, field

from bot.infer import naming
from bot.plan import common, descriptors, python_side, row_wrapper
from bot.plan.descriptors import Descriptors
from bot.plan.inputs import FfiInputs, Given, PlanInputs
from bot.plan.types import CScalar, Derived, FfiPlan, LaunchPlan, Variant
from bot.read.types import Entry
from bot.targets.types import Source

_VARIANT_PREFIX = re.compile(r"^(static_persistent|non_persistent)_")
_LITERAL_SUFFIX = re.compile(r"^(?P<base>.+)_(?P<tag>[a-z]?)(?P<value>\d+)$")
_GRID_ARGS = ("num_programs", "grid_x", "grid_y", "grid_z")
POLICY_ORDER = Source(
    "policy", "C scalars: runtime scalars, generic arguments, grid, compile options, selector"
)
TILED = Source("kernel", "not a row kernel: the wrapper computes the grid terms")
ROW_SHAPE = Source("kernel", "raw pointers, one block-id axis, no grid-stride loop: one block per row")
CARRIED_ROW_SHAPE = Source(
    "reference", "a row kernel's shape, launched on the grid the carried reference computes"
)
COMPILE_OPTIONS = Source(
    "policy", "every TileGym symbol carries num_cta_in_cga, occupancy (<= 0 = compiler default)"
)


def plan(inputs: PlanInputs) -> LaunchPlan:
    missing = common.Missing(inputs.tried)
    ffi, rows = _ffi_half(inputs, missing)
    # the wrapper half: the row defaults for a row kernel, the general rules otherwise; both honour
    # every wrapper key of the contract
    python = (row_wrapper.plan if rows else python_side.plan)(inputs.op, ffi, inputs.python, missing)
    return LaunchPlan(inputs.op, ffi, python, inputs.primary_test(), missing.items, inputs.contract_lines)


def _ffi_half(inputs: PlanInputs, missing: common.Missing) -> tuple[FfiPlan, bool]:
    """The C side of the plan, and whether it launches a row kernel (one block per row)."""
    order = None if inputs.carried else _sequence(list(inputs.entries), inputs.ffi.sequence, missing)
    entries = order if order is not None else list(inputs.entries)
    # carried host code launches each kernel on the grid it computes, with its own descriptors
    rows = not inputs.carried and row_shape(entries)
    kernel = descriptors.describe(entries, rows, inputs.ffi, missing)
    if order is not None:
        selector, when_of = None, {e.name: "always" for e in entries}
    else:
        selector, when_of = _variant_selection(entries, inputs.ffi, missing, inputs.carried)
    scalars = _Scalars()
    out = next(t for t in kernel.tensors if t.role == "output")
    if rows:
        scalars.derive("n_rows", f"dim({out.name},0)", ROW_SHAPE)
    renames = naming.sequence_names(entries) if order is not None else [{} for _ in entries]
    launches = _Launches(inputs, kernel, rows, out.name, scalars, missing)
    variants = [
        launches.variant(e, rename, when_of[e.name]) for e, rename in zip(entries, renames, strict=True)
    ]
    variants.sort(key=lambda v: v.when in ("else", "always"))  # the catch-all closes the chain
    checks = [dict(c) for c in inputs.ffi.checks]
    if not rows:
        descriptors.pointer_ranks(kernel.tensors, scalars.derived, variants, checks)
    c_scalars = scalars.runtime + scalars.generic + scalars.grid + _compile_option_scalars()
    if selector is not None:
        c_scalars.append(selector)
    ffi = FfiPlan(
        symbol=inputs.symbol,
        module=inputs.module,
        style=inputs.style,
        tensors=kernel.tensors,
        scalars=c_scalars,
        derived=scalars.derived,
        dtype_from=kernel.dtype_from,
        dtype_generic=kernel.elem,
        dtypes=kernel.dtypes,
        type_slots=list(kernel.slots.values()),
        variants=variants,
        sequence=order is not None,
        checks=checks,
        sources=_sources(inputs, kernel, entries, rows, order is not None),
        file_uses=list(inputs.file_uses),
    )
    return ffi, rows


def _sources(
    inputs: PlanInputs, kernel: Descriptors, entries: list[Entry], rows: bool, sequence: bool
) -> dict[str, Source]:
    """Where the FFI half's whole-plan choices came from."""
    return {
        "style": inputs.style_source,
        "dtype_from": kernel.dtype_source,
        "dtypes": kernel.dtypes_source,
        "order": POLICY_ORDER,
        "layout": _layout_source(entries, rows, inputs.carried),
        **({"sequence": inputs.ffi.sequence.source} if sequence and inputs.ffi.sequence else {}),
    }


def _compile_option_scalars() -> list[CScalar]:
    return [
        CScalar("num_cta_in_cga", "i32", "compile_option", "", COMPILE_OPTIONS),
        CScalar("occupancy", "i32", "compile_option", "", COMPILE_OPTIONS),
    ]


# --------------------------------------------------------------------------- the layout


def row_shape(entries: list[Entry]) -> bool:
    """One entry whose tensors are all raw pointers, one block-id axis, no grid-stride loop."""
    if len(entries) != 1:
        return False
    entry = entries[0]
    tensors = [p for p in entry.params if p.kind in ("tensor", "ptr")]
    return (
        bool(tensors)
        and all(p.kind == "ptr" for p in tensors)
        and entry.block.axes == 1
        and not entry.block.grid_stride
    )


def _layout_source(entries: list[Entry], rows: bool, carried: bool) -> Source:
    if rows:
        return ROW_SHAPE
    if carried and row_shape(entries):
        return CARRIED_ROW_SHAPE
    return TILED


# --------------------------------------------------------------------------- entries and variants


def _sequence(entries: list[Entry], named: Given | None, missing: common.Missing) -> list[Entry] | None:
    """The entries in the order ``ffi.sequence`` launches them, or None when they are alternatives."""
    if named is None:
        return None
    by_name = {e.name: e for e in entries}
    if sorted(map(str, named.value)) != sorted(by_name):
        missing.add(
            "ffi.sequence",
            f"the launch order of every entry exactly once ({', '.join(sorted(by_name))}); got {list(named.value)}",
        )
        return None
    return [by_name[str(n)] for n in named.value]


def _variant_selection(entries: list[Entry], ffi: FfiInputs, missing: common.Missing, carried: bool = False):
    """(selector C scalar or None, entry -> its ``when`` condition)."""
    if len(entries) == 1:
        return None, {entries[0].name: "always"}
    if ffi.variants is not None:
        when = ffi.variants.value
        selector = (
            CScalar(ffi.selector, "i32", "selector", "", ffi.variants.source)
            if ffi.selector is not None
            else None
        )
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
    if all(m for m, _ in literal) and len({m.group("base") for m, _ in literal}) == 1:
        if ffi.dispatch_key is not None or not carried:
            return None, _literal_selection(literal, ffi.dispatch_key, missing)
    if carried:
        # no rule says which entry: each launch of the carried code names its kernel, so its
        # launcher names the entry
        src = Source(
            "reference", "each ct.launch of the carried host code names its kernel: selector `entry`"
        )
        return CScalar("entry", "i32", "selector", "", src), {
            e.name: f"entry == {i}" for i, e in enumerate(entries)
        }
    missing.add(
        "ffi.variants",
        "which condition selects each of "
        + ", ".join(e.name for e in entries)
        + " (ffi.variants: {entry: condition}, ffi.selector: C argument)",
    )
    return None, {e.name: ("else" if i == len(entries) - 1 else "0 != 0") for i, e in enumerate(entries)}


def _literal_selection(literal: list, key: str | None, missing: common.Missing) -> dict[str, str]:
    """Literal-specialised entries (``head_norm_kernel_d64`` / ``_d128``), chosen by a dispatch key."""
    if key is not None:
        return {e.name: f"{key} == {m.group('value')}" for m, e in literal}
    missing.add(
        "ffi.dispatch_key",
        "the FFI expression whose value picks among the literal-specialised entries "
        + ", ".join(e.name for _, e in literal)
        + " (e.g. dim(q,3))",
    )
    return {e.name: f"0 == {m.group('value')}" for m, e in literal}


# --------------------------------------------------------------------------- each entry's launch


@dataclass
class _Scalars:
    """The C scalars and FFI locals the launches need, each named once, in the buckets of POLICY_ORDER."""

    runtime: list[CScalar] = field(default_factory=list)
    generic: list[CScalar] = field(default_factory=list)
    grid: list[CScalar] = field(default_factory=list)
    derived: list[Derived] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def add(self, bucket: list[CScalar], scalar: CScalar) -> None:
        if scalar.name not in self.seen:
            self.seen.add(scalar.name)
            bucket.append(scalar)

    def derive(self, name: str, expr: str, source: Source) -> None:
        if all(d.name != name for d in self.derived):
            self.derived.append(Derived(name, expr, source))


@dataclass
class _Launches:
    """One ``Variant`` per entry: its generics, arguments and grid, valued from the plan's inputs."""

    inputs: PlanInputs
    kernel: Descriptors
    rows: bool
    row_out: str  # a row kernel's output (its column count sizes the rows)
    scalars: _Scalars
    missing: common.Missing

    def variant(self, entry: Entry, rename: dict[str, str], when: str) -> Variant:
        generics = self._generics(entry, rename)
        args = self._args(entry, rename)
        grid, grid_source = _grid(entry, self.inputs.ffi, self.rows)
        grid = [rename.get(g, g) for g in grid]
        for g in grid:
            if g in _GRID_ARGS or g in rename.values():
                self.scalars.add(self.scalars.grid, CScalar(g, "i32", "grid", "", grid_source))
        return Variant(when, entry.name, generics, args, grid, entry.name, grid_source, entry.unsafe)

    def _generics(self, entry: Entry, rename: dict[str, str]) -> list[str]:
        """One launch generic per declared one: the dtype, a type slot's dtype, or a const's value."""
        generics = []
        data_generic = descriptors.element_generic(entry)
        for g in entry.generics:
            if g.kind == "type":
                slot = self.kernel.slots.get(g.name) if g.name != data_generic else None
                generics.append("dtype" if slot is None or slot.dtype == "dtype" else f'"{slot.dtype}"')
                continue
            value, source, derived_expr = _generic_value(g.name, self.kernel.dtype_from, self.inputs.ffi)
            value = rename.get(value, value)
            if derived_expr is not None:
                self.scalars.derive(value, derived_expr, source)
            else:
                self.scalars.add(self.scalars.generic, CScalar(value, "i32", "generic", g.name, source))
            generics.append(value)
        return generics

    def _args(self, entry: Entry, rename: dict[str, str]) -> list[str]:
        """One launch argument per parameter: a descriptor, or a scalar the FFI derives or takes."""
        args = []
        for p in entry.params:
            if p.kind in ("tensor", "ptr"):
                args.append(f"{'ten' if p.kind == 'tensor' else 'ptr'}({self.kernel.c_name(p.name)})")
                continue
            name = rename.get(p.name, p.name)
            ty = descriptors.slot_scalar_type(p.name, p.ty, self.kernel.slots, self.missing)
            expr, source = self._scalar_value(p.name, ty, entry)
            if expr is None and self.rows:
                expr, source = _row_columns(p.name, self.row_out, self.inputs.python.out_cols_var) or (
                    expr,
                    source,
                )
            if expr is None:
                ctype = "f32" if ty.startswith("f") else "i32"
                self.scalars.add(self.scalars.runtime, CScalar(name, ctype, "runtime_scalar", p.name, source))
            else:
                self.scalars.derive(name, expr, source)
            args.append(name)
        return args

    def _scalar_value(self, name: str, ty: str, entry: Entry) -> tuple[str | None, Source]:
        """FFI expression for a kernel scalar, or (None, source) when it is a C argument of its own."""
        carried = self.inputs.carried_scalars.get(name)
        if carried is not None and name not in self.inputs.ffi.scalars:
            # a parameter of the cuTile kernel the carried launch hands it outranks a naming rule; a
            # scalar the rules leave a C argument anyway keeps their source
            expr, source = self._scalar_value_by_rules(name, ty, entry)
            if expr is None:
                return None, source
            return None, Source("reference", f"{carried}: a C argument the wrapper passes")
        return self._scalar_value_by_rules(name, ty, entry)

    def _scalar_value_by_rules(self, name: str, ty: str, entry: Entry) -> tuple[str | None, Source]:
        known = _known_scalar(name, self.kernel.bases, self.inputs.ffi)
        if known:
            expr, src = known
            return (None, src) if expr == "arg" else (expr, src)  # "arg": the contract keeps it a C argument
        gemm = naming.gemm_dim(name, entry, self.kernel.tensors)
        if gemm:
            return gemm
        return None, Source(
            "policy", f"`{name}: {ty}` has no descriptor meaning: a C argument the wrapper passes"
        )


def _generic_value(name: str, dtype_from: str, ffi: FfiInputs) -> tuple[str, Source, str | None]:
    """(C argument or derived local, source, the local's FFI expression or None for an argument)."""
    derived = ffi.derived_generics.get(name)
    if derived is not None or name == "CAST_TF32":
        src = (
            derived.source
            if derived is not None
            else Source("naming", "CAST_TF32 is derived in the FFI: 1 for f32 inputs (TileGym's tf32 rule)")
        )
        explicit = derived.value if derived is not None else None
        return name.lower(), src, explicit if explicit is not None else f"cast_tf32({dtype_from})"
    explicit_arg = ffi.generics.get(name)  # the C argument feeding it: the contract's, else the naming rule
    if explicit_arg is not None:
        return explicit_arg.value, explicit_arg.source, None
    arg, src = naming.generic_arg_name(name)
    return arg, src, None


def _known_scalar(name: str, bases: dict[str, str], ffi: FfiInputs) -> tuple[str, Source] | None:
    """A kernel scalar's FFI expression from the contract's ``ffi.scalars.<name>`` (verbatim, so
    possibly ``arg``), else from the descriptor-field naming rule; None when neither says."""
    explicit = ffi.scalars.get(name)
    if explicit is not None:
        return explicit.value, explicit.source
    return naming.descriptor_scalar(name, bases)


def _row_columns(name: str, out: str, out_cols_var: Given[str] | None) -> tuple[str, Source] | None:
    """A row kernel's scalar that the reference op sizes the output's columns with (``hidden_size``)."""
    if out_cols_var is None or out_cols_var.value != name:
        return None
    detail = out_cols_var.source.detail
    return f"dim({out},1)", Source("reference", f"{detail} -> `{name}` is the output's column count")


def _grid(entry: Entry, ffi: FfiInputs, rows: bool) -> tuple[list[str], Source]:
    explicit = ffi.grids.get(entry.name)  # the contract's ``ffi.grid.<entry>``
    if explicit is not None:
        return list(explicit.value), explicit.source
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
