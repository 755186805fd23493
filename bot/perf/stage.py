"""Stage "perf" (TileGym's stage E) after an ``ALL_PASS``: TileGym's own ``test_perf`` for the
cutile-rs, cuTile and PyTorch backends, the ratios, the geomeans and stage E's verdict.

On by default where the tests see a CUDA GPU, off otherwise (one line says why); ``--perf`` /
``--no-perf`` decide instead. The kernels are measured one after the other, never side by side
(they would share the GPU and time each other). The stage never changes the correctness verdict:
its result is the kernel's ``perf`` (bot/perf/result.py), its reports stage E's files, and its
answer stage E's closing block (``<PERF_LOG>``, the validators' block, ``VERDICT:``).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bot.classify.types import VerdictKind
from bot.dryrun.result import describe_row
from bot.emit import testfile_wiring
from bot.job import Job, PortOptions
from bot.perf import cover, records, reports, run, validate
from bot.perf.host_cause import host_cause, kernel_cause
from bot.perf.result import CUTILE_RS, Case, PerfResult, not_run
from bot.perf.summarise import summarise
from bot.plan import sweep
from bot.report import report
from bot.testing import testrun
from bot.testresults.cases import split_nodeid

COLLECT_SHARE = 0.25  # of the stage's time, at most, for collecting the selection (seconds, usually)


def decide(perf: bool | None, interp: testrun.Interpreter) -> tuple[bool, str]:
    """Whether the stage runs, and the one line that says why."""
    if perf is False:
        return False, "off (--no-perf)"
    if perf is True:
        return True, "on (--perf)"
    if interp.cuda:
        return True, f"on: a CUDA GPU is visible ({interp.device})"
    return False, "off: no CUDA GPU visible to the tests' interpreter (--perf runs it anyway)"


def after_all_pass(
    jobs: list[Job], python: str, interpreter: Callable[[], testrun.Interpreter], tools, options: PortOptions
) -> None:
    """The perf stage for each kernel whose final verdict is ALL_PASS, one at a time."""
    passed = [job for job in jobs if job.result.verdict.kind is VerdictKind.ALL_PASS]
    for job in jobs:
        if job not in passed:
            job.result.perf = not_run(
                f"the verdict is {job.result.verdict.headline}: stage E runs after ALL_PASS"
            )
    if not passed or options.perf is False:
        if passed:
            options.echo("[agent-d] perf: off (--no-perf)")
            for job in passed:
                job.result.perf = not_run("off (--no-perf)")
        return
    device = ""
    try:
        probed = interpreter()
        on, why = decide(options.perf, probed)
        device = probed.device
    except Exception as exc:  # the probe already ran for the tests; a failure now stops only this stage
        on, why = False, f"off: the interpreter could not be probed ({type(exc).__name__}: {exc})"
    options.echo(f"[agent-d] perf: {why}")
    for job in passed:
        job.result.perf = measure(job, python, tools, options, device) if on else not_run(why)


def measure(job: Job, python: str, tools, options: PortOptions, device: str = "") -> PerfResult:
    """One kernel's perf stage, its reports and its answer; an error of agent-d's own is a BLOCKED
    perf result with the traceback in the agent log, never a lost correctness verdict."""
    try:
        result = job.run.stage("perf", lambda: _measure(job, python, tools, options, device), _line)
    except Exception as exc:
        result = PerfResult(
            "BLOCKED", "MISSING_DATA", f"internal error in agent-d's perf stage: {type(exc).__name__}: {exc}"
        )
        result.notes.append("traceback:\n" + traceback.format_exc())
    return finish(job, result, options)


def _line(result: PerfResult) -> str:
    return f"{result.verdict} ({result.severity}): {result.reason}"


def _measure(job: Job, python: str, tools, options: PortOptions, device: str) -> PerfResult:
    """Select, collect, run, read, judge: one kernel's perf cases (the reports are :func:`finish`'s)."""
    target, out_dir = job.target, job.out_dir
    assert job.found is not None
    notes = _wire(target.repo, [s.path for s in job.found.test_sites])
    files = testrun.read_test_files(target.repo, job.found.test_sites)
    selection = run.select(target.repo, files.paths, files.all_tests)
    if selection is None:
        why = f"no test_perf function in {', '.join(files.paths)}"
        return PerfResult("BLOCKED", "MISSING_DATA", why, notes=notes)
    if not selection.print_record:
        notes.append(
            "the checkout's conftest defines no --print-record: run without it (records: the JUnit XML)"
        )
    deadline = time.monotonic() + options.perf_timeout
    command = run.argv(
        python, files.paths, selection, testrun.junit_arg(out_dir / run.JUNIT_NAME, target.repo)
    )
    env = run.environment(out_dir, tools)
    if tuning := run.tuning_note(os.environ):
        notes.append(tuning)
    ids, collected = run.collect(target, command, out_dir, env, options.perf_timeout * COLLECT_SHARE)
    if not any(records.split_backend(split_nodeid(i)[2])[0] == CUTILE_RS for i in ids):
        why = _last_line(collected) if not ids else f"{len(ids)} case(s), none of them cutile-rs"
        reason = f"the perf selection has no cutile-rs case ({why})"
        return PerfResult("BLOCKED", "MISSING_DATA", reason, command=testrun.shown(command), notes=notes)
    left = max(deadline - time.monotonic(), 60.0)  # the budget's limits end inside what is left
    command += run.budget_args(left, run.has_session_timeout(python))
    chosen = cover.choose(ids, options.perf_configs)
    notes.append(chosen.note(options.perf_configs))
    job.run.echo(
        f"[agent-d]   perf: {len(chosen.ids)} case(s) of {', '.join(selection.functions)}, three backends; "
        + notes[-1]
    )
    notes.append(
        f"the {len(chosen.ids)} case(s) ran config by config, as node ids in that order"
        + (
            " (the command's -k collects every config; the node ids pick the chosen ones)"
            if chosen.capped
            else ""
        )
    )
    outcome, log_text, xml = run.run(
        target, run.with_ids(command, files.paths, chosen.ids), out_dir, env, left, job.run.echo
    )
    if outcome.stopped:
        notes.append(f"pytest was stopped at the perf stage's deadline ({options.perf_timeout:.0f} s)")
    read = records.read(log_text, xml, files.paths)
    cut_short = outcome.stopped or xml is None or run.ended_at_session_timeout(log_text)
    cases = _with_unreached(read, chosen.ids, cut_short)
    result = summarise(cases, command=testrun.shown(command), exit_code=outcome.code, notes=notes)
    if chosen.capped:
        result.reason += f" ({chosen.configs} of {chosen.collected} configs: stage E's cap)"
    if result.verdict == "INVESTIGATE":
        dry = job.result.dry_run
        differences = [describe_row(r) for r in dry.differences] if dry else []
        plan = job.result.plan
        # the groups this GPU may take ("NVIDIA H200 (sm_90)": sm_90's, not sm_100's)
        capability = sweep.capability_of(device)
        sweep_cut = sweep.cut_line(plan.python.configs, capability) if plan is not None else ""
        result.host_cause = host_cause(cases, job.result.launch_differences, differences, sweep_cut)
        launch_equal = bool(dry and dry.identical and not job.result.launch_differences)
        result.kernel_cause = "" if result.host_cause else kernel_cause(cases, launch_equal)
    return result


def _wire(repo: Path, paths: list[str]) -> list[str]:
    """cutile-rs in each test file's test_perf parametrization (the wiring's edit; a no-op where the
    host stage's wiring already made it); a note per file it had to change."""
    notes = []
    for rel in paths:
        path = repo / rel
        text = path.read_text(encoding="utf-8")
        wired = testfile_wiring.perf_backends(text)
        if wired != text:
            path.write_text(wired, encoding="utf-8")
            notes.append(
                f"test_perf of {rel} lacked cutile-rs in its backends: added (stage E's one allowed edit)"
            )
    return notes


