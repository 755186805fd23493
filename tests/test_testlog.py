"""bot.testresults.log (and the result combined from it) against logs made by really running pytest on small throwaway test files."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.testresults.cases import case_label, config_label, split_nodeid
from bot.testresults.combine import to_test_result
from bot.testresults.log import has_pytest_header, parse_log

HAS_TIMEOUT_PLUGIN = importlib.util.find_spec("pytest_timeout") is not None


def _no_core() -> None:  # keep os.abort() in a child from writing a core file
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass


def run_pytest(tmp_path: Path, files: dict[str, str], *args: str) -> tuple[str, int]:
    """Run a real pytest in a child process on ``files`` and return (combined output, rc)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name, body in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(COLUMNS="80", PYTHONDONTWRITEBYTECODE="1")
    extra = ["--timeout=60"] if HAS_TIMEOUT_PLUGIN else []
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra, *args],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_no_core if os.name == "posix" else None,
    )
    return proc.stdout + proc.stderr, proc.returncode


MIXED = """
    import pytest

    LONG = "backend x is not supported by this port: known gap x-backend, see analysis.json " * 2

    class Test_X:
        @pytest.mark.parametrize(
            "m, n, dtype, backend",
            [(4, 8, "float16", "cutile_rs"), (4, 8, "bfloat16", "cutile-rs"), (1, 2, "f32", "x")],
        )
        def test_op(self, m, n, dtype, backend):
            if backend == "x":
                pytest.skip(LONG.strip())
            assert m < n

        def test_fail(self):
            got = 1
            assert got == 2, "max diff 0.5 | over tolerance"

        def test_err(self, no_such_fixture):
            pass

        @pytest.mark.xfail(reason="known wrong")
        def test_xf(self):
            assert 0

        @pytest.mark.xfail(reason="known wrong")
        def test_xp(self):
            pass

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture broke")

    def test_uses_broken(broken):
        pass
"""


def test_mixed_outcomes_real_log(tmp_path):
    log, rc = run_pytest(
        tmp_path, {"tests/ops/test_x.py": MIXED}, "tests/ops/test_x.py", "--tb=short", "-v", "-rs"
    )
    assert rc == 1
    p = parse_log(log)
    assert p.header and has_pytest_header(log)
    assert (p.passed, p.failed, p.skipped, p.errors, p.xfailed, p.xpassed) == (2, 1, 1, 2, 1, 1)
    assert p.collected == 8 and p.selected == 8
    assert "in " in p.summary_line and not p.no_tests_ran
    got = {c.nodeid: c for c in p.cases}
    base = "tests/ops/test_x.py::Test_X::"
    assert list(got) == [
        base + "test_op[4-8-float16-cutile_rs]",
        base + "test_op[4-8-bfloat16-cutile-rs]",
        base + "test_op[1-2-f32-x]",
        base + "test_fail",
        base + "test_err",
        base + "test_xf",
        base + "test_xp",
        "tests/ops/test_x.py::test_uses_broken",
    ]
    assert [c.outcome for c in p.cases] == [
        "passed",
        "passed",
        "skipped",
        "failed",
        "error",
        "xfailed",
        "xpassed",
        "error",
    ]
    assert got[base + "test_fail"].message == "AssertionError: max diff 0.5 | over tolerance"
    assert "no_such_fixture" in got[base + "test_err"].message
    assert got["tests/ops/test_x.py::test_uses_broken"].message == "RuntimeError: fixture broke"
    # The verbose line truncates the reason; the -rs line gives it in full.
    skip = got[base + "test_op[1-2-f32-x]"].message
    assert skip.startswith("backend x is not supported") and skip.endswith("see analysis.json")
    assert not skip.endswith("...")
    assert got[base + "test_xf"].message == "known wrong"


