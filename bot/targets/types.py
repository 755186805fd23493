"""The typed values of the targets stage: the kernel to port, and where the checkout keeps its op's
facts (``bot/targets/discover.py``). ``Source``, the authority a value came from, is first made
here (the dispatch declaration's) and then by every source of facts (``bot/infer``) and the plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

OPS_DIR = Path("src", "tilegym", "ops", "cutile_rs")
KERNELS_CRATE = OPS_DIR / "cutile_kernels"  # the one crate every kernel of a checkout is built in


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


@dataclass(frozen=True)
class Source:
    """Where an inferred value came from: the authority and a human-readable pointer."""

    kind: str  # contract | agent_b | analysis | ops_py | reference | naming | kernel | policy | checkout
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


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
    # so wiring routes its cutile-rs case to the wrapper's function (testfile_wiring.route_backend_calls)
    reference_calls: tuple[str, ...] = ()
    # the tilegym helpers the file reaches the op through, as ``<module path>::<function>``
    # (``src/tilegym/ops/moe_interface.py::fused_experts_impl``): a helper that picks values per
    # backend gets a cutile-rs twin of its "cutile" branch (testfile_wiring.helper_backend_twins)
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
