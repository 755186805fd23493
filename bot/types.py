"""Typed values passed between the pipeline's stages.

Each stage receives some of these and returns one; only ``pipeline`` knows the order.
Everything here is plain data (dataclasses of str/int/list/dict), so a plan or a
result can be printed as JSON and compared byte for byte.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

# --------------------------------------------------------------------------- targets

OPS_DIR = Path("src", "tilegym", "ops", "cutile_rs")
KERNELS_CRATE = OPS_DIR / "cutile_kernels"  # the one crate every kernel of a checkout is built in

if TYPE_CHECKING:
    from bot.dryrun.result import DryRun
    from bot.perf.result import PerfResult


@dataclass(frozen=True)
class Target:
    """One kernel to port: ``src/tilegym/ops/cutile_rs/<op>_kernel/kernel.rs`` in ``repo``."""

    repo: Path
    op: str

    @property
    def ops_dir(self) -> Path:
        return self.repo / OPS_DIR

    @property
    def kernel_dir(self) -> Path:
        return self.ops_dir / f"{self.op}_kernel"

    @property
    def kernel_rs(self) -> Path:
        return self.kernel_dir / "kernel.rs"

    @property
    def ffi_rs(self) -> Path:
        return self.kernel_dir / "ffi.rs"

    @property
    def wrapper_py(self) -> Path:
        return self.ops_dir / f"{self.op}.py"

    @property
    def crate_dir(self) -> Path:
        return self.repo / KERNELS_CRATE

    @property
    def symbol(self) -> str:
        return f"cutile_{self.op}"


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class Found:
    """One place in the checkout: a file (relative to the repo), a line, and what is there."""

    path: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.detail}"


@dataclass(frozen=True)
class TestSite:
    """A test file that exercises the op, and where its backends are parametrized."""

    __test__ = False  # not a pytest test class
    path: str  # relative to the repo
    backends_line: int  # line of its first ``_backends =`` (0: none)
    scope: str  # "class" | "module" | "" (no _backends)
    how: str  # how it reaches the op ("line 71: tilegym.ops.fmha_decode")
    direct: bool = True  # False: only its file name says it tests the op
    functional: tuple[str, ...] = ()  # its correctness tests (test_op*) that call the op
    # its backward tests (every test of a backward-only file): cutile-rs is forward-only, so wiring
    # makes each skip its cutile-rs case with a citation
    backward: tuple[str, ...] = ()
    # the cuTile reference's function as the file names it by module path
    # (``tilegym.ops.cutile.mla_decoding.mla_decoding``): the file calls each backend's module itself,
    # so wiring routes its cutile-rs case to the wrapper's function (wiring.route_backend_calls)
    reference_calls: tuple[str, ...] = ()
    # the tilegym helpers the file reaches the op through, as ``<module path>::<function>``
    # (``src/tilegym/ops/moe_interface.py::fused_experts_impl``): a helper that picks values per
    # backend gets a cutile-rs twin of its "cutile" branch (wiring.helper_backend_twins)
    helpers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Discovery:
    """Where the checkout keeps one op's facts (bot/targets/discover.py)."""

    op: str
    dispatch_name: str  # the name TileGym's registry knows the op by
    dispatch_source: Source
    reference: Found | None  # the cuTile reference's register_impl
    public: Found | None  # the @dispatch declaration
    tests: tuple[TestSite, ...] = ()  # the one calling the op first
    call_keywords: tuple[str, ...] = ()  # keyword names the tests pass
    candidates: tuple[str, ...] = ()  # names registered by the module named after the op
    tried: tuple[str, ...] = ()
    # the name TileGym's dispatcher holds the implementations under: the reference's register_impl
    # name (a getter's is get_<op>); empty: the dispatch name
    registry_name: str = ""

    @property
    def test_sites(self) -> tuple[TestSite, ...]:
        """The files to wire and run: those whose correctness tests call the op, else the first
        file that reaches it (or is named after it); empty when none does."""
        functional = tuple(t for t in self.tests if t.functional)
        return functional or self.tests[:1]


