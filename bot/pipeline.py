"""The order of a port's stages, and the kernels of one change taken through them together.
The only module that knows the order.

targets -> kernel signature -> checkout -> facts -> launch plan -> check plan -> generated files
-> check generated -> apply -> toolchain -> build (+ ELF export) -> ABI smoke
-> (dry run -> device compile) beside test -> classify -> reports + validator -> perf (after ALL_PASS: TileGym's stage E, bot/perf).

The kernels of one change go through it side by side: every kernel up to apply
(``bot/emit/stage_generate.py``; ``verify``: ``bot/testing/stage_verify.py``), then one shared build
(``bot/build/shared_build.py``), then each kernel's smoke, tests and verdict (``bot/testing/stage_tests.py``),
one kernel after the other or, with ``test_jobs`` > 1, that many at a time
(``bot/testing/side_by_side.py``), then each kernel's reports (``bot/report/stage_finish.py``), then the perf
stage of each kernel that passed, one at a time (``bot/perf/stage.py``).

Whatever happens, the reports are written and the verdict says why: a stage that cannot go
on raises ``StageStop`` (FAIL or BLOCKED with its class); anything unexpected becomes
BLOCKED(host) "internal error" with the traceback kept in the agent log (``bot/job.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from bot import progress, sandbox, time_limit
from bot.apply import apply
from bot.build import shared_build, toolchain
from bot.classify.types import VerdictKind
from bot.emit import stage_generate
from bot.emit.stage_generate import gather_facts, generate_only, make_plan, read_signature
from bot.errors import Blocked, Failed, StageStop
from bot.job import Job, PortOptions, stop_line, stop_status
from bot.perf import stage as perf_stage
from bot.report import stage_finish
from bot.report.types import PortResult
from bot.report.validator.elf import exported_functions
from bot.targets import discover
from bot.targets.targets import find_targets
from bot.targets.types import Discovery, Target
from bot.testing import side_by_side, stage_tests, stage_verify, testrun

# what other modules import from here; the generation steps are also run without a port
__all__ = [
    "EXIT_CODES",
    "USAGE_EXIT",
    "PortOptions",
    "gather_facts",
    "generate_only",
    "make_plan",
    "port",
    "port_all",
    "port_one",
    "read_signature",
]

T = TypeVar("T")

EXIT_CODES = {VerdictKind.ALL_PASS: 0, VerdictKind.FAIL: 1, VerdictKind.BLOCKED: 3}
USAGE_EXIT = 2


def port(options: PortOptions) -> list[PortResult]:
    """Port every kernel the change adds (or the named one); usage errors propagate."""
    targets = find_targets(options.repo.resolve(), options.kernel, options.base)
    return port_all(targets, options)


def port_one(target: Target, options: PortOptions) -> PortResult:
    return port_all([target], options)[0]


def port_all(targets: list[Target], options: PortOptions) -> list[PortResult]:
    """The kernels of one change together: every host file generated and applied first, the crate
    built once (again without a kernel whose own files do not compile), then each kernel smoked,
    tested and classified, with one verdict each."""
    python = options.python or testrun.current_python()
    jobs = [Job.start(t, options) for t in targets]
    box = _sandbox(jobs, options)
    with sandbox.active(box):  # the checkout's validator script and test_perf are PR code too
        interpreter, tools = _port_jobs(jobs, options, python)
        for job in jobs:
            stage_finish.finish(job, options)
        perf_stage.after_all_pass(jobs, python, interpreter, tools, options)  # one kernel at a time
    return [job.result for job in jobs]


def _sandbox(jobs: list[Job], options: PortOptions) -> sandbox.Sandbox | None:
    """The sandbox the checkout's code runs in (``--sandbox``); where it cannot be made, every
    kernel stops BLOCKED (env) before any of that code runs, saying what to change."""
    if not options.sandbox or not jobs:
        return None
    try:
        return sandbox.make(writable=[options.repo], hidden=sorted({job.out_dir.parent for job in jobs}))
    except sandbox.SandboxUnavailable as exc:
        for job in jobs:
            job.stop(Blocked("env", f"PR code is run only in a sandbox: {exc}"))
        return None


def _generate_within_limit(job: Job) -> None:
    """Generation under ``time_limit``'s time and memory limits: past either, BLOCKED (host) saying
    so, with the reports."""
    what = f"reading, planning and generating {job.target.op}"
    try:
        with (
            time_limit.within(time_limit.seconds(), what),
            time_limit.memory_within(time_limit.memory_mb(), what),
        ):
            stage_generate.generate_files(job)
    except (time_limit.Expired, time_limit.OutOfMemory) as exc:
        job.run.record("generate", 0.0, "blocked", str(exc))
        raise Blocked(
            "host",
            f"{exc}: the kernel.rs, the contract or the reference makes agent-d's planning run on or grow",
            host_fix="report it to agent-d's maintainers with the kernel.rs and host_contract.yaml",
        ) from None


def _port_jobs(jobs: list[Job], options: PortOptions, python: str):
    """Every kernel from discovery to apply, one build, then each kernel's tests; (the interpreter
    probe, the toolchain) for the stages after."""
    for job in jobs:
        verb = "verify" if options.verify_only else "port"
        with progress.group(
            options.echo, f"agent-d {verb} {job.target.op}: read the kernel and the reference"
        ):
            options.echo(
                f"[agent-d] {verb} {job.target.op}: "
                f"{job.target.kernel_rs.relative_to(job.target.repo)} -> {job.out_dir}"
            )
            job.attempt(lambda job=job: _discover(job))
            job.attempt(
                lambda job=job: (
                    stage_verify.existing(job) if options.verify_only else _generate_within_limit(job)
                )
            )
    left_out = shared_build.LeftOut()
    tools = None
    names = tuple(dict.fromkeys(stage_tests.registry_name(j.found) for j in jobs if j.found))
    # one interpreter for the machine's facts and every kernel's registration check
    interpreter = _once(lambda: testrun.probe(python, repo=options.repo.resolve(), names=names))
    if any(not job.stopped for job in jobs):
        # the probe (seconds: it imports torch) needs the applied wrapper, not the library: it runs
        # beside the build, and the tests ask the same answer afterwards
        threading.Thread(target=interpreter, name="agent-d interpreter probe", daemon=True).start()
    try:
        if not options.verify_only:
            with progress.group(options.echo, "agent-d build"):
                tools = _build(jobs, options, left_out)
        for job in jobs:  # nothing was built for it (no kernel was left to build)
            if job.awaiting_facts and not job.stopped:
                job.stop(job.awaiting_facts)
        _test_each(
            jobs, lambda job: stage_tests.smoke_and_test(job, python, interpreter, tools, options), options
        )
    finally:
        left_out.restore()  # the checkout ends as generation wrote it, every kernel wired
        _withdraw_faulted(jobs)  # ... except the files the build faulted: agent-d's own bug
    return interpreter, tools


def _test_each(jobs: list[Job], test: Callable[[Job], None], options: PortOptions) -> None:
    """``test`` for each kernel still going: one after the other, or with ``test_jobs`` > 1 that
    many side by side, each line tagged with its kernel. Each keeps its own verdict either way."""
    going = [job for job in jobs if not job.stopped]
    workers = min(options.test_jobs, len(going))
    if workers <= 1:
        for job in going:
            with progress.group(options.echo, f"agent-d test {job.target.op}"):
                if len(jobs) > 1:  # the lines that follow are this kernel's
                    options.echo(f"[agent-d] test {job.target.op}")
                job.attempt(lambda job=job: test(job))
        return
    ops = ", ".join(job.target.op for job in going)
    with progress.group(options.echo, f"agent-d test {ops}"):  # one group: their lines interleave
        options.echo(f"[agent-d] test {ops}: {workers} at a time, each line tagged [<kernel>]")
        echo = progress.one_at_a_time(options.echo)
        for job in going:
            job.run.echo = progress.tagged(echo, job.target.op)
        side_by_side.run_each([lambda job=job: job.attempt(lambda: test(job)) for job in going], workers)


def _once(fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` called at most once (the interpreter probe imports torch: seconds per call), also when
    kernels tested side by side ask at the same moment: the others wait for the first one's answer.
    A call that raises is not kept: the next caller tries again."""
    memo: list[T] = []
    lock = threading.Lock()

    def get() -> T:
        with lock:
            if not memo:
                memo.append(fn())
            return memo[0]

    return get


