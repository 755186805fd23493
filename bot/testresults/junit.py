"""Read pytest's JUnit XML (``--junitxml``) into per-case outcomes, counts and skip reasons.

The correctness run writes it beside its log (``correctness_cutile_rs.xml``). Test ids, outcomes,
failure messages and skip reasons come from here rather than from the ``-v`` text; the log
(``log.py``) still says what the XML cannot: that the process died (pytest then writes no
XML), every ``E`` line of a failure, Rust panics in the captured output, pytest's own header, and
an xfail-marked test that passed (the XML records a non-strict XPASS as a plain pass).

The XML comes from a run of PR code, like the log: it is read with the standard library's
parser, which resolves no external entity, after a size check.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from bot.testing.types import TestCase
from bot.testresults.cases import Reading, worse

MAX_BYTES = 32 * 1024 * 1024  # a correctness run's XML is kilobytes; anything this big is not one


@dataclass
class JunitResult(Reading):
    """The cases of the XML in document order; skip groups in the order their reason first came."""

    source: ClassVar[str] = "junit"


def read(text: str, test_paths: Sequence[str] = ()) -> JunitResult | None:
    """The cases of a pytest JUnit XML document; None when ``text`` is not one.

    ``test_paths``: the test files the run was given (relative to the repo), to turn pytest's
    dotted ``classname`` back into the node id the log shows.
    """
    if len(text) > MAX_BYTES:
        return None
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    if root.tag not in ("testsuites", "testsuite"):
        return None
    out = JunitResult()
    reasons: dict[str, int] = {}
    for element in root.iter("testcase"):
        nodeid = nodeid_of(element.get("classname", ""), element.get("name", ""), test_paths)
        outcome, message = _outcome(element)
        out.cases.append(TestCase(nodeid=nodeid, outcome=outcome, message=message))
        if outcome == "skipped" and message:
            reasons[message] = reasons.get(message, 0) + 1
    out.skip_groups = [(n, reason) for reason, n in reasons.items()]
    return out


def nodeid_of(classname: str, name: str, test_paths: Sequence[str] = ()) -> str:
    """pytest writes ``tests/ops/test_x.py::Test_X::test_op[a]`` as classname
    ``tests.ops.test_x.Test_X`` and name ``test_op[a]``; a collection error as an empty
    classname and the dotted module as the name."""
    dotted = classname or name
    for path in test_paths:
        module = path.removesuffix(".py").replace("/", ".")
        if not classname and dotted == module:
            return path
        if dotted == module:
            return f"{path}::{name}"
        if dotted.startswith(module + "."):
            return f"{path}::{dotted[len(module) + 1 :].replace('.', '::')}::{name}"
    # A file the run was not given by name: pytest's classes are `Test*`, its modules lower case.
    parts = dotted.split(".")
    if not classname:
        return "/".join(parts) + ".py"
    if len(parts) > 1 and parts[-1][:1].isupper():
        return f"{'/'.join(parts[:-1])}.py::{parts[-1]}::{name}"
    return f"{'/'.join(parts)}.py::{name}"


def _outcome(element: ET.Element) -> tuple[str, str]:
    outcome, message = "passed", ""
    for child in element:
        if child.tag == "failure":
            found = ("failed", _failure_message(child))
        elif child.tag == "error":
            found = ("error", _failure_message(child))
        elif child.tag == "skipped":
            kind = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
            found = (kind, (child.get("message") or "").strip())
        else:  # system-out, system-err, properties
            continue
        if worse(found[0], outcome):  # several results (a pass, then a teardown error): the worse
            outcome, message = found
    return outcome, message


def _failure_message(element: ET.Element) -> str:
    """The first ``E`` line of pytest's short traceback, as the log's FAILURES section shows it;
    else the first line of the ``message`` attribute."""
    for line in (element.text or "").splitlines():
        if line.startswith("E ") and line[1:].strip():
            return line[1:].strip()
    return next((ln.strip() for ln in (element.get("message") or "").splitlines() if ln.strip()), "")