def _with_unreached(cases: list[Case], collected: list[str], cut_short: bool) -> list[Case]:
    """The run's cases, then each collected case the run never reported (named, never dropped)."""
    seen = {c.nodeid for c in cases}
    why = "not reached: the run ended before it" if cut_short else "not reported by pytest"
    return cases + [records.case_of(i, "not run", why, "") for i in collected if i not in seen]


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "pytest printed nothing"


def finish(job: Job, result: PerfResult, options: PortOptions) -> PerfResult:
    """Reports, validators and the answer; a disk that cannot take the reports is said, not raised."""
    op, out_dir = job.target.op, job.out_dir
    result.out_dir = str(out_dir)
    try:
        reports.write(result, op, out_dir)
        reports.write_agent_log(result, op, out_dir, "(validators not run yet)")
        runs = [validate.check(out_dir, op), *validate.upstream(job.target.repo, out_dir, op)]
        block = report.validator_block(result.command or "(pytest not run)", result.exit_code, runs)
        reports.write_agent_log(result, op, out_dir, block)
    except Exception as exc:  # a full disk, or agent-d's own bug: said in the answer, never a lost verdict
        block = f"<VALIDATOR_OUTPUT>\nthe perf reports could not be written: {type(exc).__name__}: {exc}\n</VALIDATOR_OUTPUT>"
    options.answer(reports.perf_log_block(result, out_dir))
    options.answer(block)
    options.answer(f"VERDICT: {result.verdict}")
    options.echo(f"[agent-d] {op}: perf {result.verdict} ({result.severity}): {result.reason}")
    if result.host_cause:
        options.echo(f"[agent-d] {op}: perf host cause: {result.host_cause}")
    if result.kernel_cause:
        options.echo(f"[agent-d] {op}: perf: {result.kernel_cause}")
    return result