def _discover(job: Job) -> None:
    target = job.target
    job.out_dir.mkdir(parents=True, exist_ok=True)  # a full or read-only disk stops here, with its verdict
    if not target.kernel_rs.is_file():
        raise Failed(
            "kernel",
            f"{target.kernel_rs.relative_to(target.repo)} does not exist",
            followup=f"add src/tilegym/ops/cutile_rs/{target.op}_kernel/kernel.rs",
        )
    job.found = job.run.stage("discover", lambda: discover.discover(target), _discovery_line)


def _build(jobs: list[Job], options: PortOptions, left_out: shared_build.LeftOut):
    """The toolchain and one shared build for every kernel still going; each gets its own record."""
    going = [job for job in jobs if not job.stopped]
    if not going:
        return None
    start = time.monotonic()
    try:
        tools = toolchain.resolve()
    except StageStop as stop:
        for job in going:
            job.run.record("toolchain", time.monotonic() - start, stop_status(stop), stop_line(stop))
            _stop_after_build(job, stop, f"kernel.rs was not compiled: {stop.reason}")
        return None
    except Exception as exc:  # every kernel waiting on the toolchain gets the same internal error
        for job in going:
            job.run.record("toolchain", time.monotonic() - start, "failed", f"{type(exc).__name__}: {exc}")
            job.crash(exc)
        return None
    for job in going:
        job.run.record("toolchain", time.monotonic() - start, "ok", f"CUDA headers {tools.cuda_toolkit_path}")
    start = time.monotonic()
    try:
        shared = shared_build.build_together(
            [job.target for job in going],
            tools,
            options.cargo_target_dir,
            lambda t: options.out_dir(t.op).resolve() / "build_cargo.txt",
            left_out,
            exported_functions,
            options.echo,
            cargo_home=options.cargo_home,
            kernel_only=frozenset(job.target.op for job in going if job.awaiting_facts),
        )
    except Exception as exc:  # every kernel waiting on this build gets the same internal error
        for job in going:
            job.run.record("build", time.monotonic() - start, "failed", f"{type(exc).__name__}: {exc}")
            job.crash(exc)
        return None
    runs = f"{_count(shared.cargo_runs, 'build')} for {_count(len(going), 'kernel')}"
    if shared.left_out:
        runs += f", the last without {', '.join(shared.left_out)}"
    for job in going:
        op = job.target.op
        if op in shared.stopped:
            stop = shared.stopped[op]
            job.run.record("build", shared.seconds, stop_status(stop), f"({runs}) {stop_line(stop)}")
            _stop_after_build(job, stop, f"kernel.rs could not be compiled: {stop.reason}")
            continue
        if job.awaiting_facts:
            job.run.record("build", shared.seconds, "ok", f"({runs}) kernel.rs compiles (no launcher yet)")
            _stop_after_build(job, None, "kernel.rs compiles (cargo build, without a launcher)")
            continue
        built = shared.built[op]
        built.cargo_runs = shared.cargo_runs
        built.built_with = [j.target.op for j in going if j.target.op in shared.built]
        job.result.build = built
        detail = f"{built.command} ({shared.seconds:.0f}s, {runs}); {job.target.symbol} exported"
        job.run.record("build", shared.seconds, "ok", detail)
    return tools