def test_stop_after_first_failure_and_deselection(tmp_path):
    log, rc = run_pytest(
        tmp_path,
        {"tests/ops/test_x.py": MIXED},
        "tests/ops/test_x.py",
        "--tb=short",
        "-v",
        "-x",
        "-k",
        "test_op or test_fail or test_xp",
    )
    assert rc == 1
    p = parse_log(log)
    assert p.stopped_early
    assert (p.passed, p.failed, p.skipped, p.deselected) == (2, 1, 1, 3)
    assert p.collected == 8 and p.selected == 5
    assert [c.outcome for c in p.cases] == ["passed", "passed", "skipped", "failed"]
    # Without -rs the summary still has "FAILED nodeid - message"; the E line wins.
    assert p.cases[-1].message == "AssertionError: max diff 0.5 | over tolerance"


def test_everything_deselected(tmp_path):
    log, rc = run_pytest(tmp_path, {"test_a.py": MIXED}, "test_a.py", "-v", "-k", "nothing_matches")
    assert rc == 5
    p = parse_log(log)
    assert p.cases == [] and p.selected == 0 and p.deselected == 8
    assert (p.passed, p.failed, p.skipped, p.errors) == (0, 0, 0, 0)


def test_no_tests_ran(tmp_path):
    log, rc = run_pytest(tmp_path, {"test_empty.py": "x = 1\n"}, "test_empty.py", "-v")
    assert rc == 5
    p = parse_log(log)
    assert p.no_tests_ran and p.summary_line.startswith("no tests ran")
    assert p.collected == 0 and p.cases == []


def test_collection_error(tmp_path):
    log, rc = run_pytest(
        tmp_path, {"test_bad.py": "import not_a_module_here\n"}, "test_bad.py", "-v", "--tb=short"
    )
    assert rc == 2
    p = parse_log(log)
    assert p.interrupted and p.errors == 1 and p.collection_errors == 1
    assert len(p.cases) == 1
    assert p.cases[0].nodeid == "test_bad.py" and p.cases[0].outcome == "error"
    assert "not_a_module_here" in p.cases[0].message


def test_outcome_on_its_own_line_with_capture_off(tmp_path):
    body = """
        import pytest

        @pytest.mark.parametrize("backend", ["cutile-rs"])
        def test_op(backend):
            print("launching kernel")

        def test_other():
            print("more output")
            assert False, "bad value"
    """
    log, rc = run_pytest(tmp_path, {"test_s.py": body}, "test_s.py", "-v", "-s", "--tb=short")
    assert rc == 1
    assert "launching kernel\nPASSED" in log  # the format this test is about
    p = parse_log(log)
    assert [(c.nodeid, c.outcome) for c in p.cases] == [
        ("test_s.py::test_op[cutile-rs]", "passed"),
        ("test_s.py::test_other", "failed"),
    ]
    assert p.cases[1].message == "AssertionError: bad value"


def test_teardown_error_after_pass_counts_as_error(tmp_path):
    body = """
        import pytest

        @pytest.fixture
        def res():
            yield 1
            raise RuntimeError("teardown broke")

        def test_a(res):
            assert res == 1
    """
    log, _ = run_pytest(tmp_path, {"test_t.py": body}, "test_t.py", "-v", "--tb=short")
    p = parse_log(log)
    assert (p.passed, p.errors) == (1, 1)
    assert len(p.cases) == 1 and p.cases[0].outcome == "error"
    assert p.cases[0].message == "RuntimeError: teardown broke"


@pytest.mark.skipif(os.name != "posix", reason="needs SIGABRT")
def test_crash_mid_run_is_an_error_case(tmp_path):
    body = """
        import os

        def test_first():
            pass

        def test_abort():
            os.abort()

        def test_never():
            pass
    """
    log, rc = run_pytest(tmp_path, {"test_c.py": body}, "test_c.py", "-v", "--tb=short")
    assert rc != 0 and rc not in (1, 2, 5)
    p = parse_log(log)
    assert not p.has_summary
    assert p.crashed == "test_c.py::test_abort"
    assert p.crash_message == "Fatal Python error: Aborted"
    assert [(c.nodeid, c.outcome) for c in p.cases] == [
        ("test_c.py::test_first", "passed"),
        ("test_c.py::test_abort", "error"),
    ]
    assert p.cases[1].message == "crashed: Fatal Python error: Aborted"
    assert (p.passed, p.errors) == (1, 1)


