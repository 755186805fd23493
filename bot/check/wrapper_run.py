"""``agent-d check``'s launch dry run: the port's own wrapper run on the CPU over the op's test
cases with every C call recorded (bot/dryrun/plugin.py), each call read through agent-d's launch
plan of the same kernel.rs (which entry it launches, with which generics, arguments and grid), and
those launches compared with the cuTile reference's, as every port's dry run compares its own
(bot/dryrun/compare.py): a value the reference's autotuner searches over is the reference's as
much as its first config, a value no launched entry reads is not compared. Each difference is
named with both values on the cdef line of the C parameter it comes from.

agent-d's port of the op is generated into a copy of the checkout: its plan reads the calls, and
its own calls give what the wrapper's cdef lacks (bmm's grid, which TileGym's ffi.rs computes
itself), said in the notes.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.check import abi
from bot.check.findings import Finding
from bot.dryrun.compare import compare
from bot.dryrun.result import DryRun, Row
from bot.dryrun.run import record
from bot.expr import names as expr_names
from bot.plan.types import LaunchPlan
from bot.targets.types import Target

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


def as_plan_calls(
    theirs: dict, their_params: tuple[abi.Param, ...], plan_names: list[str], ours: dict, symbol: str
) -> tuple[dict, list[str], list[str]]:
    """The wrapper's records with each call of ``symbol`` put into the order of agent-d's launch
    plan, by name, so that agent-d's reading of a C call (``port_side``) reads the wrapper's. A
    name the wrapper's cdef lacks (a grid its own ffi.rs computes) takes the value agent-d's port
    passes in the same call. Returns the records, the names so filled, and why a case was left
    out (a call whose arguments do not match the cdef, or one with a missing name that agent-d's
    port has no call to fill from)."""
    their_names = [p.name for p in their_params]
    our_calls = c_calls(ours, symbol)
    filled: set[str] = set()
    left_out: list[str] = []
    cases: dict[str, dict] = {}
    for nodeid, record_ in theirs.get("cases", {}).items():
        if record_.get("backend") != "cutile-rs":
            cases[nodeid] = record_
            continue
        mine = our_calls.get(record_["case"], [])
        launches, n, why = [], 0, ""
        for launch in record_.get("launches", []):
            if launch.get("symbol") != symbol:
                launches.append(launch)
                continue
            if len(launch["args"]) != len(their_names):
                why = f"call {n + 1} passes {len(launch['args'])} arguments to a {len(their_names)}-parameter cdef"
                break
            given = dict(zip(their_names, launch["args"], strict=True))
            missing = [name for name in plan_names if name not in given]
            if missing and n >= len(mine):
                why = f"call {n + 1} lacks {', '.join(missing)} and agent-d's port made {len(mine)} call(s)"
                break
            filled |= set(missing)
            args = [given[name] if name in given else mine[n][i] for i, name in enumerate(plan_names)]
            launches.append({**launch, "args": args})
            n += 1
        if why:
            left_out.append(f"{record_['case']}: {why}")
        else:
            cases[nodeid] = {**record_, "launches": launches}
    return {**theirs, "cases": cases}, sorted(filled), left_out


def c_names_of(row: Row, plan: LaunchPlan) -> list[str]:
    """The C parameters a compared kernel value comes from: the scalar that feeds a generic or
    argument, the descriptor of a tensor, the names a launch's grid reads."""
    ffi = plan.ffi
    if row.what == "grid":
        entry = row.param.removesuffix(" grid")
        names = {n for v in ffi.variants if v.entry == entry for g in v.grid for n in expr_names(g)}
        derived = {d.name: d.expr for d in ffi.derived}
        names |= {n for d in list(names) if d in derived for n in expr_names(derived[d])}
        return [n for n, _ in ffi.c_params() if n in names]
    found = [s.name for s in ffi.scalars if s.feeds == row.param or s.name == row.param]
    found += [t.name for t in ffi.tensors if t.param == row.param or t.name == row.param]
    return found


def findings_of(
    found: DryRun, plan: LaunchPlan, their_params: tuple[abi.Param, ...], wrapper: Path
) -> list[Finding]:
    """Each value the wrapper's launches differ from the reference's in, on the line of the cdef that
    declares the C parameter it comes from, with both values."""
    lines = {p.name: p.line for p in their_params}
    out = []
    for row in found.host_differences:
        names = [n for n in c_names_of(row, plan) if n in lines] or [""]
        said = f"`{names[0]}`" if names[0] else f"`{row.param}`"
        out.append(
            Finding(
                wrapper,
                lines.get(names[0], 0),
                f"{row.case}: {said} ({row.param}, {row.what}) is {row.cutile_rs} from the wrapper; "
                f"the reference launches {row.reference}",
            )
        )
    return out


