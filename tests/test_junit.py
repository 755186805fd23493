"""The correctness run's results come from pytest's JUnit XML (bot/testresults/junit.py), checked against XML
written by really running pytest; the -v log only fills in what the XML cannot say."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from test_testlog import MIXED, run_pytest

from bot.classify.classify import classify
from bot.targets.types import Target
from bot.testing import testrun
from bot.testresults import junit
from bot.testresults.combine import to_test_result
from bot.testresults.log import NO_CRASH_LINE, parse_log

FILE = "tests/ops/test_x.py"
BASE = f"{FILE}::Test_X::"


def _run(tmp_path: Path, files: dict[str, str], *args: str) -> tuple[str, str | None, int]:
    """(log, XML or None when pytest wrote none, rc) of a real run with --junitxml."""
    xml = tmp_path / "results.xml"
    log, rc = run_pytest(tmp_path, files, *args, f"--junitxml={xml}")
    return log, (xml.read_text() if xml.is_file() else None), rc


def _result(log: str, xml: str | None, rc: int = 1, paths=(FILE,)):
    return to_test_result(
        log, command="pytest", exit_code=rc, log_path="log", junit_xml=xml, test_paths=paths
    )


def test_the_xml_gives_what_the_verbose_log_gives_for_every_outcome(tmp_path):
    log, xml, rc = _run(tmp_path, {FILE: MIXED}, FILE, "--tb=short", "-v", "-rs")
    assert rc == 1 and xml is not None
    from_xml, from_log = _result(log, xml), _result(log, None)
    assert (from_xml.source, from_log.source) == ("junit", "log")
    assert [(c.nodeid, c.outcome, c.message) for c in from_xml.cases] == [
        (c.nodeid, c.outcome, c.message) for c in from_log.cases
    ]
    counts = (from_xml.passed, from_xml.failed, from_xml.skipped, from_xml.errors)
    assert counts == (from_log.passed, from_log.failed, from_log.skipped, from_log.errors) == (2, 1, 1, 2)
    got = {c.nodeid: c for c in from_xml.cases}
    assert got[BASE + "test_fail"].message == "AssertionError: max diff 0.5 | over tolerance"
    assert got[BASE + "test_err"].message == "fixture 'no_such_fixture' not found"
    assert got[f"{FILE}::test_uses_broken"].message == "RuntimeError: fixture broke"
    assert (got[BASE + "test_xf"].outcome, got[BASE + "test_xf"].message) == ("xfailed", "known wrong")


def test_cases_and_skip_reasons_come_from_the_xml_not_the_text(tmp_path):
    # -q: no per-case lines and no -rs groups in the log, yet every case and full reason is known
    log, xml, _ = _run(tmp_path, {FILE: MIXED}, FILE, "-q")
    assert parse_log(log).cases == []
    result = _result(log, xml)
    assert result.ran and len(result.cases) == 8
    skip = next(c for c in result.cases if c.outcome == "skipped")
    assert skip.nodeid == BASE + "test_op[1-2-f32-x]"
    assert skip.message.startswith("backend x is not supported") and skip.message.endswith(
        "see analysis.json"
    )
    assert result.skip_groups == [(1, skip.message)]


def test_identical_skips_are_one_group_with_their_count(tmp_path):
    body = """
        import pytest

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_op(n):
            if n > 1:
                pytest.skip("needs sm_100: known gap tma")
    """
    log, xml, rc = _run(tmp_path, {FILE: body}, FILE, "-v")
    result = _result(log, xml, rc)
    assert (result.passed, result.skipped) == (1, 2)
    assert result.skip_groups == [(2, "needs sm_100: known gap tma")]
    assert classify(result, ["known gap tma"], []).kind.value == "ALL_PASS"


def test_a_collection_error_is_the_file_in_error(tmp_path):
    log, xml, rc = _run(tmp_path, {FILE: "import not_a_module_here\n"}, FILE, "-v", "--tb=short")
    assert rc == 2
    [case] = _result(log, xml, rc).cases
    assert (case.nodeid, case.outcome) == (FILE, "error")
    assert "not_a_module_here" in case.message


def test_an_xpass_the_xml_calls_a_pass_is_still_an_xfail_marker(tmp_path):
    body = """
        import pytest

        @pytest.mark.xfail(reason="known wrong")
        def test_op():
            pass
    """
    log, xml, rc = _run(tmp_path, {FILE: body}, FILE, "-v")
    assert rc == 0 and [c.outcome for c in junit.read(xml, (FILE,)).cases] == ["passed"]
    result = _result(log, xml, rc)
    assert [c.outcome for c in result.cases] == ["xpassed"] and result.passed == 0
    verdict = classify(result, [], [])
    assert verdict.kind.value == "FAIL" and "xfail marker" in verdict.reason


def test_a_process_that_died_leaves_no_xml_and_the_log_says_which_case(tmp_path):
    body = """
        import os

        def test_ok():
            pass

        def test_abort():
            os.abort()
    """
    log, xml, rc = _run(tmp_path, {FILE: body}, FILE, "-v")
    assert xml is None and rc != 0
    result = _result(log, xml, rc)
    assert result.source == "log"
    assert [(c.nodeid, c.outcome) for c in result.cases] == [(f"{FILE}::test_ok", "passed"), (f"{FILE}::test_abort", "error")]  # fmt: skip


def test_a_failure_keeps_the_xml_message_and_every_e_line_of_the_log(tmp_path):
    body = """
        def test_op():
            raise AssertionError(
                "Tensor-likes are not close!\\n\\nMismatched elements: 4 / 4\\nGreatest absolute difference: nan"
            )
    """
    log, xml, rc = _run(tmp_path, {FILE: body}, FILE, "-v", "--tb=short")
    assert rc == 1 and xml is not None
    [from_xml] = junit.read(xml, (FILE,)).cases
    assert (from_xml.message, from_xml.detail) == ("AssertionError: Tensor-likes are not close!", "")
    [case] = _result(log, xml).cases
    assert case.message == from_xml.message
    assert "Mismatched elements: 4 / 4 | Greatest absolute difference: nan" in case.detail  # the log's
    # the classifier reads the NaN from the log's E lines, which the XML's message does not carry
    assert "NaN outputs" in classify(_result(log, xml), [], []).reason


def test_a_run_stopped_at_its_deadline_leaves_no_xml_and_the_log_names_the_case(tmp_path):
    body = """
        import time

        def test_ok():
            pass

        def test_hangs():
            time.sleep(120)
    """
    (tmp_path / FILE).parent.mkdir(parents=True)
    (tmp_path / FILE).write_text(textwrap.dedent(body))
    xml_path = tmp_path / "results.xml"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", FILE, "-v", f"--junitxml={xml_path}"]
    outcome = testrun.run(Target(tmp_path, "x"), argv, tmp_path / "log.txt", {}, 15.0)
    assert outcome.stopped and not xml_path.exists()
    result = _result((tmp_path / "log.txt").read_text(), None, outcome.code)
    assert result.source == "log" and (result.passed, result.errors) == (1, 1)
    ok, hung = result.cases
    assert (ok.nodeid, ok.outcome) == (f"{FILE}::test_ok", "passed")
    assert (hung.nodeid, hung.outcome, hung.message) == (
        f"{FILE}::test_hangs",
        "error",
        "crashed: " + NO_CRASH_LINE,
    )
    assert testrun.STOPPED in hung.detail  # what the log said after the case started


def test_text_that_is_not_a_junit_document_is_ignored():
    assert junit.read("not xml at all") is None
    assert junit.read("<html><testcase name='t'/></html>") is None
    assert junit.read("<testsuites/>" + " " * junit.MAX_BYTES) is None
    assert _result("", "<broken", 0).source == "log"


def test_node_ids_from_classname_and_name():
    paths = ("tests/ops/test_x.py", "tests/test_y.py")
    assert junit.nodeid_of("tests.ops.test_x.Test_X", "test_op[a.b-1]", paths) == BASE + "test_op[a.b-1]"
    assert junit.nodeid_of("tests.ops.test_x", "test_f", paths) == f"{FILE}::test_f"
    assert junit.nodeid_of("tests.test_y.TestA.TestB", "t", paths) == "tests/test_y.py::TestA::TestB::t"
    assert junit.nodeid_of("", "tests.ops.test_x", paths) == FILE  # a collection error
    # a file the command did not name: pytest's `Test*` class convention decides
    assert junit.nodeid_of("ops.test_z.Test_Z", "t", paths) == "ops/test_z.py::Test_Z::t"
    assert junit.nodeid_of("ops.test_z", "t", paths) == "ops/test_z.py::t"


def test_the_command_writes_the_xml_where_the_reports_are(tmp_path):
    files = testrun.TestFile(functional=("test_op",), paths=(FILE,), all_tests=("test_op",))
    repo = tmp_path / "repo"
    out = repo / "cutile_kernel_out" / "x" / testrun.JUNIT_NAME
    argv, _ = testrun.command("python3", files, junit_xml=testrun.junit_arg(out, repo))
    assert argv[-1] == "--junitxml=cutile_kernel_out/x/correctness_cutile_rs.xml"
    assert {"-x", "--timeout=60", "--tb=short", "-v", "-rs"} <= set(argv)  # the run of docs/specification.md
    elsewhere = tmp_path / "out" / testrun.JUNIT_NAME
    assert testrun.junit_arg(elsewhere, repo) == str(elsewhere)
