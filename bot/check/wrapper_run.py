"""``agent-d check``'s launch dry run: the port's own wrapper and agent-d's wrapper for the same op,
both run on the CPU over the op's test cases with every C call recorded (bot/dryrun/plugin.py), and
their calls compared parameter by parameter, by name.

agent-d's wrapper is the yardstick because its launches are dry-run against the cuTile reference in
every port; a value the port's own wrapper passes differently (a tile size, a tensor's strides, a
dtype, a grid size) is named with both values. Parameters only one cdef has are listed, not
compared: what ffi.rs derives from them is its own business (`abi.py` holds ffi.rs to the cdef).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.check import abi
from bot.check.findings import Finding
from bot.dryrun.run import record
from bot.targets.types import Target

# what a tensor argument carries that the launch reads (its digest and numel follow from these)
TENSOR_FIELDS = ("shape", "strides", "dtype", "storage_offset")
_LEFT_OUT = shutil.ignore_patterns(".git", "target", "cutile_kernel_out", "__pycache__")


@dataclass
class WrapperRun:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was compared, or why not
    compared_cases: int = 0
    # agent-d's port's kernel launches over the same cases, (case, port_side.PortLaunch): what the
    # device compile compiles (the kernel.rs is the same; only the host side differs)
    launches: list = field(default_factory=list)


def c_calls(data: dict, symbol: str) -> dict[str, list[list]]:
    """Test case -> the argument lists of each ``symbol`` call the cutile-rs side made."""
    calls: dict[str, list[list]] = {}
    for record_ in data.get("cases", {}).values():
        if record_.get("backend") != "cutile-rs":
            continue
        made = [x["args"] for x in record_.get("launches", []) if x.get("symbol") == symbol]
        if made:
            calls[record_["case"]] = made
    return calls


def shown(value: object) -> str:
    if isinstance(value, dict) and value.get("kind") == "tensor":
        return ", ".join(f"{k} {value.get(k)}" for k in TENSOR_FIELDS)
    if isinstance(value, dict) and value.get("kind") == "scalar":
        return repr(value.get("value"))
    return "NULL" if value is None else repr(value)


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict) and a.get("kind") == b.get("kind") == "tensor":
        return all(a.get(k) == b.get(k) for k in TENSOR_FIELDS)
    return shown(a) == shown(b)


def compare_calls(
    theirs: dict[str, list[list]],
    their_params: tuple[abi.Param, ...],
    ours: dict[str, list[list]],
    our_params: tuple[abi.Param, ...],
    wrapper: Path,
) -> WrapperRun:
    """Each shared parameter of each shared case's calls, by name; a difference on the line of the
    wrapper's cdef that declares the parameter."""
    run = WrapperRun()
    our_names = [p.name for p in our_params]
    shared = [(i, p) for i, p in enumerate(their_params) if p.name in our_names]
    only = sorted({p.name for p in their_params} ^ set(our_names))
    if only:
        run.notes.append(f"not compared, in one cdef only: {', '.join(only)}")
    for case in sorted(set(theirs) & set(ours)):
        if len(theirs[case]) != len(ours[case]):
            run.findings.append(
                Finding(
                    wrapper,
                    0,
                    f"{case}: the wrapper calls the launcher {len(theirs[case])} time(s), "
                    f"agent-d's port {len(ours[case])}",
                )  # fmt: skip
            )
            continue
        run.compared_cases += 1
        for n, (their_args, our_args) in enumerate(zip(theirs[case], ours[case], strict=True), start=1):
            call = f" (call {n})" if len(theirs[case]) > 1 else ""
            for i, param in shared:
                mine = our_args[our_names.index(param.name)]
                if not _same(their_args[i], mine):
                    run.findings.append(
                        Finding(
                            wrapper,
                            param.line,
                            f"{case}{call}: `{param.name}` is {shown(their_args[i])} "
                            f"from the wrapper, {shown(mine)} from agent-d's port",
                        )  # fmt: skip
                    )
    missing = sorted(set(ours) - set(theirs))
    if missing:
        run.notes.append(f"cases where the wrapper made no call agent-d's port made: {', '.join(missing)}")
    return run


def wrapper_dry_run(repo: Path, op: str, python: str, tests, generate) -> WrapperRun:
    """Both wrappers over the op's test cases (``tests``: bot/testing/testrun.TestFile).
    ``generate(repo, op) -> str``: agent-d's generation into a copy of the checkout ("" when written)."""
    target = Target(repo, op)
    with tempfile.TemporaryDirectory(prefix="agent-d-check-") as tmp:
        for out in ("theirs-out", "ours-out"):
            (Path(tmp) / out).mkdir()
        theirs = record(target, python, tests, Path(tmp) / "theirs-out")
        if isinstance(theirs, str):
            return WrapperRun(notes=[f"dry run not run: {theirs}"])
        copy = Path(tmp) / "ours"
        shutil.copytree(repo, copy, ignore=_LEFT_OUT, symlinks=True)
        why = generate(copy, op)
        if why:
            return WrapperRun(
                notes=[f"dry run not compared: agent-d could not generate {op}'s host files: {why}"]
            )
        ours = record(Target(copy, op), python, tests, Path(tmp) / "ours-out")
        if isinstance(ours, str):
            return WrapperRun(notes=[f"dry run not run for agent-d's port: {ours}"])
        symbol = target.symbol
        their_cdef = _params(target.wrapper_py, symbol)
        our_cdef = _params(Target(copy, op).wrapper_py, symbol)
        launches = _our_launches(Target(copy, op), ours, Path(tmp) / "ours-out")
    found = compare_calls(
        c_calls(theirs, symbol), their_cdef, c_calls(ours, symbol), our_cdef, target.wrapper_py
    )
    found.notes.insert(0, f"dry run: {found.compared_cases} case(s) compared with agent-d's port of {op}")
    found.launches = launches
    return found


def _our_launches(target: Target, records: dict, out_dir: Path) -> list:
    """agent-d's port's kernel launches of ``records``, read through its own plan; [] where the plan
    cannot be made (the device compile then has nothing to compile)."""
    from bot.dryrun.compare import compare
    from bot.emit.stage_generate import make_plan, read_signature
    from bot.errors import StageStop

    try:
        plan, _facts, _co = make_plan(target, out_dir)
        signature = read_signature(target)
    except StageStop:
        return []
    return compare(plan, signature, records.get("cases", {})).launches


def _params(wrapper: Path, symbol: str) -> tuple[abi.Param, ...]:
    given = abi.wrapper_cdef(wrapper.read_text(encoding="utf-8"))
    if given is None:
        return ()
    declared, _ = abi.cdef_functions(given[0], wrapper, given[1])
    return next((f.params for f in declared if f.name == symbol), ())