# --------------------------------------------------------------------------- kernel signature
# Mirrors the JSON printed by crate/ (docs/reader-schema.md).


@dataclass(frozen=True)
class Generic:
    name: str
    kind: str  # "type" | "const"
    ty: str = ""  # const generics: "i32", "bool", ...
    bounds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensor" | "ptr" | "partition" | "scalar"
    elem: str = ""  # tensor/ptr/partition element type: a generic name ("E") or a concrete type ("i32")
    rank: int | None = None  # tensors only
    ty: str = ""  # scalars only: "i32", "f32", ...
    mutable: bool = False  # "&mut Tensor", "*mut", or a *Mut partition type
    partition_type: str = ""  # partitions only: the type as written ("MappedPartitionMut<E, {[B]}, M>")


@dataclass(frozen=True)
class BlockUse:
    """How an entry reads its block id: the facts, not a pattern name."""

    axes: int  # how many block-id axes the body uses (0..3)
    grid_stride: bool  # a `step_by(<num tile blocks>)` loop over tiles
    evidence: str = ""


@dataclass(frozen=True)
class Entry:
    name: str
    unsafe: bool
    public: bool
    attr_args: dict[str, str]
    generics: tuple[Generic, ...]
    params: tuple[Param, ...]
    outputs: tuple[str, ...]
    output_evidence: dict[str, str]
    block: BlockUse
    line: int = 0

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True)
class FileUse:
    """A name a top-level ``use`` of kernel.rs brings into the scope ffi.rs shares (``*``: a glob)."""

    name: str
    path: str  # "cuda_core::Stream"; a glob's path before ``::*``
    glob: bool = False
    line: int = 0


@dataclass(frozen=True)
class KernelSignature:
    module: str
    entries: tuple[Entry, ...]
    path: str = ""
    file_uses: tuple[FileUse, ...] = ()


# --------------------------------------------------------------------------- launch plan


@dataclass(frozen=True)
class Source:
    """Where an inferred value came from: the authority and a human-readable pointer."""

    kind: str  # contract | agent_b | analysis | ops_py | reference | naming | kernel | policy | checkout
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


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

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- generated files, results


@dataclass
class GeneratedFile:
    path: str  # relative to the repo
    content: str
    kind: str  # "new" (whole file) | "edit" (wiring)


@dataclass
class GeneratedFiles:
    files: list[GeneratedFile]


@dataclass
class ApplyResult:
    changed: list[str]  # relative paths whose bytes changed
    unchanged: list[str]
    previous: dict[str, bytes | None] = field(
        default_factory=dict
    )  # changed path -> its bytes before (None: new)


@dataclass
class BuildResult:
    ok: bool
    so_path: str
    command: str
    seconds: float
    log_tail: str
    errors_by_file: dict[str, list[str]] = field(default_factory=dict)
    symbol_found: bool = False
    symbols: list[str] = field(default_factory=list)
    smoke_ok: bool = False
    smoke_detail: str = ""
    cargo_runs: int = 1  # cargo builds the change's kernels took together (2: one kernel left out)
    built_with: list[str] = field(default_factory=list)  # the change's kernels in this library


@dataclass
class TestCase:
    __test__ = False  # not a pytest test class
    nodeid: str
    outcome: str  # passed | failed | skipped | error
    message: str = ""
    detail: str = ""  # failures: every ``E`` line of its traceback, joined (the values, the NaN)


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class
    ran: bool
    command: str
    exit_code: int | None
    log_path: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    cases: list[TestCase] = field(default_factory=list)
    gpu: bool = False
    env_problem: str = ""  # why the tests could not run meaningfully here
    env_fix: str = ""  # what would let them run (every fix, one line)
    stopped_by_timeout: bool = False  # agent-d killed pytest at --test-timeout
    silent_for: float = 0.0  # seconds pytest had printed nothing when it was stopped (a hang)
    rest_logs: list[str] = field(default_factory=list)  # runs of what remained after a crash (rerun.py)
    skip_groups: list[tuple[int, str]] = field(default_factory=list)  # -rs summary: (count, reason)
    panics: list[str] = field(default_factory=list)  # Rust panic messages in the log (JIT, launcher)
    located: list[Located] = field(default_factory=list)  # JIT errors the log ties to a source line
    source: str = ""  # where cases and counts were read: "junit" (the XML) or "log" (no XML)


