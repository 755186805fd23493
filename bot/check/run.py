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


@dataclass
class CheckResult:
    op: str
    checked: list[str] = field(default_factory=list)  # what was checked, one line each
    findings: list[Finding] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.findings


def check(repo: Path, op: str, reader: str) -> CheckResult:
    target = Target(repo, op)
    for path, what in ((target.ffi_rs, "ffi.rs"), (target.wrapper_py, "wrapper")):
        if not path.is_file():
            raise UsageError(f"{op} has no {what} at {path.relative_to(repo)}: `agent-d port` writes one")
    result = CheckResult(op)
    exports, found = abi.rust_exports(target.ffi_rs, reader)
    result.findings += found
    given = abi.wrapper_cdef(target.wrapper_py)
    if given is None:
        result.findings.append(Finding(target.wrapper_py, 0, "the wrapper has no `_FFI_CDEF` string"))
        return result
    declared, found = abi.cdef_functions(given[0], target.wrapper_py, given[1])
    result.findings += found
    if exports and declared:
        result.findings += abi.compare(exports, declared, target.symbol, target.ffi_rs, target.wrapper_py)
        result.checked.append(f"_FFI_CDEF against ffi.rs's export of {target.symbol}")
    launcher = next((f for f in exports if f.name == target.symbol), None)
    if launcher is not None:
        macros = rules.null_checking_macros(target.ops_dir / "ffi_util.rs")
        result.findings += rules.ffi_rules(target.ffi_rs, launcher, macros)
        result.checked.append("ffi.rs host rules")
    result.findings += rules.wrapper_rules(target.wrapper_py, _registry_name(target), target.symbol)
    result.checked.append("wrapper host rules")
    return result


def _registry_name(target: Target) -> str:
    """The name the cuTile reference registers the op under; the op's own where none is found."""
    from bot.errors import StageStop
    from bot.targets.discover import discover

    try:
        found = discover(target)
    except StageStop:
        return target.op
    return found.registry_name or found.dispatch_name or target.op