def test_no_header_run_has_no_markers(tmp_path):
    log, rc = run_pytest(
        tmp_path, {"test_h.py": "def test_a():\n    pass\n"}, "test_h.py", "-v", "--no-header"
    )
    assert rc == 0
    assert "PASSED" in log and not has_pytest_header(log)
    p = parse_log(log)
    assert not p.header and p.passed == 1


def test_colored_output(tmp_path):
    body = "def test_a():\n    pass\n\ndef test_b():\n    assert 1 == 2\n"
    log, _ = run_pytest(tmp_path, {"test_col.py": body}, "test_col.py", "-v", "--color=yes", "--tb=short")
    assert "\x1b[" in log
    p = parse_log(log)
    assert [(c.nodeid, c.outcome) for c in p.cases] == [
        ("test_col.py::test_a", "passed"),
        ("test_col.py::test_b", "failed"),
    ]
    assert (p.passed, p.failed) == (1, 1) and p.header


def test_hand_made_runner_output_is_not_pytest():
    fake = textwrap.dedent(
        """\
        ============================= test session starts ==============================
        collected 3 items

        tests/ops/test_x.py::test_op[a] PASSED
        tests/ops/test_x.py::test_op[b] FAILED - max_diff=0.3 > 1e-2
        """
    )
    assert not has_pytest_header(fake)
    assert has_pytest_header("x\nrootdir: /repo\n")
    assert has_pytest_header("plugins: timeout-2.4.0\n")
    assert has_pytest_header("platform linux -- Python 3.12.1, pytest-8.3.4, pluggy-1.5.0\n")
    assert not has_pytest_header("  rootdir: /indented\n")


def test_xdist_lines():
    text = textwrap.dedent(
        """\
        platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0
        rootdir: /repo
        plugins: xdist-3.6.1, timeout-2.3.1
        created: 2/2 workers
        2 workers [3 items]

        [gw0] [ 33%] PASSED tests/ops/test_x.py::test_op[a-cutile_rs]
        [gw1] [ 66%] FAILED tests/ops/test_x.py::test_op[b-cutile_rs]
        [gw0] [100%] SKIPPED tests/ops/test_x.py::test_op[c-cutile_rs]

        =================================== FAILURES ===================================
        ___________________________ test_op[b-cutile_rs] ____________________________
        [gw1] linux -- Python 3.12.3 /usr/bin/python
        tests/ops/test_x.py:9: in test_op
            assert False
        E   AssertionError: mismatch
        ========================= 1 failed, 1 passed, 1 skipped in 2.10s =========================
        """
    )
    p = parse_log(text)
    assert [c.outcome for c in p.cases] == ["passed", "failed", "skipped"]
    assert p.cases[1].message == "AssertionError: mismatch"
    assert (p.passed, p.failed, p.skipped) == (1, 1, 1)


def test_summary_with_long_duration_and_warnings():
    text = "==== 3 passed, 2 warnings in 65.21s (0:01:05) ====\n"
    p = parse_log(text)
    assert (p.passed, p.warnings) == (3, 2) and p.has_summary
    assert parse_log("garbage\n\nnothing here").cases == []


