"""Verdict rules: each class of run fact lands in its verdict, and the reason says why."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from bot.classify.classify import after_validator, classify
from bot.classify.types import Verdict, VerdictKind
from bot.targets.types import Target, TestSite
from bot.testing import testrun
from bot.testing.types import TestCase, TestResult
from bot.testresults.combine import to_test_result


def _result(code, cases=(), env="", **counts) -> TestResult:
    r = TestResult(
        ran=True, command="pytest", exit_code=code, log_path="log", cases=list(cases), env_problem=env
    )
    for k, v in counts.items():
        setattr(r, k, v)
    return r


def test_no_gpu_is_blocked_env_even_if_pytest_ran():
    v = classify(_result(4, env="no CUDA GPU on this machine"), [])
    assert (v.kind, v.klass) == (VerdictKind.BLOCKED, "env") and "no CUDA GPU" in v.reason


def test_all_green_is_all_pass():
    v = classify(_result(0, [TestCase("t::a[cutile_rs]", "passed")], passed=1), [])
    assert v.kind is VerdictKind.ALL_PASS


def test_zero_selected_is_host():
    v = classify(_result(5), [])
    assert (v.kind, v.klass) == (VerdictKind.FAIL, "host") and "zero cutile-rs tests" in v.reason


def test_numeric_mismatch_is_kernel_with_followup():
    case = TestCase(
        "t::test_op[cutile_rs-x]",
        "failed",
        "AssertionError: Tensor-likes are not close! Mismatched elements: 3",
    )
    v = classify(_result(1, [case], failed=1), [])
    assert (v.kind, v.klass) == (VerdictKind.FAIL, "kernel") and v.followup.startswith("kernel.rs")


def test_bad_return_code_is_host():
    case = TestCase(
        "t::test_op[cutile_rs]", "failed", "RuntimeError: cutile_x failed (rc=-6): invalid arguments"
    )
    assert classify(_result(1, [case], failed=1), []).klass == "host"


def test_crash_is_host():
    v = classify(
        _result(-6, [TestCase("t::a", "error", "crashed: Fatal Python error: Aborted")], errors=1), []
    )
    assert (v.kind, v.klass) == (VerdictKind.FAIL, "host") and "died" in v.reason


def test_uncited_skip_fails_and_cited_skip_passes():
    skipped = TestCase("t::test_op[cutile_rs-fp8]", "skipped", "fp8 inputs not supported")
    passed = TestCase("t::test_op[cutile_rs-f16]", "passed")
    assert classify(_result(0, [passed, skipped], passed=1, skipped=1), []).kind is VerdictKind.FAIL
    cited = classify(_result(0, [passed, skipped], passed=1, skipped=1), ["fp8 inputs not supported"])
    assert cited.kind is VerdictKind.ALL_PASS


def test_backend_unavailable_skip_is_never_cited():
    skipped = TestCase("t::test_op[cutile_rs]", "skipped", "Backend cutile-rs is not available")
    passed = TestCase("t::test_op[cutile]", "passed")
    v = classify(_result(0, [passed, skipped], passed=1, skipped=1), ["Backend cutile-rs is not available"])
    assert v.kind is VerdictKind.FAIL and "uncited skip" in v.reason


def test_xfail_marker_is_refused():
    v = classify(_result(0, [TestCase("t::a", "xfailed", "")], passed=0), [])
    assert v.kind is VerdictKind.FAIL and "xfail" in v.reason


def test_validator_failure_turns_pass_into_host_fail_but_keeps_other_verdicts():
    ok = Verdict(VerdictKind.ALL_PASS, "", "fine")
    assert after_validator(ok, 1, "FAIL: x").klass == "host"
    blocked = Verdict(VerdictKind.BLOCKED, "env", "no gpu")
    assert after_validator(blocked, 1, "FAIL: x") is blocked


def test_skip_raised_by_the_test_file_itself_is_cited():
    skipped = TestCase(
        "t::test_op[cutile-rs-k1023]",
        "skipped",
        "Skip matmul due to result mismatch when cannot divide BLOCK",
    )
    passed = TestCase("t::test_op[cutile-rs-k1024]", "passed")
    own = ["Backend ", "Skip matmul due to result mismatch when cannot divide BLOCK"]
    assert classify(_result(0, [passed, skipped], passed=1, skipped=1), [], own).kind is VerdictKind.ALL_PASS
    # "Backend {backend} is not available" is in the file too, but never a citation.
    missing = TestCase("t::test_op[cutile-rs]", "skipped", "Backend cutile-rs is not available")
    v = classify(
        _result(0, [passed, missing], passed=1, skipped=1), [], own + ["Backend cutile-rs is not available"]
    )
    assert v.kind is VerdictKind.FAIL


def test_run_stopped_at_its_time_budget_is_blocked_env_not_a_crash():
    r = _result(-9, [TestCase("t::a", "passed")], passed=5)
    r.stopped_by_timeout = True
    v = classify(r, [])
    assert (v.kind, v.klass) == (VerdictKind.BLOCKED, "env") and "--test-timeout" in v.reason


def test_grouped_skip_summary_cites_skips_only_when_it_covers_all_of_them():
    passed = TestCase("t::test_op[a]", "passed")
    skips = [TestCase(f"t::test_op[k{i}]", "skipped", "") for i in range(4)]  # verbose lines carry no reason
    own = ["Skip matmul due to result mismatch when cannot divide BLOCK"]
    r = _result(0, [passed, *skips], passed=1, skipped=4)
    r.skip_groups = [(4, "Skip matmul due to result mismatch when cannot divide BLOCK")]
    assert classify(r, [], own).kind is VerdictKind.ALL_PASS
    r.skip_groups = [(3, "Skip matmul due to result mismatch when cannot divide BLOCK")]
    assert classify(r, [], own).kind is VerdictKind.FAIL
    r.skip_groups = [(4, "something nobody cited")]
    assert classify(r, [], own).kind is VerdictKind.FAIL


def test_missing_interpreter_is_named_in_the_reason():
    from bot.testing.testrun import probe

    interp = probe("/nonexistent/python3")
    assert interp.env_problem() == "interpreter not found: /nonexistent/python3"


_GROUPED_LOG = """\
tests/ops/test_x.py::test_op[a-cutile_rs] PASSED [ 25%]
tests/ops/test_x.py::test_op[b-cutile_rs] SKIPPED [ 50%]
tests/ops/test_x.py::test_op[c-cutile_rs] SKIPPED [ 75%]
tests/ops/test_x.py::test_op[d-cutile_rs] SKIPPED [100%]
=========================== short test summary info ============================
{line}
========================= 1 passed, 3 skipped in 0.50s =========================
"""
_OWN = ["Skip matmul due to result mismatch when cannot divide BLOCK"]


@pytest.mark.parametrize(
    "line",
    [
        # some pytest versions put "Skipped: " before an imperative pytest.skip() reason
        "SKIPPED [3] tests/ops/test_x.py:12: Skipped: Skip matmul due to result mismatch when cannot divide BLOCK",
        # no ":<line>:" when pytest has no line number for the skip
        "SKIPPED [3] tests/ops/test_x.py: Skip matmul due to result mismatch when cannot divide BLOCK",
    ],
)
def test_grouped_skips_from_the_log_are_cited(line):
    r = to_test_result(_GROUPED_LOG.format(line=line), command="c", exit_code=0, log_path="")
    assert r.skip_groups == [(3, _OWN[0])]
    assert classify(r, [], _OWN).kind is VerdictKind.ALL_PASS
    uncited = to_test_result(
        _GROUPED_LOG.format(line=line.replace("Skip matmul", "Skip bmm")),
        command="c",
        exit_code=0,
        log_path="",
    )
    assert classify(uncited, [], _OWN).kind is VerdictKind.FAIL


def test_run_says_when_it_stopped_pytest_not_the_log(tmp_path):
    slow = [
        sys.executable,
        "-c",
        "import time\nfor i in range(100):\n    print(i, flush=True); time.sleep(0.1)",
    ]
    outcome = testrun.run(Target(tmp_path, "x"), slow, tmp_path / "slow.txt", {}, 0.0)
    assert outcome.stopped and outcome.code is not None and outcome.code < 0
    assert testrun.STOPPED in (tmp_path / "slow.txt").read_text()
    # a pytest that hangs without printing a line is stopped at the deadline too, with its children
    marker = tmp_path / "child-survived"
    child = f"import time; time.sleep(3); open({str(marker)!r}, 'w')"
    silent = [
        sys.executable,
        "-c",
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}])\ntime.sleep(60)",
    ]
    t0 = time.monotonic()
    outcome = testrun.run(Target(tmp_path, "x"), silent, tmp_path / "silent.txt", {}, 1.0)
    assert outcome.stopped and outcome.code is not None and outcome.code < 0
    assert time.monotonic() - t0 < 30  # not the child's 60 s: the deadline fired without any output
    assert outcome.silent_for >= 0.9  # it said nothing from its start to the deadline
    time.sleep(3.5)
    assert not marker.exists()  # the grandchild died with the group
    # a run that prints the marker itself was not stopped by us
    echo = [sys.executable, "-c", f"print({testrun.STOPPED!r})"]
    outcome = testrun.run(Target(tmp_path, "x"), echo, tmp_path / "echo.txt", {}, 60.0)
    assert (outcome.code, outcome.stopped) == (0, False)
    assert testrun.run(Target(tmp_path, "x"), ["/nonexistent/python3"], tmp_path / "n.txt", {}, 60.0) == (
        None,
        0.0,
        False,
        0.0,
    )


def test_test_file_is_parsed_once_for_selection_and_skip_texts(tmp_path):
    test_file = tmp_path / "tests" / "ops" / "test_x.py"
    test_file.parent.mkdir(parents=True)
    test_file.write_text(
        textwrap.dedent(
            """\
            import pytest

            class Test_X:
                def test_op(self, backend):
                    if backend == "cutile-rs":
                        pytest.skip(f"Backend {backend} is not available")
                    pytest.skip("Skip x when the shape cannot divide BLOCK")

                def test_op_backward(self):
                    pass

                def test_autotune_op(self):
                    pass
            """
        )
    )
    tests = testrun.read_test_file(test_file)
    assert tests.functional == ("test_op", "test_autotune_op")
    assert tests.skips == ("Skip x when the shape cannot divide BLOCK", "Backend ")  # ast.walk order
    site = TestSite("tests/ops/test_x.py", 4, "class", "named test_x.py", direct=False)
    merged = testrun.read_test_files(tmp_path, (site,))
    assert (merged.functional, merged.skips) == (tests.functional, tests.skips)
    argv, selection = testrun.command("python3", merged)
    assert argv[3] == "tests/ops/test_x.py"
    assert (
        selection == "(cutile_rs or cutile-rs) and (test_op or test_autotune_op) and not (test_op_backward)"
    )
    # a site's own list of tests that call the op wins over the name rule
    called = TestSite("tests/ops/test_x.py", 4, "class", "line 9", functional=("test_autotune_op",))
    assert testrun.command("python3", testrun.read_test_files(tmp_path, (called,)))[1] == (
        "(cutile_rs or cutile-rs) and (test_autotune_op)"
    )
    assert testrun.read_test_file(tmp_path / "absent.py") == testrun.TestFile()


def test_selection_excludes_tests_a_functional_name_is_a_substring_of(tmp_path):
    """pytest -k matches substrings: `test_op` alone would also run `test_op_backward`."""
    test_file = tmp_path / "tests" / "ops" / "test_y.py"
    test_file.parent.mkdir(parents=True)
    test_file.write_text(
        "class T:\n    def test_op(self):\n        pass\n\n    def test_op_backward(self):\n        pass\n\n"
        "    def test_op_irregular(self):\n        pass\n\n    def test_perf(self):\n        pass\n"
    )
    site = TestSite("tests/ops/test_y.py", 0, "", "named test_y.py", direct=False)
    files = testrun.read_test_files(tmp_path, (site,))
    assert files.all_tests == ("test_op", "test_op_backward", "test_op_irregular", "test_perf")
    assert testrun.command("python3", files)[1] == (
        "(cutile_rs or cutile-rs) and (test_op or test_op_irregular) and not (test_op_backward)"
    )


def test_a_jit_panic_behind_rc_minus_3_is_named_in_the_kernel_verdict():
    """Recorded on the H200 (agent-d d21bc59, our dropout kernel): the launcher caught the JIT's panic
    and returned rc -3; the verdict says what the JIT said, so the kernel author can act on it."""
    log = (Path(__file__).parent / "fixtures" / "logs" / "h200_dropout_jit_panic.txt").read_text()
    result = to_test_result(log, command="pytest", exit_code=1, log_path="x", gpu=True)
    assert result.panics == [
        "Failed to serialize bytecode for /tmp/cd10e7c3-1e62-4178-98da-193a5946ab3f.bc: "
        "bytecode write error: missing attribute 'overflow' on op ShLI"
    ]
    verdict = classify(result, [], [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "kernel")
    assert "launch/JIT failure" in verdict.reason
    assert verdict.reason.endswith("missing attribute 'overflow' on op ShLI")
    assert "the JIT said:" in verdict.followup and "\n" not in verdict.followup


def test_the_stream_error_the_launcher_printed_names_the_device_fault():
    """Recorded on the H200 (agent-d f2ee068, the fault corpus's kernel_illegal_address): the test's
    E line says only rc -3, the launcher's own stderr line says CUDA error 700. The same case in the
    run before (tests/fixtures/faults/kernel_illegal_address/h200) said error 717 instead."""
    logs = Path(__file__).parent / "fixtures" / "logs"
    result = to_test_result((logs / "h200_illegal_address_700.txt").read_text(), command="pytest", exit_code=1,
                            log_path="x", gpu=True, junit_xml=(logs / "h200_illegal_address_700.xml").read_text(),
                            test_paths=["tests/ops/test_silu_and_mul.py"])  # fmt: skip
    assert result.panics == [
        'cutile_silu_and_mul: silu_and_mul_kernel failed on the stream: DriverError(700, "an illegal memory '
        'access was encountered")'
    ]
    verdict = classify(result, [], [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "kernel")
    assert verdict.followup.startswith("kernel.rs: illegal memory access in tests/ops/test_silu_and_mul.py::")
    assert "the stream said: " in verdict.followup and "DriverError(700" in verdict.followup
    # a printed line that is not the launcher's own is not taken as its word
    other = to_test_result("tests/x.py::t FAILED\nsomething: else failed on the stream\n", command="pytest",
                           exit_code=1, log_path="x")  # fmt: skip
    assert other.panics == []


def test_skip_markers_with_a_reason_keyword_are_citations(tmp_path):
    """`pytest.param(..., marks=pytest.mark.skip(reason=...))` (test_rope's weird shapes) and
    `skipif(cond, reason=...)` give their reasons like `pytest.skip("...")` does."""
    test_file = tmp_path / "test_y.py"
    test_file.write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('n', [1, pytest.param(3, marks=pytest.mark.skip(reason='only support atol 1e-1'))])\n"
        "@pytest.mark.skipif(False, reason='needs sm_100')\n"
        "def test_op(n):\n"
        "    pytest.skip('random mismatch')\n"
    )
    assert set(testrun.read_test_file(test_file).skips) == {
        "only support atol 1e-1",
        "needs sm_100",
        "random mismatch",
    }
