"""Plan pieces every host pattern shares: tensor naming and order, the element generic,
compile options, dtype sets. Each returns plan data with its source."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.checkout import Checkout
from bot.infer import naming
from bot.infer.facts import Facts
from bot.types import CScalar, CTensor, Entry, MissingFact, PyStep, Source, Target, TestWiring

# cutile generic strings the FFI dispatches, and the torch dtypes the wrapper accepts (the integer
# ones for an entry whose driving tensor has a fixed integer type, moe_align_block's int64 ids).
DEFAULT_DTYPES = ["f32", "f16", "bf16"]
TORCH_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f8e5m2": "float8_e5m2",
    "f8e4m3fn": "float8_e4m3fn",
    "i32": "int32",
    "i64": "int64",
}
POLICY_TENSOR_ORDER = Source("policy", "outputs first, then inputs in kernel parameter order (TileGym P11)")


@dataclass
class Missing:
    items: list[MissingFact] = field(default_factory=list)

    def add(self, key: str, question: str, facts: Facts | None = None) -> None:
        tried = list(facts.tried.get(key, [])) if facts else []
        self.items.append(MissingFact(key, question, tried))


def element_generic(entry: Entry) -> str:
    """The data dtype generic: the first type generic a tensor or pointer is typed with, else the
    first type generic ("" when the entry declares none)."""
    types = [g.name for g in entry.generics if g.kind == "type"]
    used = {p.elem for p in entry.params if p.kind in ("tensor", "ptr")}
    return next((name for name in types if name in used), types[0] if types else "")


# The dtypes a type slot may be given (the contract's ``ffi.type_generics.<G>``), and the ones a
# scalar typed by the slot can cross the C ABI as.
SLOT_DTYPES = ("f32", "f16", "bf16", "i32", "i64", "f8e5m2", "f8e4m3fn", "dtype")
SCALAR_SLOT_TYPES = ("f32", "i32")


def type_slot(generic: str, facts: Facts) -> tuple[str, Source]:
    """(dtype string, source) for a type generic that is not the element generic: the contract's
    ``ffi.type_generics.<G>``, else "f32" by rule 31 (the only "policy" source it gives)."""
    explicit = facts.get(f"ffi.type_generics.{generic}")
    if isinstance(explicit, str):
        return explicit, facts.source(f"ffi.type_generics.{generic}")
    return "f32", Source(
        "policy",
        f"TileGym coding rule 31: {generic}, a second element-type generic, is an accumulator slot; "
        f'the FFI passes "f32" for it unless the contract (ffi.type_generics.{generic}) says otherwise',
    )


def c_tensors(entry: Entry) -> list[CTensor]:
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


def kernel_base_names(tensors: list[CTensor], entry: Entry) -> dict[str, str]:
    """Base name used in kernel identifiers (``in`` for ``in_ptr``) -> C tensor name."""
    out: dict[str, str] = {}
    for t in tensors:
        out[naming.tensor_base(entry.param(t.param))] = t.name
    return out


def dtype_driver(tensors: list[CTensor], elem: str, facts: Facts) -> tuple[str, Source]:
    chosen = facts.get("ffi.dtype_from")
    if isinstance(chosen, str) and any(t.name == chosen for t in tensors):
        return chosen, facts.source("ffi.dtype_from")
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


def dtypes(facts: Facts) -> tuple[list[str], Source]:
    value = facts.get("ffi.dtypes")
    if isinstance(value, list) and value:
        return [str(v) for v in value], facts.source("ffi.dtypes")
    return list(DEFAULT_DTYPES), Source(
        "policy", "TileGym ops dispatch f32, f16, bf16 for the element generic"
    )


def dispatch_dtypes(
    elem: str, tensors: list[CTensor], dtype_from: str, facts: Facts
) -> tuple[list[str], Source]:
    """The dtypes the FFI launches: the dispatch list, or the one fixed type of an entry without
    an element generic (the kernel decides; there is nothing to dispatch over)."""
    if not elem:
        fixed = next(t.elem for t in tensors if t.name == dtype_from)
        return [fixed], Source(
            "kernel", f"no type generic: the element type is fixed to {fixed}, no dtype dispatch"
        )
    return dtypes(facts)


def generic_arg(generic: str, facts: Facts) -> tuple[str, Source]:
    """The C argument feeding a const generic: the contract's ``ffi.generics.<G>``, else the naming rule."""
    explicit = facts.get(f"ffi.generics.{generic}")
    if isinstance(explicit, str):
        return explicit, facts.source(f"ffi.generics.{generic}")
    return naming.generic_arg_name(generic)


