"""``agent-d check --repo PATH --kernel OP``: the port's own ffi.rs and wrapper, as they are.

Changes nothing. Exit 0 when every check holds, 1 with the findings. Next (issue 35): the launch
dry run of the wrapper against the cuTile reference, and the device compile on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.check import abi, rules
from bot.check.findings import Finding
from bot.errors import UsageError
from bot.targets.types import Target

MAX_BYTES = 512 * 1024  # a host file larger than this is not read


@dataclass(frozen=True)
class HostFiles:
    """What the check reads: ffi.rs and the wrapper (with the paths findings name them by), the
    checkout's ffi_util.rs, and the name the op must be registered under for cutile-rs."""

    op: str
    symbol: str
    ffi_rs: Path
    ffi_text: str
    wrapper: Path
    wrapper_text: str
    ffi_util_text: str
    registry_name: str


@dataclass
class CheckResult:
    op: str
    checked: list[str] = field(default_factory=list)  # what was checked, one line each
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not compared, and why

    @property
    def holds(self) -> bool:
        return not self.findings

    def as_json(self, repo: Path) -> dict:
        findings = [f.as_json(repo) for f in self.findings]
        return {
            "op": self.op,
            "holds": self.holds,
            "checked": self.checked,
            "notes": self.notes,
            "findings": findings,
        }

    def shown(self, repo: Path) -> str:
        """What ``agent-d check`` prints: each finding on its line, the notes, then the outcome."""
        state = "holds" if self.holds else f"{len(self.findings)} finding(s)"
        lines = [f.shown(repo) for f in self.findings] + [f"note: {n}" for n in self.notes]
        return "\n".join([*lines, f"agent-d check {self.op}: {state} ({'; '.join(self.checked)})"])


def check(
    repo: Path, op: str, reader: str, python: str = "", cargo_target_dir: Path | None = None
) -> CheckResult:
    """The port of ``op`` in the checkout ``repo``, as it is; with ``python`` (an interpreter with
    torch and cuda.tile), also the launch dry run of its wrapper against agent-d's, and the device
    compile of kernel.rs with the launches' generics (in ``cargo_target_dir``, default the crate's)."""
    target = Target(repo, op)
    for path, what in ((target.ffi_rs, "ffi.rs"), (target.wrapper_py, "wrapper")):
        if not path.is_file():
            raise UsageError(f"{op} has no {what} at {path.relative_to(repo)}: `agent-d port` writes one")
    util = target.ops_dir / "ffi_util.rs"
    files = HostFiles(
        op, target.symbol, target.ffi_rs, _read(target.ffi_rs), target.wrapper_py, _read(target.wrapper_py),
        _read(util) if util.is_file() else "", _registry_name(target),
    )  # fmt: skip
    result = check_files(files, reader)
    if python:
        launches = _dry_run(result, target, python)
        if launches:
            _device_compile(result, target, launches, cargo_target_dir or target.crate_dir / "target")
    return result


def _dry_run(result: CheckResult, target: Target, python: str) -> list:
    from bot.check.wrapper_run import wrapper_dry_run
    from bot.errors import StageStop
    from bot.pipeline import generate_only
    from bot.targets.discover import discover
    from bot.testing.stage_tests import module_of
    from bot.testing.testrun import read_test_files

    try:
        discovered = discover(target)
        tests = read_test_files(target.repo, discovered.test_sites)
    except StageStop as stop:
        result.notes.append(f"dry run not run: {stop.reason}")
        return []
    reference = module_of(discovered.reference.path) if discovered.reference else ""
    found = wrapper_dry_run(target.repo, target.op, python, tests, generate_only, reference)
    result.findings += found.findings
    result.notes += found.notes
    if found.compared_cases:
        result.checked.append(
            f"the wrapper's launches against the cuTile reference ({found.compared_cases} cases)"
        )
    return found.launches


def _device_compile(result: CheckResult, target: Target, launches: list, target_dir: Path) -> None:
    """kernel.rs compiled for the GPU on the CPU with each launch's generics and strides."""
    from bot.build import build, device_compile, toolchain
    from bot.emit.stage_generate import read_signature
    from bot.errors import StageStop
    from bot.testing.device_compile import jobs_of

    try:
        tools, signature = toolchain.resolve(), read_signature(target)
    except StageStop as stop:
        result.notes.append(f"device compile not run: {stop.reason}")
        return
    jobs = jobs_of(launches)
    with build.exclusive(target_dir):
        outcomes = device_compile.run(
            target.op,
            target.kernel_rs,
            signature.module,
            jobs,
            target.crate_dir / "Cargo.toml",
            tools,
            target_dir,
        )
    if isinstance(outcomes, str):
        result.notes.append(f"device compile not run: {outcomes}")
        return
    result.checked.append(
        f"kernel.rs compiled for {device_compile.arch()} on the CPU ({len(outcomes)} launches)"
    )
    for o in outcomes:
        if not o.ok:
            line = next((e.line for e in signature.entries if e.name == o.job.entry), 0)
            why = (
                f"entry `{o.job.entry}` <{', '.join(o.job.generics)}> fails at the {o.step} step: {o.message}"
            )
            result.findings.append(Finding(target.kernel_rs, line, why))


def _read(path: Path) -> str:
    if path.stat().st_size > MAX_BYTES:
        raise UsageError(f"{path} is larger than {MAX_BYTES // 1024} KiB: not a host file agent-d reads")
    return path.read_text(encoding="utf-8", errors="replace")


def check_files(files: HostFiles, reader: str) -> CheckResult:
    result = CheckResult(files.op)
    exports, found = abi.rust_exports(files.ffi_rs, files.ffi_text, reader)
    result.findings += found
    try:
        given = abi.wrapper_cdef(files.wrapper_text)
    except SyntaxError as exc:
        result.findings.append(
            Finding(files.wrapper, exc.lineno or 0, f"the wrapper does not parse: {exc.msg}")
        )
        return result
    if given is None:
        result.findings.append(Finding(files.wrapper, 0, "the wrapper has no `_FFI_CDEF` string"))
        return result
    declared, found = abi.cdef_functions(given[0], files.wrapper, given[1])
    result.findings += found
    if exports and declared:
        result.findings += abi.compare(exports, declared, files.symbol, files.ffi_rs, files.wrapper)
        result.checked.append(f"_FFI_CDEF against ffi.rs's export of {files.symbol}")
    launcher = next((f for f in exports if f.name == files.symbol), None)
    if launcher is not None:
        macros = rules.null_checking_macros(files.ffi_util_text)
        result.findings += rules.ffi_rules(files.ffi_rs, files.ffi_text, launcher, macros)
        result.checked.append("ffi.rs host rules")
    result.findings += rules.wrapper_rules(
        files.wrapper, files.wrapper_text, files.registry_name, files.symbol
    )
    result.checked.append("wrapper host rules")
    return result


def _registry_name(target: Target) -> str:
    """The name the cuTile reference registers the op under; the op's own where none is found."""
    from bot.errors import StageStop
    from bot.targets.discover import discover
    from bot.testing.stage_tests import registry_name

    try:
        return registry_name(discover(target)) or target.op
    except StageStop:
        return target.op
