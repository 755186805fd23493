"""Stage "classify": run facts -> ALL_PASS | FAIL(host|kernel) | BLOCKED(env|host|kernel).

Rules (docs/classification.md says each and why), first match wins:
1. pytest could not start, or the interpreter lacks pytest/torch/a GPU/the tile toolchain
   -> BLOCKED env.
2. agent-d stopped pytest at --test-timeout: a test silent past pytest-timeout's 60 s never returned
   (a hang: a device fault, rule 5); otherwise the run needed more time -> BLOCKED env.
3. the process died: memory freed twice or not ours -> host; a crash the kernel's launch or JIT
   left evidence of (a panic, a stack overflow, a CUDA error) -> a device fault (rule 5); else host.
4. zero cutile-rs tests selected (exit 5) -> FAIL host: registration or parametrization missing.
5. a failure: the launcher's argument codes (-2, -4, -5, -6), an output of the wrong shape or
   dtype, a grid the partition rejects, a wrapper error -> host. A device fault (numeric
   mismatch, NaN outputs, an illegal address, a launch/JIT failure, a hang) after the ABI smoke
   passed -> kernel, unless the porter's contract launches the kernel otherwise than the
   reference does (``launch_differences``): then host, naming the contract key. When a contract
   is in use and its launch could not be compared (``launch_unknown``), also host: agent-d cannot
   vouch for the launch, so it must look first.
6. a skip without a citation (analysis.json known_gaps or the test's own forward-only rule)
   -> FAIL host.
7. pytest exit 0 with at least one pass -> ALL_PASS (later confirmed by the validator).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.classify.citation import citation
from bot.classify.types import Verdict, VerdictKind
from bot.errors import UNPORTED_PATH
from bot.testing.types import TestResult
from bot.testresults.log_scan import SWEEP_READ


@dataclass(frozen=True)
class _Launch:
    """What agent-d knows of the launch against the reference's (rule 5)."""

    differences: list[str]
    unknown: str  # why it could not be compared although a contract is in use; empty otherwise
    # the dry run launched the reference and the port side by side and found every value equal
    identical: bool = False


PER_TEST_TIMEOUT_S = 60.0  # the run's --timeout=60 (docs/architecture.md, "Test results")
# pytest-timeout's words: "Timeout >60.0s" before 2.2, "Timeout (>60.0s) from pytest-timeout." since
_TIMEOUT = re.compile(r"Failed: Timeout \(?>\d", re.I)

_HOST_PATTERNS = (
    (re.compile(r"rc=-[2456]\b|returned error code -[2456]\b"), "the launcher rejected its arguments ({m})"),
    (
        re.compile(
            r"shape \S.* != reference|attribute 'shape' do not match|dtype \S.* != reference|"
            r"attribute 'dtype' do not match",
            re.I,
        ),
        "the output's shape or dtype differs from the reference's: the wrapper allocates it ({m})",
    ),
    (
        re.compile(r"Specified launch grid does not match", re.I),
        "launch grid does not match the partition ({m})",
    ),
    (re.compile(r"is not available|not registered|NotImplementedError", re.I), "backend not wired ({m})"),
    (
        re.compile(r"TypeError|AttributeError|NameError|ImportError|cffi|CDefError", re.I),
        "wrapper error ({m})",
    ),
)
# Faults the device shows after the ABI smoke passed: the kernel's, unless the launch is not the reference's.
_DEVICE_PATTERNS = (
    (_TIMEOUT, "hang"),  # pytest-timeout did interrupt it
    (
        re.compile(r"illegal memory access|CUDA error 700|an illegal address|ILLEGAL_ADDRESS", re.I),
        "illegal memory access",
    ),
    (re.compile(r"Greatest (absolute|relative) difference: nan\b|\bnan\b.*not close", re.I), "NaN outputs"),
    (re.compile(r"Mismatched elements|not close|assert_close|Tensor-likes", re.I), "numeric mismatch"),
    (re.compile(r"rc=-3\b|kernel launch failed|JIT|tileiras|Failed to compile", re.I), "launch/JIT failure"),
)
_ENV_PATTERNS = (
    re.compile(r"tileiras.*(not found|No such file)|CUDA driver too old|no CUDA device|CUDA_HOME", re.I),
)
# A dead process: who left evidence. Memory handed back twice (or not ours) is the host's (docs/classification.md).
_HOST_CRASH = re.compile(r"double free|free\(\): invalid|munmap_chunk|corrupted (size|double-linked)", re.I)
_DEVICE_CRASH = re.compile(
    r"panicked at|has overflowed its stack|CUDA error|CUDA_ERROR|illegal memory access|tileiras", re.I
)
# a test's own check of the outputs failed (any helper's wording: assert_close, allclose, a banner)
_ASSERTION = re.compile(r"AssertionError|\bassert\b|DID NOT MATCH|allclose", re.I)
_NAN = re.compile(r"\bnan\b", re.I)