def _withdraw_faulted(jobs: list[Job]) -> None:
    """Take back the applied files of each kernel whose generated code the build faulted."""
    faulted = [job for job in jobs if job.applied and job.result.verdict.withheld]
    kept = [job for job in jobs if job.applied and not job.result.verdict.withheld]
    for job in faulted:
        assert job.applied is not None
        taken = apply.withdraw(job.target, job.applied, alone=not kept)
        job.result.changed_files = []
        job.run.log.append("withheld (not applied): " + ", ".join(taken))


def _stop_after_build(job: Job, stop: StageStop | None, note: str) -> None:
    """The build's stop; for a kernel awaiting facts, a kernel fault wins over the missing facts,
    and anything else keeps the question with ``note`` on what the build showed."""
    waiting = job.awaiting_facts
    if waiting is None:
        assert stop is not None
        job.stop(stop)
    elif stop is not None and stop.kind == "FAIL" and stop.klass == "kernel":
        job.stop(stop)
    else:
        job.stop(type(waiting)(waiting.klass, f"{waiting.reason} ({note})", host_fix=waiting.host_fix))


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _discovery_line(found: Discovery) -> str:
    tests = ", ".join(t.path for t in found.test_sites) or "no test file"
    return f"{found.dispatch_name}: reference {found.reference.path if found.reference else 'none'}; {tests}"