def known_scalar(name: str, bases: dict[str, str], facts: Facts) -> tuple[str, Source] | None:
    """A kernel scalar's FFI expression from the contract's ``ffi.scalars.<name>`` (verbatim, so
    possibly ``arg``), else from the descriptor-field naming rule; None when neither says."""
    explicit = facts.get(f"ffi.scalars.{name}")
    if isinstance(explicit, str):
        return explicit, facts.source(f"ffi.scalars.{name}")
    return naming.descriptor_scalar(name, bases)


def compile_option_scalars() -> list[CScalar]:
    src = Source("policy", "every TileGym symbol carries num_cta_in_cga, occupancy (<= 0 = compiler default)")
    return [
        CScalar("num_cta_in_cga", "i32", "compile_option", "", src),
        CScalar("occupancy", "i32", "compile_option", "", src),
    ]


PROLOGUE = Source(
    "policy", "wrapper prologue: CUDA tensors on one device, an accepted dtype, detached (forward only)"
)


def wrapper_prologue(op: str, params: list[str], same_dtype: bool) -> list[PyStep]:
    """The checks every wrapper starts with; ``same_dtype`` also requires one dtype for all ``params``."""
    if not params:
        return []
    first = params[0]

    def check(expr: str, error: str, message: str) -> PyStep:
        return PyStep("check", expr=expr, error=error, message=f"cutile-rs {op}: {message}", source=PROLOGUE)

    steps = [check(f"not {p}.is_cuda", "ValueError", f"{p} must be a CUDA tensor") for p in params]
    steps += [check(f"{p}.device != {first}.device", "ValueError", f"{p} is on another device than {first}")
              for p in params[1:]]  # fmt: skip
    steps.append(
        check(
            f"{first}.dtype not in _DTYPES", "NotImplementedError", f"dtype {{{first}.dtype}} not supported"
        )
    )
    if same_dtype:
        steps += [check(f"{p}.dtype != {first}.dtype", "NotImplementedError", f"{p}.dtype must equal {first}.dtype")
                  for p in params[1:]]  # fmt: skip
    steps.append(PyStep("detach", names=params, source=PROLOGUE))
    return steps


def contract_checks(facts: Facts) -> list[dict[str, str]]:
    """Extra argument checks the contract asks the FFI for (``ffi.checks``), for every pattern."""
    checks = facts.get("ffi.checks") or []
    return [
        {"when": str(c["when"]), "rc": str(c.get("rc", "INVALID_ARGS"))}
        for c in checks
        if isinstance(c, dict)
    ]


def contract_grid(entry: Entry, facts: Facts) -> tuple[list[str], Source] | None:
    """The contract's ``ffi.grid.<entry>`` (three FFI expressions), when it gives one."""
    explicit = facts.get(f"ffi.grid.{entry.name}")
    if isinstance(explicit, list) and len(explicit) == 3:
        return [str(g) for g in explicit], facts.source(f"ffi.grid.{entry.name}")
    return None


def test_wiring(target: Target, checkout: Checkout) -> TestWiring:
    """The primary test file's wiring (an empty one when no test reaches the op)."""
    wirings = test_wirings(checkout)
    return wirings[0] if wirings else TestWiring("", "", None)


def test_wirings(checkout: Checkout) -> list[TestWiring]:
    """One wiring per test file that exercises the op (discovery); the primary first."""
    return [
        TestWiring(
            site.path,
            site.scope,
            Source("checkout", f"{site.path}:{site.backends_line} {site.scope}-level _backends ({site.how})")
            if site.backends_line
            else Source("checkout", f"{site.path}: no _backends ({site.how})"),
        )
        for site in checkout.test_sites
    ]