def before_tests(problem: str) -> Verdict:
    return Verdict(VerdictKind.BLOCKED, "env", problem)


def classify(
    result: TestResult,
    known_gaps: list[str],
    test_skips: list[str] | None = None,
    launch_differences: list[str] | None = None,
    launch_unknown: str = "",
    dry_run_identical: bool = False,
) -> Verdict:
    """``test_skips``: the skip reasons the op's test file itself raises (``testrun.read_test_file``);
    ``launch_differences``: how the porter's contract changes the launch (``bot/classify/launch_diff.py``);
    ``launch_unknown``: why that could not be read although a contract is in use;
    ``dry_run_identical``: the launch dry run found the port's launch equal to the reference's
    (``bot/dryrun``): a device fault, or the tests' own assertion on the outputs, is the kernel's."""
    launch = _Launch(launch_differences or [], launch_unknown, dry_run_identical)
    unfinished = _unfinished_run(result, launch)
    if unfinished is not None:
        return unfinished
    crashed = next((c for c in result.cases if c.message.startswith("crashed:")), None)
    if result.exit_code < 0 or result.exit_code in (134, 139) or crashed is not None:
        return _crash(result, crashed, launch)
    rejected = _rejected_selection(result)
    if rejected is not None:
        return rejected
    failed = [c for c in result.cases if c.outcome in ("failed", "error")]
    if failed or result.failed or result.errors or result.exit_code not in (0,):
        first = failed[0] if failed else None
        message = first.message if first else f"pytest exit {result.exit_code}"
        detail = first.detail if first else ""
        return _failure(message, first.nodeid if first else "", result.panics, launch, detail)
    uncited = _uncited_skip(result, known_gaps, test_skips or [])
    if uncited is not None:
        return uncited
    if result.passed == 0:
        return Verdict(VerdictKind.FAIL, "host", "no cutile-rs test passed (all skipped)")
    return Verdict(VerdictKind.ALL_PASS, "", f"{result.passed} passed, {result.skipped} skipped (cited)")


def _unfinished_run(result: TestResult, launch: _Launch) -> Verdict | None:
    """The run that proves nothing about the kernel: the environment stopped it, pytest never
    started, or --test-timeout cut it short (a hang past the per-test timeout is the kernel's)."""
    if result.env_problem:
        detail = f"; pytest exit={result.exit_code}" if result.ran else ""
        return Verdict(
            VerdictKind.BLOCKED,
            "env",
            f"{result.env_problem}{detail}: the tests cannot prove the kernel here",
            runner_fix=result.env_fix,
        )
    if not result.ran or result.exit_code is None:
        return Verdict(VerdictKind.BLOCKED, "env", "pytest could not be started")
    if not result.stopped_by_timeout:
        return None
    crashed = next((c for c in result.cases if c.message.startswith("crashed:")), None)
    if crashed is not None and result.silent_for >= PER_TEST_TIMEOUT_S:
        what = (
            f"hang: no output for {result.silent_for:.0f} s, past pytest-timeout's {PER_TEST_TIMEOUT_S:.0f} s"
        )
        return _device_fault("hang", f"{crashed.nodeid}: ", what, crashed.nodeid, [], launch)
    return Verdict(
        VerdictKind.BLOCKED,
        "env",
        f"the pytest run outlasted --test-timeout ({result.passed} passed, {result.failed} failed, "
        f"{result.skipped} skipped so far): give it more time",
        runner_fix="give the run more time (--test-timeout)",
    )


