"""The one :class:`TestResult` the classifier reads, from the run's JUnit XML and its log.

The XML (``junit.py``) gives the cases, counts and skip reasons. The log (``log.py``) gives what the
XML cannot say: that pytest started (its header, or any case line), the Rust panics it printed
and the kernel lines the JIT named, every ``E`` line of a failure, and which case was an XPASS. Without an XML (the process died, an
old run) everything comes from the log, and ``source`` says so. ``env_problem`` is left empty:
deciding that the environment is at fault is the classifier's job, not the parsers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.testing.types import TestCase, TestResult
from bot.testresults import junit
from bot.testresults.cases import tally
from bot.testresults.junit import JunitResult
from bot.testresults.log import ParsedLog, parse_log


def to_test_result(
    text: str,
    *,
    command: str,
    exit_code: int | None,
    log_path: str,
    gpu: bool = False,
    junit_xml: str | None = None,
    test_paths: Sequence[str] = (),
) -> TestResult:
    """The result of one pytest run: ``text`` its log, ``junit_xml`` its XML's text (None when
    pytest wrote none), ``test_paths`` the test files the command named (to rebuild node ids)."""
    log = parse_log(text)
    xml = junit.read(junit_xml, test_paths) if junit_xml else None
    result = TestResult(
        ran=log.header or bool(log.cases) or log.has_summary or xml is not None,
        command=command,
        exit_code=exit_code,
        log_path=log_path,
        gpu=gpu,
        panics=list(log.panics),
        located=list(log.located),
    )
    if xml is None:  # the log's own counts: its summary line, else its per-case lines
        result.cases, result.skip_groups, result.source = list(log.cases), list(log.skip_groups), log.source
        counts = {"passed": log.passed, "failed": log.failed, "skipped": log.skipped, "error": log.errors}
    else:
        result.cases, result.skip_groups = _with_log_facts(xml, log), list(xml.skip_groups)
        result.source, counts = xml.source, tally(result.cases)
    result.passed, result.failed = counts["passed"], counts["failed"]
    result.skipped, result.errors = counts["skipped"], counts["error"]
    return result


def _with_log_facts(xml: JunitResult, log: ParsedLog) -> list[TestCase]:
    """The XML's cases with what only the log says: a non-strict XPASS is a pass in the XML (the
    log still says XPASS, and xfail markers are banned), and a failure's detail is every E line."""
    xpassed, details = log.xpass_cases(), log.failure_details()
    return [
        replace(case, outcome="xpassed", message=xpassed[case.nodeid].message)
        if case.outcome == "passed" and case.nodeid in xpassed
        else replace(case, detail=case.detail or details.get(case.nodeid, ""))
        for case in xml.cases
    ]
