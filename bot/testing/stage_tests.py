"""Stages "abi smoke" to "classify" of one kernel, after the build: the ABI smoke check, the
interpreter, the op's registration, its tests (pytest, what remains after a crash run again),
and the verdict the classifier reads from them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bot import progress
from bot.build import annotations
from bot.classify import classify, missing_op
from bot.classify.types import Verdict, VerdictKind
from bot.dryrun import run as dryrun
from bot.errors import Blocked, Failed
from bot.infer import analysis
from bot.job import Job, PortOptions
from bot.targets.types import Discovery, Target
from bot.testing import beside, device_compile, rerun, smoke, testrun
from bot.testing.types import TestResult
from bot.testresults.combine import to_test_result


def smoke_and_test(
    job: Job, python: str, interpreter: Callable[[], testrun.Interpreter], tools, options
) -> None:
    target, run, built = job.target, job.run, job.result.build
    assert built is not None
    ok, detail = run.stage("abi smoke", lambda: abi_smoke(target, built.so_path), lambda r: r[1])
    built.smoke_ok, built.smoke_detail = ok, detail
    interp = run.stage(
        "interpreter",
        interpreter,
        lambda i: i.env_problem() or f"{i.device}, torch {i.torch}",
    )
    for problem in interp.env_problems():  # each reason with what to do about it, one line each
        run.echo(f"[agent-d]   env: {problem.reason}")
        run.echo(f"[agent-d]   fix: {problem.fix}")
    assert job.found is not None
    test_file = _test_files(target, job.found, interp)  # parsed once: selection, skips
    if not interp.env_problems():
        run.stage(
            "registration",
            lambda: registered(target, job.found, python, interp),
            lambda b: ", ".join(b or []),
        )
    junit_xml = testrun.junit_arg(job.out_dir / testrun.JUNIT_NAME, target.repo)
    argv, _selection = testrun.command(python, test_file, junit_xml=junit_xml)
    job.pytest_cmd = testrun.shown(argv)
    cancel = testrun.Cancel()

    def cpu_checks() -> None:  # registered first: else the dispatcher falls back
        launch_dry_run(job, python, interp, test_file)
        device_compile.stage(job, tools, options.cargo_target_dir)  # the dry run's launches, on the CPU

    def tests_stage() -> TestResult:
        return run.stage(
            "test",
            lambda: _test(
                target, argv, job.out_dir, interp, tools, options, test_file.paths, run.echo, cancel
            ),
            lambda t: (
                f"stopped: {cancel.why}"
                if cancel.is_set()
                else f"exit={t.exit_code}: {t.passed} passed, {t.failed} failed, {t.skipped} skipped"
                + ("" if t.source == "junit" else " (read from the log: pytest wrote no JUnit XML)")
            ),
            # a run the machine cannot make (no GPU) is blocked, as its verdict is; else a non-zero exit failed
            status=lambda t: (
                "skipped"
                if cancel.is_set()
                else "ok"
                if t.exit_code == 0
                else ("blocked" if interp.env_problems() else "failed")
            ),
        )

    if options.dry_run_first:  # a fault the CPU finds spends no GPU time at all
        cpu_checks()
        tests = tests_stage()
    else:
        tests = beside.first_beside(tests_stage, cpu_checks, cancel)
    tests.test_skips = list(test_file.skips)  # the reports cite by the verdict's rule
    job.result.tests, job.pytest_rc = tests, tests.exit_code
    gaps = analysis.known_gaps(analysis.load(job.out_dir / "reference" / "analysis.json"))
    differences, unknown = job.result.launch_differences, job.result.launch_unknown
    verdict = run.stage(
        "classify",
        lambda: classify.classify(
            tests, gaps, list(test_file.skips), differences, unknown, dry_run_identical=_identical(job)
        ),
        lambda v: v.kind.value,
    )
    job.result.verdict = with_jit_places(target, with_missing_op(job, verdict, tests), tests)


def own_names(job: Job) -> set[str]:
    """The names the op itself is dispatched by: its own, and what its wrapper registers."""
    plan = job.result.plan
    names = {job.target.op}
    if plan is not None:
        names |= {n for n in (plan.python.register_name, plan.python.inner_name) if n}
    return names


def with_missing_op(job: Job, verdict: Verdict, tests: TestResult) -> Verdict:
    """A failure in TileGym's dispatcher for another op's name: said as that op's missing port."""
    if verdict.kind is not VerdictKind.FAIL:
        return verdict
    text = "\n".join(c.message for c in tests.cases if c.outcome in ("failed", "error"))
    missing = missing_op.find(text, own_names(job), job.target.repo)
    if missing is None:
        return verdict
    return replace(
        verdict, klass="host", reason=missing.reason(job.target.op), host_fix=missing.fix(), followup=""
    )


def with_jit_places(target: Target, verdict: Verdict, tests: TestResult) -> Verdict:
    """A kernel fault with the kernel.rs lines the JIT named under its errors, for the check run."""
    if (verdict.kind, verdict.klass) != (VerdictKind.FAIL, "kernel"):
        return verdict  # a host fault: the JIT's place would point the porter at the wrong file
    return replace(verdict, annotations=annotations.from_jit(target, tests.located))


def module_of(path: str) -> str:
    """``src/tilegym/ops/cutile/moe.py`` -> ``tilegym.ops.cutile.moe``; '' for ''."""
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[1:] if parts and parts[0] == "src" else parts)