def _rejected_selection(result: TestResult) -> Verdict | None:
    """Tests that ran but cannot count: an xfail marker, or no cutile-rs test selected at all."""
    marked = [c for c in result.cases if c.outcome in ("xfailed", "xpassed")]
    if marked:
        return Verdict(
            VerdictKind.FAIL,
            "host",
            f"xfail marker on {marked[0].nodeid}: xfail markers are not allowed",
            host_fix="remove the xfail marker; a known gap is a cited skip",
        )
    if result.exit_code == 5 or (result.passed + result.failed + result.errors + result.skipped) == 0:
        return Verdict(
            VerdictKind.FAIL,
            "host",
            "zero cutile-rs tests selected: registration or test parametrization missing",
            host_fix="check the package import, the register_impl name and _backends in the test file",
        )
    return None


def _uncited_skip(result: TestResult, known_gaps: list[str], test_skips: list[str]) -> Verdict | None:
    """The first skip whose reason neither analysis.json's known gaps nor the test file cites."""
    skipped = [c for c in result.cases if c.outcome == "skipped"]
    uncited = [c for c in skipped if c.message and not _cited(c.message, known_gaps, test_skips)]
    unexplained = [c for c in skipped if not c.message]
    if unexplained and not uncited:
        # pytest groups identical skips (-rs): when the groups account for every skip and each
        # group's reason is cited, every skip is.
        groups = result.skip_groups
        covered = sum(n for n, _ in groups) == len(skipped)
        if not (covered and all(_cited(reason, known_gaps, test_skips) for _, reason in groups)):
            uncited = unexplained
    if not uncited:
        return None
    c = uncited[0]
    return Verdict(
        VerdictKind.FAIL,
        "host",
        f"uncited skip: {c.nodeid}: {c.message or 'no reason'}",
        host_fix="a skip needs a citation (analysis.json known_gaps or a coding rule)",
    )


def _cited(reason: str, known_gaps: list[str], test_skips: list[str]) -> bool:
    return bool(citation(reason, known_gaps, test_skips))


def _crash(result: TestResult, crashed, launch: _Launch) -> Verdict:
    """The test process died; the output around the crash says whose fault it is."""
    where = f"{crashed.nodeid}: " if crashed is not None else ""
    text = " ".join(x for x in (crashed.message, crashed.detail) if x) if crashed is not None else ""
    said = f"pytest died (exit {result.exit_code})" + (f" in {crashed.nodeid}" if crashed is not None else "")
    if not _HOST_CRASH.search(text) and (_DEVICE_CRASH.search(text) or result.panics):
        evidence = _DEVICE_CRASH.search(text)
        seen = evidence.group(0) if evidence else f"a panic: {result.panics[0]}"
        return _device_fault(
            "process abort",
            where,
            f"{said}; the launch left {seen!r}",
            crashed.nodeid if crashed else "",
            result.panics,
            launch,
        )
    return Verdict(
        VerdictKind.FAIL,
        "host",
        f"{said}: the host code crashed the process" + (f" ({' '.join(text.split())[:200]})" if text else ""),
        host_fix='look for a double free or a panic across extern "C" in ffi.rs',
    )


def _failure(
    message: str,
    nodeid: str,
    panics: list[str] | None = None,
    launch: _Launch | None = None,
    detail: str = "",
) -> Verdict:
    short = " ".join(message.split())[:240]
    text = f"{message} {detail}"
    where = f"{nodeid}: " if nodeid else ""
    launch = launch or _Launch([], "")
    differences = launch.differences
    for pattern in _ENV_PATTERNS:
        if pattern.search(message):
            return Verdict(
                VerdictKind.BLOCKED,
                "env",
                f"{where}toolchain problem during the run: {short}",
                runner_fix="check CUDA_HOME and the tile toolchain (tileiras, libnvvm, ptxas) of the runner",
            )
    unported = UNPORTED_PATH.search(message)  # the wrapper refuses a path kernel.rs lacks
    if unported:
        return Verdict(
            VerdictKind.FAIL,
            "kernel",
            f"{where}the test takes a launch path of the cuTile reference that kernel.rs does not port: "
            f"{unported.group('through')} when {unported.group('when')}",
            followup=f"add to kernel.rs the kernels the reference launches through {unported.group('through')}; "
            "agent-d then ports that path too",
        )
    for pattern, what in _HOST_PATTERNS:
        m = pattern.search(message)
        if m:
            fix = "fix the generated host code or its contract and re-run"
            if differences:  # the porter's contract is the first suspect
                fix = (
                    f"host_contract.yaml: {differences[0]}: launch as the reference does, or remove that key"
                )
            return Verdict(VerdictKind.FAIL, "host", where + what.format(m=short), host_fix=fix)
    sweep = SWEEP_READ.search(detail) if _TIMEOUT.search(message) else None
    if sweep:
        return _sweep_timeout(where, sweep.group("k"), sweep.group("n"))
    for pattern, what in _DEVICE_PATTERNS:
        if pattern.search(text) or (
            what == "illegal memory access" and any(pattern.search(p) for p in panics or [])
        ):
            return _device_fault(what, where, short, nodeid, panics or [], launch)
    if launch.identical and _ASSERTION.search(text):
        # the test's own comparison failed after a launch equal to the reference's: whatever its
        # helper prints, the outputs are the kernel's
        what = "NaN outputs" if _NAN.search(text) else "numeric mismatch"
        return _device_fault(what, where, short, nodeid, panics or [], launch)
    return Verdict(VerdictKind.FAIL, "host", f"{where}{short}", host_fix="inspect the pytest log")