def test_labels_from_node_ids():
    nid = "tests/ops/test_matmul.py::Test_Matmul::test_op[64-128-float16-cutile_rs]"
    assert split_nodeid(nid) == (
        "tests/ops/test_matmul.py",
        "Test_Matmul::test_op",
        "64-128-float16-cutile_rs",
    )
    assert case_label(nid) == "Test_Matmul::test_op"
    assert config_label(nid) == "64-128-float16"
    assert config_label(nid, drop_backend=False) == "64-128-float16-cutile_rs"
    assert config_label("t.py::test_op[cutile-rs-2-4]") == "2-4"
    assert config_label("t.py::test_op[2-cutile-rs-4]") == "2-4"
    assert config_label("t.py::test_op[cutile-rs]") == "cutile-rs"
    assert config_label("t.py::test_op[not_cutile_rs_x-1]") == "not_cutile_rs_x-1"
    assert config_label("t.py::test_op[shape[0]-bf16]") == "shape[0]-bf16"
    assert config_label("t.py::test_op") == ""
    assert case_label("t.py") == "t.py"


def test_to_test_result_from_real_log(tmp_path):
    log, rc = run_pytest(tmp_path, {"test_r.py": "def test_a():\n    pass\n"}, "test_r.py", "-v")
    r = to_test_result(log, command="pytest test_r.py -v", exit_code=rc, log_path="/x/log.txt", gpu=True)
    assert r.ran and r.exit_code == 0 and r.passed == 1 and r.gpu
    assert r.cases[0].nodeid == "test_r.py::test_a"
    assert r.command == "pytest test_r.py -v" and r.log_path == "/x/log.txt"
    empty = to_test_result("", command="c", exit_code=None, log_path="")
    assert not empty.ran and empty.cases == []


def test_rs_skip_groups_carry_counts_and_reasons_without_the_skipped_prefix():
    text = textwrap.dedent(
        """\
        tests/ops/test_x.py::test_op[a-cutile_rs] PASSED [ 20%]
        tests/ops/test_x.py::test_op[b-cutile_rs] SKIPPED (Skip matmul due to result mis...) [ 40%]
        tests/ops/test_x.py::test_op[c-cutile_rs] SKIPPED [ 60%]
        tests/ops/test_x.py::test_op[d-cutile_rs] SKIPPED [ 80%]
        tests/ops/test_x.py::test_op[e-cutile_rs] SKIPPED [100%]
        =========================== short test summary info ============================
        SKIPPED [3] tests/ops/test_x.py:12: Skipped: Skip matmul due to result mismatch when cannot divide BLOCK
        SKIPPED [1] tests/ops/test_x.py: backward is not ported
        ========================= 1 passed, 4 skipped in 0.50s =========================
        """
    )
    p = parse_log(text)
    assert p.skip_groups == [
        (3, "Skip matmul due to result mismatch when cannot divide BLOCK"),
        (1, "backward is not ported"),
    ]
    # the truncated verbose reason is expanded from the group, without the prefix
    assert p.cases[1].message == "Skip matmul due to result mismatch when cannot divide BLOCK"
    assert [c.message for c in p.cases[2:]] == ["", "", ""]
    r = to_test_result(text, command="c", exit_code=0, log_path="")
    assert r.skip_groups == p.skip_groups


def test_a_failed_case_s_autotune_sweep_is_detail_never_its_message():
    """The captured log's ``[op] config k/N`` lines say how far the sweep got (the classifier reads
    it for a timeout); the message stays pytest's own."""
    log = (
        "platform linux -- Python 3.12\nrootdir: /r\n"
        "tests/ops/test_bmm.py::T::test_op[cutile_rs-1] FAILED [ 50%]\n\n"
        "=================================== FAILURES ===================================\n"
        "_ T.test_op[cutile_rs-1] _\n"
        "----------------------------- Captured stderr call -----------------------------\n"
        "[12:00:01] [autotuner] [INFO]   [bmm] config 2/18: namespace(BM=64) -> 0.1 ms\n"
        "[12:00:05] [autotuner] [INFO]   [bmm] config 3/18: namespace(BM=128) -> 0.1 ms\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/ops/test_bmm.py::T::test_op[cutile_rs-1] - RuntimeError: boom\n"
        "========================= 1 failed in 1.00s =========================\n"
    )
    (case,) = parse_log(log).cases
    assert (case.message, case.detail) == ("RuntimeError: boom", "autotune sweep: config 3 of 18 reached")