@dataclass(frozen=True)
class Located:
    """A message the JIT tied to a place in the kernel's source (``  --> <file>:<line>:<col>``), the
    path as it printed it: relative to the crate it was compiled in, or absolute."""

    path: str
    line: int
    column: int
    message: str


ANNOTATION_LEVELS = ("failure", "warning", "notice")  # the Checks API's annotation_level


@dataclass(frozen=True)
class Annotation:
    """A fault at a place in a file of the pull request, for the check run (bot/build/annotations.py):
    ``path`` relative to the repo, lines from 1; columns (from 1, 0: none) only on a single line."""

    path: str
    start_line: int
    end_line: int
    level: str  # failure | warning | notice
    title: str
    message: str
    start_column: int = 0
    end_column: int = 0


class VerdictKind(str, Enum):
    ALL_PASS = "ALL_PASS"
    FAIL = "FAIL"
    BLOCKED = "BLOCKED"


@dataclass
class Verdict:
    kind: VerdictKind
    klass: str  # fail_class (host|kernel) or block_class (env|host|kernel); "" for ALL_PASS
    reason: str  # one line, always set
    followup: str = ""  # agent_b_followup for kernel faults
    host_fix: str = ""
    runner_fix: str = ""  # env: what the runner's owner must do
    withheld: bool = False  # agent-d's own bug: its generated files were not applied and are never pushed
    annotations: tuple[Annotation, ...] = ()  # where the fault is, file and line (bot/build/annotations.py)

    @property
    def fix(self) -> str:
        """The one line saying what to do next, for whoever must act: the host fix (agent-d), the
        follow-up (the kernel's author), the runner's fix (env)."""
        if self.kind is VerdictKind.ALL_PASS:
            return ""
        return {"kernel": self.followup, "env": self.runner_fix}.get(self.klass, self.host_fix)

    @property
    def line(self) -> str:
        return f"VERDICT: {self.kind.value}"

    @property
    def headline(self) -> str:
        return verdict_headline(self.kind.value, self.klass)


def verdict_headline(kind: str, klass: str) -> str:
    """The one wording of a verdict and its class, in every text agent-d writes (reports, the
    final line, the review, the check title): ``ALL_PASS``, ``FAIL (fail_class: host)``,
    ``BLOCKED (block_class: env)``."""
    kind = getattr(kind, "value", kind)
    if kind == "ALL_PASS" or not klass:
        return str(kind)
    label = "block_class" if kind == "BLOCKED" else "fail_class"
    return f"{kind} ({label}: {klass})"


@dataclass
class StageRecord:
    name: str
    seconds: float
    status: str  # ok | failed | blocked (could not run here: the verdict is BLOCKED)
    detail: str = ""


@dataclass
class ValidatorRun:
    command: str
    output: str
    exit_code: int


@dataclass
class PortResult:
    """Everything a port run produced; the input of publication."""

    target: Target
    verdict: Verdict
    stages: list[StageRecord]
    out_dir: str
    validator_block: str = ""
    plan: LaunchPlan | None = None
    build: BuildResult | None = None
    tests: TestResult | None = None
    changed_files: list[str] = field(default_factory=list)
    # how the porter's contract changes the launch from what agent-d reads alone (bot/classify/launch_diff.py)
    launch_differences: list[str] = field(default_factory=list)
    # why the contract's launch could not be compared with the reference's (empty: it was, or no contract)
    launch_unknown: str = ""
    # the launch dry run against the cuTile reference (bot/dryrun); None: not run
    dry_run: DryRun | None = None
    # the perf stage after ALL_PASS (bot/perf, TileGym's stage E); None: the run never got that far
    perf: PerfResult | None = None
