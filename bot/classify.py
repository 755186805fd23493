"""Stage "classify": run facts -> ALL_PASS | FAIL(host|kernel) | BLOCKED(env|host|kernel).

Rules (domain.md section 10), first match wins:
1. pytest could not start, the interpreter lacks pytest/torch/a GPU, or the run outlasted its time
   budget -> BLOCKED env.
2. pytest crashed (killed by a signal, SIGABRT from freeing PyTorch memory) -> FAIL host.
3. zero cutile-rs tests selected (exit 5) -> FAIL host: registration or parametrization missing.
4. a failure: bad FFI return codes, illegal address, grid mismatch from our launcher -> host;
   numeric mismatch with a correct ABI, a JIT/compile panic -> kernel, with a follow-up line.
5. a skip without a citation (analysis.json known_gaps or the test's own forward-only rule)
   -> FAIL host.
6. pytest exit 0 with at least one pass -> ALL_PASS (later confirmed by the validator).
"""

from __future__ import annotations

import re

from bot.types import TestResult, Verdict, VerdictKind

_HOST_PATTERNS = (
    (re.compile(r"rc=-[2456]\b|returned error code -[2456]\b"), "the launcher rejected its arguments ({m})"),
    (
        re.compile(r"illegal memory access|CUDA error 700|an illegal address", re.I),
        "illegal memory access ({m})",
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
_KERNEL_PATTERNS = (
    (re.compile(r"Mismatched elements|not close|assert_close|Tensor-likes", re.I), "numeric mismatch ({m})"),
    (
        re.compile(r"rc=-3\b|kernel launch failed|JIT|tileiras|Failed to compile", re.I),
        "launch/JIT failure ({m})",
    ),
)
_ENV_PATTERNS = (
    re.compile(r"tileiras.*(not found|No such file)|CUDA driver too old|no CUDA device|CUDA_HOME", re.I),
)
_FORWARD_ONLY = re.compile(r"backward", re.I)
_BACKEND_MISSING = re.compile(r"backend .*not (available|supported)|not available", re.I)


def before_tests(problem: str) -> Verdict:
    return Verdict(VerdictKind.BLOCKED, "env", problem)


def classify(result: TestResult, known_gaps: list[str], test_skips: list[str] | None = None) -> Verdict:
    """``test_skips``: the skip reasons the op's test file itself raises (``testrun.read_test_file``)."""
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
    if result.stopped_by_timeout:
        return Verdict(
            VerdictKind.BLOCKED,
            "env",
            f"the pytest run outlasted --test-timeout ({result.passed} passed, {result.failed} failed, "
            f"{result.skipped} skipped so far): give it more time",
        )
    if result.exit_code < 0 or result.exit_code in (134, 139):
        return Verdict(
            VerdictKind.FAIL,
            "host",
            f"pytest died (exit {result.exit_code}): the host code crashed the process",
            host_fix='look for a double free or a panic across extern "C" in ffi.rs',
        )
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
    failed = [c for c in result.cases if c.outcome in ("failed", "error")]
    if failed or result.failed or result.errors or result.exit_code not in (0,):
        message = failed[0].message if failed else f"pytest exit {result.exit_code}"
        return _failure(message, failed[0].nodeid if failed else "", result.panics)
    skipped = [c for c in result.cases if c.outcome == "skipped"]
    uncited = [c for c in skipped if c.message and not _cited(c.message, known_gaps, test_skips or [])]
    unexplained = [c for c in skipped if not c.message]
    if unexplained and not uncited:
        # pytest groups identical skips (-rs): when the groups account for every skip and each
        # group's reason is cited, every skip is.
        groups = result.skip_groups
        covered = sum(n for n, _ in groups) == len(skipped)
        if not (covered and all(_cited(reason, known_gaps, test_skips or []) for _, reason in groups)):
            uncited = unexplained
    if uncited:
        c = uncited[0]
        return Verdict(
            VerdictKind.FAIL,
            "host",
            f"uncited skip: {c.nodeid}: {c.message or 'no reason'}",
            host_fix="a skip needs a citation (analysis.json known_gaps or a coding rule)",
        )
    if result.passed == 0:
        return Verdict(VerdictKind.FAIL, "host", "no cutile-rs test passed (all skipped)")
    return Verdict(VerdictKind.ALL_PASS, "", f"{result.passed} passed, {result.skipped} skipped (cited)")


def _cited(reason: str, known_gaps: list[str], test_skips: list[str]) -> bool:
    if not reason or _BACKEND_MISSING.search(reason):
        return False
    if _FORWARD_ONLY.search(reason):
        return True
    # The test file's own rule (an impossible parameter combination, a skip for every backend).
    if any(
        len(text) >= 12 and reason.startswith(text) and not _BACKEND_MISSING.search(text)
        for text in test_skips
    ):
        return True
    return any(gap and (gap.lower() in reason.lower() or reason.lower() in gap.lower()) for gap in known_gaps)


def _failure(message: str, nodeid: str, panics: list[str] | None = None) -> Verdict:
    short = " ".join(message.split())[:240]
    # rc -3 says only "launch failed"; the panic the launcher caught says why (the JIT's message)
    said = f"; the launch panicked: {' '.join(panics[0].split())[:240]}" if panics else ""
    where = f"{nodeid}: " if nodeid else ""
    for pattern in _ENV_PATTERNS:
        if pattern.search(message):
            return Verdict(VerdictKind.BLOCKED, "env", f"{where}toolchain problem during the run: {short}")
    for pattern, text in _HOST_PATTERNS:
        m = pattern.search(message)
        if m:
            return Verdict(
                VerdictKind.FAIL,
                "host",
                where + text.format(m=short),
                host_fix="fix the generated host code or its contract and re-run",
            )
    for pattern, text in _KERNEL_PATTERNS:
        m = pattern.search(message)
        if m:
            followup = f"kernel.rs: {text.split(' (')[0]} in {nodeid or 'the correctness test'}; " + (
                f"the JIT said: {' '.join(panics[0].split())[:200]}"
                if panics
                else "the ABI checks passed, so check the device math"
            )
            return Verdict(VerdictKind.FAIL, "kernel", where + text.format(m=short) + said, followup=followup)
    return Verdict(VerdictKind.FAIL, "host", f"{where}{short}", host_fix="inspect the pytest log")


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
