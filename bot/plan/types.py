"""The typed values of the plan stage: the launch plan the emitters render (docs/plan.md).

Plain data (dataclasses of str/int/list/dict), so a plan can be printed as JSON and compared
byte for byte."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from bot.read.types import FileUse
from bot.targets.types import Source


@dataclass
class CTensor:
    """One ``const TensorDesc*`` parameter of the exported C function."""

    name: str  # C parameter name ("inp" when the kernel says "in_ptr")
    bind: str  # Rust local bound to the dereferenced descriptor ("in_d")
    param: str  # kernel parameter it feeds
    kind: str  # "tensor" (borrow_tensor) | "ptr" (DevicePointer)
    elem: str  # generic name or concrete element type
    role: str  # "output" | "input"
    rank: int | None
    source: Source


@dataclass
class CScalar:
    """One scalar parameter of the exported C function (before device_id, raw_stream)."""

    name: str
    ctype: str  # "i32" | "f32"
    role: str  # generic | runtime_scalar | grid | compile_option | selector
    feeds: str  # the generic or kernel parameter it feeds ("" for options/grid/selector)
    source: Source


@dataclass
class Derived:
    """An FFI-local value computed from descriptors or scalars (expression language: docs/plan.md)."""

    name: str
    expr: str
    source: Source


@dataclass
class TypeSlot:
    """A type generic beside the element generic (an accumulator dtype such as ``E2``): what the FFI
    passes for it in ``.generics()``, fixed rather than dispatched."""

    generic: str  # "E2"
    dtype: str  # the dtype string passed ("f32"), or "dtype": the element generic's dtype
    source: Source


@dataclass
class Variant:
    when: str  # "always" | "else" | an expression over C scalars
    entry: str
    # one per declared generic, in order: "dtype" (the element generic), a quoted dtype string for a
    # fixed type slot ('"f32"'), or a plan expression for a const generic
    generics: list[str]
    args: list[str]
    grid: list[str]
    tag: str
    source: Source
    unsafe_entry: bool = False  # the entry is `unsafe fn`, so its launcher call needs `unsafe {}`


@dataclass
class FfiPlan:
    symbol: str
    module: str
    style: str  # "macros" | "explicit"
    tensors: list[CTensor]
    dtype_from: str  # C tensor name whose dtype drives the element generic
    dtype_generic: str  # the ElementType generic ("E"); "" when the entry has none (element type fixed)
    dtypes: list[str]  # dispatch list, e.g. ["f32", "f16", "bf16"]; the one fixed type when no generic
    scalars: list[CScalar]
    derived: list[Derived]
    variants: list[Variant]
    checks: list[dict[str, str]] = field(default_factory=list)  # {"when": expr, "rc": "INVALID_ARGS"}
    sources: dict[str, Source] = field(default_factory=dict)  # for style/dtype choices
    # kernel.rs's top-level imports: ffi.rs lands in the same scope and must not import a name twice
    file_uses: list[FileUse] = field(default_factory=list)
    # True: the variants are steps launched one after the other (each "always"), not alternatives
    sequence: bool = False
    # type generics other than the element generic, in declared order (accumulator slots: "f32")
    type_slots: list[TypeSlot] = field(default_factory=list)

    def c_params(self) -> list[tuple[str, str]]:
        """(name, C type) for every parameter in ABI order, trailer included."""
        out = [(t.name, "const TensorDesc*") for t in self.tensors]
        out += [(s.name, {"i32": "int32_t", "f32": "float"}[s.ctype]) for s in self.scalars]
        out += [("device_id", "int32_t"), ("raw_stream", "uint64_t")]
        return out

    def c_declaration(self) -> str:
        """The C declaration of the symbol (ffi.rs's comment, ``agent-d plan``)."""
        params = ", ".join(f"{ctype} {name}" for name, ctype in self.c_params())
        return f"int32_t {self.symbol}({params});"


@dataclass
class PyStep:
    """One statement of the wrapper body before the launch."""

    kind: str  # "check" | "detach" | "let" | "return"
    target: str = ""  # let: the variable(s) assigned; return: the condition
    expr: str = ""  # let: the value; check: the failing condition
    error: str = ""  # check: ValueError | NotImplementedError
    message: str = ""  # check: the message
    names: list[str] = field(default_factory=list)  # detach: the tensors
    source: Source | None = None


@dataclass
class ListLaunch:
    """A C tensor packed from each element of a Python list in turn: the reference kernel takes the
    list (``As``), kernel.rs one element (``a``), so the wrapper launches once per element, in order."""

    tensor: str  # the C tensor ("a")
    list_expr: str  # the Python list walked ("group_A")
    item: str  # the loop variable bound to one element ("Ai"), what the descriptor packs
    source: Source | None = None


@dataclass
class PyPlan:
    register_name: str
    register_kind: str  # "direct" | "getter"
    signature: str  # parameters after the function name, as written in ops.py
    inner_signature: str  # getter only: the returned callable's parameters
    dtypes: list[str]  # torch dtype names accepted, e.g. ["float32", "float16", "bfloat16"]
    steps: list[PyStep]
    alloc: dict[str, str]  # output var -> allocation expression (made inside kernel_fn)
    launch_mode: str  # "direct" | "autotune"
    configs: list[dict[str, object]]
    autotune_key: str
    python_grid: dict[str, str]  # C scalar -> python expression
    device_of: str
    tensors_py: dict[str, str]  # C tensor -> python variable
    ffi_args: dict[str, str]  # C scalar -> python expression
    result: str
    out_param: str  # name of an ``out=`` parameter that receives a copy ("" if none)
    sources: dict[str, Source] = field(default_factory=dict)
    inner_name: str = ""  # getter only: the name of the returned callable
    # non-empty: the launch repeats once per element of these lists, walked together (zip)
    per_element: list[ListLaunch] = field(default_factory=list)


@dataclass
class CarriedArg:
    """One C argument of a carried launcher: its value over the cuTile kernel's parameters, the
    launch's ``grid`` and the kernel's ``hints``."""

    c_param: str
    expr: str
    source: Source


@dataclass
class CarriedKernel:
    """A cuTile kernel the carried host code launches, and how its launch reaches kernel.rs."""

    name: str  # the reference's @ct.kernel function
    entry: str  # the kernel.rs entry that ports it; "" when none does (its launch raises, naming it)
    params: list[str]  # its parameters in order: the launch's arguments unpack into them
    args: list[CarriedArg]  # one per C parameter before device_id, raw_stream (ported kernels only)
    hints: dict[str, int]  # literal hints of its decorator (``@ct.kernel(occupancy=2)``)
    dtype_tensor: str  # the parameter whose dtype the FFI dispatches on ("" when fixed)
    source: Source
    site_values: list[str] = field(default_factory=list)  # locals each of its launches passes along
    per_element: list[str] = field(default_factory=list)  # list parameters: one launch per element
    module: str = ""  # the dotted module that defines it ("" for the reference module)
    emitted: str = ""  # the wrapper's name for it where it is not its own

    @property
    def wrapper_name(self) -> str:
        return self.emitted or self.name


@dataclass
class CarriedModule:
    """A module of the cuTile backend the reference imports helpers from, carried with them."""

    reference: str  # its path in the repository
    module: str  # its dotted name
    carried: list[str]  # its names the program reaches, in its order
    renames: dict[str, str] = field(default_factory=dict)  # its name -> the wrapper's, where they differ


@dataclass
class CarryPlan:
    """The wrapper as the reference's host code carried over, each launch rewritten: only what
    crosses the launch boundary is planned here; the rest is the reference's own code."""

    reference: str  # the reference module, relative to the repository
    module: str  # its dotted name, for its relative imports
    function: str  # the function registered for the cuTile backend
    register_name: str  # the name it registers (the wrapper registers it for cutile-rs)
    carried: list[str]  # the module names carried over
    kernels: list[CarriedKernel]
    source: Source
    helpers: list[CarriedModule] = field(default_factory=list)  # carried before the reference's code
    renames: dict[str, str] = field(default_factory=dict)  # the reference's name -> the wrapper's
    # the names its refusals read (bot/plan/carry_refusals.py): a test's cuTile skip on one is inherited
    refused_by: list[str] = field(default_factory=list)


@dataclass
class TestWiring:
    __test__ = False  # not a pytest test class
    file: str  # relative to the repo
    scope: str  # "class" | "module" | "" (unknown)
    source: Source | None = None


@dataclass
class MissingFact:
    """Something the generator could not infer: what, why, and what the contract key is."""

    key: str  # dotted contract key, e.g. "python.alloc.out"
    question: str
    tried: list[str] = field(default_factory=list)


@dataclass
class LaunchPlan:
    op: str
    ffi: FfiPlan
    python: PyPlan
    tests: TestWiring  # the primary test file ("" when none reaches the op)
    missing: list[MissingFact] = field(default_factory=list)
    contract_lines: int = 0  # lines of the porter-written contract this plan used
    more_tests: list[TestWiring] = field(default_factory=list)  # other files whose tests call the op
    # set: the wrapper is the reference's host code carried over (``python`` then holds only the
    # registration and signature; its launch fields are unused)
    carry: CarryPlan | None = None

    def to_dict(self) -> dict:
        return asdict(self)