def _sweep_timeout(where: str, reached: str, offered: str) -> Verdict:
    """pytest-timeout ended a case inside the autotuner's first sweep of a shape: the time went to
    compiling and timing the configs the wrapper offers, not to a hung kernel."""
    return Verdict(
        VerdictKind.FAIL,
        "host",
        f"{where}pytest-timeout's {PER_TEST_TIMEOUT_S:.0f} s ran out in the autotuner's sweep, at config "
        f"{reached} of {offered}: the first call of a shape compiles and times every config the wrapper offers",
        host_fix=(
            "offer fewer autotune configs for this GPU (host_contract.yaml python.configs; TileGym's "
            "hand-written ports keep one or two), or run the tests with TILEGYM_DISABLE_AUTOTUNE=1"
        ),
    )


def _device_fault(
    what: str, where: str, short: str, nodeid: str, panics: list[str], launch: _Launch
) -> Verdict:
    """A fault the device showed after the ABI smoke passed: the kernel's when the host launched it as
    the reference does; the host's when the porter's contract launches it otherwise, or when a
    contract is in use and agent-d could not compare its launch."""
    differences = [] if launch.identical else launch.differences  # the dry run saw the launch itself
    if not differences and launch.unknown and not launch.identical:
        return Verdict(
            VerdictKind.FAIL,
            "host",
            f"{where}{what} ({short}), and the contract's launch could not be compared with the "
            f"reference's: {launch.unknown}",
            host_fix=f"agent-d could not read the contract's launch ({launch.unknown[:160]}): "
            "fix that and re-run, or remove host_contract.yaml",
        )
    if differences:
        more = f" (+{len(differences) - 1} more)" if len(differences) > 1 else ""
        return Verdict(
            VerdictKind.FAIL,
            "host",
            f"{where}{what} ({short}), and the contract launches the kernel otherwise than the reference: "
            f"{differences[0]}{more}",
            host_fix=f"host_contract.yaml: {differences[0]}: launch as the reference does, or remove that key",
        )
    # rc -3 says only "launch failed"; the panic the launcher caught (the JIT's message) or the
    # stream error it printed says why
    why = " ".join(panics[0].split()) if panics else ""
    source = "the stream said" if "failed on the stream" in why else "the JIT said"
    said = f"; {source}: {why[:240]}" if panics else ""
    launched = (
        "the dry run found the launch equal to the cuTile reference's"
        if launch.identical
        else "the host launched it as the reference does"
    )
    followup = f"kernel.rs: {what} in {nodeid or 'the correctness test'}; " + (
        f"{source}: {why[:200]}"
        if panics
        else f"the ABI checks passed and {launched}, so check the device code"
    )
    return Verdict(VerdictKind.FAIL, "kernel", f"{where}{what} ({short}){said}", followup=followup)


def after_validator(verdict: Verdict, validator_exit: int, first_failure: str) -> Verdict:
    """ALL_PASS needs the validator too; a failing validator turns it into FAIL host."""
    if verdict.kind is VerdictKind.ALL_PASS and validator_exit != 0:
        return Verdict(
            VerdictKind.FAIL,
            "host",
            f"validator failed: {first_failure}",
            host_fix="make the reports and host artefacts satisfy the validator",
        )
    return verdict