def tuning_notes(found: DryRun) -> list[str]:
    """The wrapper's values that hold but are not the reference's first choice: one of the values
    its autotuner searches, or a grid-stride loop's grid; once per parameter, with the first case."""
    seen: dict[str, tuple[Row, int]] = {}
    for row in found.rows:
        first = row.reference.split(" (", 1)[0].split(" = ")[-1]
        if row.same and row.what in ("value", "grid") and " (" in row.reference and first != row.cutile_rs:
            earlier = seen.get(row.param)
            seen[row.param] = (earlier[0] if earlier else row, (earlier[1] if earlier else 0) + 1)
    return [
        f"holds, not the reference's first choice: `{row.param}` is {row.cutile_rs} from the wrapper, "
        f"the reference {row.reference} ({row.case}" + (f" and {n - 1} more case(s))" if n > 1 else ")")
        for row, n in seen.values()
    ]


def wrapper_dry_run(
    repo: Path, op: str, python: str, tests, generate, reference_module: str = ""
) -> WrapperRun:
    """The wrapper over the op's test cases (``tests``: bot/testing/testrun.TestFile), its launches
    read through agent-d's launch plan and compared with the cuTile reference's as a port's dry run
    compares them. ``generate(repo, op) -> str``: agent-d's generation into a copy of the checkout
    ("" when written), whose plan reads the calls and whose own calls fill what the wrapper's cdef
    lacks."""
    target = Target(repo, op)
    with tempfile.TemporaryDirectory(prefix="agent-d-check-") as tmp:
        for out in ("theirs-out", "ours-out"):
            (Path(tmp) / out).mkdir()
        # autotuning on: the reference's search is recorded, so a wrapper's own config is judged
        # against every value the reference searches, not only against its untuned path
        theirs = record(target, python, tests, Path(tmp) / "theirs-out", autotune=True)
        if isinstance(theirs, str):
            return WrapperRun(notes=[f"dry run not run: {theirs}"])
        copy = Path(tmp) / "ours"
        shutil.copytree(repo, copy, ignore=_LEFT_OUT, symlinks=True)
        why = generate(copy, op)
        if why:
            return WrapperRun(
                notes=[f"dry run not compared: agent-d could not generate {op}'s host files: {why}"]
            )
        ours = record(Target(copy, op), python, tests, Path(tmp) / "ours-out", autotune=True)
        if isinstance(ours, str):
            return WrapperRun(notes=[f"dry run not run for agent-d's port: {ours}"])
        planned = _plan(Target(copy, op), Path(tmp) / "ours-out")
        if isinstance(planned, str):
            return WrapperRun(notes=[f"dry run not compared: {planned}"])
    plan, signature = planned
    symbol = target.symbol
    their_params = _params(target.wrapper_py, symbol)
    plan_names = [n for n, _ in plan.ffi.c_params()]
    calls, filled, left_out = as_plan_calls(theirs, their_params, plan_names, ours, symbol)
    found = compare(plan, signature, calls.get("cases", {}), reference_module)
    run = WrapperRun(findings_of(found, plan, their_params, target.wrapper_py))
    run.compared_cases = len(found.cases)
    run.notes.append(
        f"dry run: {run.compared_cases} case(s) of the wrapper compared with the cuTile reference, "
        "its C calls read through agent-d's launch plan"
    )
    if filled:
        run.notes.append(f"not in the wrapper's cdef, taken from agent-d's port: {', '.join(filled)}")
    extra = sorted({p.name for p in their_params} - set(plan_names))
    if extra:
        run.notes.append(f"not compared, in the wrapper's cdef only: {', '.join(extra)}")
    run.findings += [Finding(target.wrapper_py, 0, f"not compared: {why}") for why in left_out]
    run.notes += [f"not compared: {s}" for s in found.skipped]
    run.notes += tuning_notes(found)
    run.launches = compare(plan, signature, ours.get("cases", {}), reference_module).launches
    return run


def _plan(target: Target, out_dir: Path):
    """agent-d's launch plan and the kernel's signature; a string where they cannot be made."""
    from bot.emit.stage_generate import make_plan, read_signature
    from bot.errors import StageStop

    try:
        plan, _facts, _co = make_plan(target, out_dir)
        return plan, read_signature(target)
    except StageStop as stop:
        return f"agent-d could not plan {target.op}: {stop.reason}"


def _params(wrapper: Path, symbol: str) -> tuple[abi.Param, ...]:
    given = abi.wrapper_cdef(wrapper.read_text(encoding="utf-8"))
    if given is None:
        return ()
    declared, _ = abi.cdef_functions(given[0], wrapper, given[1])
    return next((f.params for f in declared if f.name == symbol), ())