def launch_dry_run(job: Job, python: str, interp: testrun.Interpreter, test_file: testrun.TestFile) -> None:
    """The reference and the wrapper launched on the CPU, side by side, before any GPU time: a
    difference is the host's fault, with both values. Without torch it says so and goes on."""
    plan, signature = job.result.plan, job.signature
    if plan is None or signature is None:
        job.run.record("dry run", 0.0, "skipped", "no launch plan to read the C call through")
        return
    if not interp.torch:
        job.run.record("dry run", 0.0, "skipped", f"torch is not importable by {python}")
        return

    def compared() -> dryrun.DryRun:
        reference = job.found.reference.path if job.found and job.found.reference else ""
        found = dryrun.dry_run(
            job.target, plan, signature, python, test_file, job.out_dir, reference_module=module_of(reference)
        )
        job.result.dry_run = found
        reports = job.out_dir / "reports"
        reports.mkdir(parents=True, exist_ok=True)
        (reports / dryrun.TABLE_NAME).write_text(dryrun.table(found, job.target.op), encoding="utf-8")
        no_launch = " ".join(r.cutile_rs for r in found.differences if r.what == "launch")
        missing = missing_op.find(no_launch, own_names(job), job.target.repo)
        if missing is not None:  # the tests need another op's port: nothing to compare until it exists
            raise Blocked("host", missing.reason(job.target.op), host_fix=missing.fix())
        stop = dryrun.stop_for(found, job.result.launch_differences)
        if stop is not None:  # before any GPU time
            raise stop
        return found

    job.run.stage("dry run", compared, lambda r: r.headline())


def _identical(job: Job) -> bool:
    return job.result.dry_run is not None and job.result.dry_run.identical


def registry_name(found: Discovery) -> str:
    return found.registry_name or found.dispatch_name  # a getter registers get_<op> (swiglu)


def registered(
    target: Target, found: Discovery, python: str, interp: testrun.Interpreter | None = None
) -> list[str] | None:
    """The op's cutile-rs implementation is registered where the tests will look for it: read from
    the interpreter probe when it asked (the same process), else asked now."""
    name = registry_name(found)
    asked = (interp.registered or {}) if interp is not None else {}
    backends = asked[name] if name in asked else testrun.registered_backends(python, target.repo, name)
    if backends is not None and "cutile-rs" not in backends:
        raise Failed(
            "host",
            f"tilegym.ops.{name} has no cutile-rs implementation registered "
            f"(registered: {', '.join(backends) or 'none'}): a cutile-rs test would run a fallback",
            host_fix=f'register the wrapper with @register_impl("{name}", backend="cutile-rs") '
            "and import it in ops/cutile_rs/__init__.py",
        )
    return backends


def _test_files(target: Target, found: Discovery, interp: testrun.Interpreter) -> testrun.TestFile:
    if not found.test_sites:
        if interp.env_problems():  # the machine could not prove anything either way: say that first
            raise Blocked("env", interp.env_problem(), runner_fix=interp.env_fix())
        raise Blocked(
            "host",
            f"no test file reaches {found.dispatch_name!r}: " + "; ".join(found.tried),
            host_fix=f"add a test under tests/ that calls tilegym.ops.{found.dispatch_name}",
        )
    return testrun.read_test_files(target.repo, found.test_sites)


def abi_smoke(target: Target, so_path: str) -> tuple[bool, str]:
    utils = target.repo / "src" / "tilegym" / "backend" / "cutile_rs" / "utils.py"
    ok, detail = smoke.smoke(Path(so_path), target.wrapper_py, utils)
    if not ok:
        raise Failed("host", f"ABI smoke check failed: {detail}", host_fix="ffi.rs and _FFI_CDEF must agree")
    return ok, detail


def _test(
    target,
    argv,
    out_dir: Path,
    interp,
    tools,
    options: PortOptions,
    test_paths,
    echo: progress.Echo,
    cancel: testrun.Cancel | None = None,
) -> TestResult:
    """pytest on the kernel's tests; ``echo``: its progress lines (the kernel's own, tagged when
    kernels are tested side by side)."""
    if not interp.pytest:
        raise Blocked(
            "env", interp.env_problem() or f"cannot run {interp.python}", runner_fix=interp.env_fix()
        )
    log_path = out_dir / "correctness_cutile_rs.txt"
    junit_path = out_dir / testrun.JUNIT_NAME
    junit_path.unlink(missing_ok=True)  # an earlier run's results must not stand in for this one's
    env = {"CUTILE_RS_AUTOBUILD": "0", "CUTILE_KERNEL_OUT_ROOT": str(out_dir.parent)}
    if tools is not None:
        env["CUDA_TOOLKIT_PATH"] = str(tools.cuda_toolkit_path)
    deadline = time.monotonic() + options.test_timeout
    shown = echo if options.echo_pytest else None
    outcome = testrun.run(target, argv, log_path, env, options.test_timeout, shown, echo, cancel=cancel)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    xml = junit_path.read_text(encoding="utf-8", errors="replace") if junit_path.is_file() else None
    result = to_test_result(
        text,
        command=testrun.shown(argv),
        exit_code=outcome.code,
        log_path=str(log_path),
        gpu=interp.cuda,
        junit_xml=xml,
        test_paths=test_paths,
    )
    result.env_problem = interp.env_problem()  # the reasons; their fixes are the fix line, each said once
    result.env_fix = interp.env_fix()
    result.stopped_by_timeout = outcome.stopped
    result.silent_for = outcome.silent_for
    return rerun.run_what_remains(target, argv, result, out_dir, env, deadline, echo, cancel)
