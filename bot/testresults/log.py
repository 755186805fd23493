"""Read a pytest ``-v`` log (as text) for what the JUnit XML cannot say, and for every result it
can when there is no XML.

The correctness run's cases come from its JUnit XML (``junit.py``) when pytest wrote one. Only the
log says:

- that pytest itself ran: its header markers (``platform <os> -- Python``, ``rootdir:``,
  ``plugins:``);
- which case a dead process was running: its line started and never got an outcome (a
  segfault, ``Fatal Python error: Aborted``, pytest-timeout's ``+++ Timeout +++``, agent-d stopping
  the run at ``--test-timeout``; pytest then writes no XML). It becomes an ``error`` case whose
  message names the crash line and whose detail keeps what the process printed after it started;
- every ``E`` line of a failure's ``--tb=short`` section (the XML keeps its first);
- why a launch failed: Rust panics (the JIT's words) and the launcher's stream errors;
- where the JIT said the kernel is wrong: the ``  --> file:line:col`` it prints under its error;
- that an xfail-marked test passed (XPASS; the XML records a non-strict one as a pass).

Without an XML (the process died, an old run) every case, count and ``-rs`` skip group comes from
the log too (``log_scan.py`` reads the lines), and the reading says so: its ``source`` is
``"log"``, and with no summary line the counts are those of the per-case lines seen. Everything
here is a pure function of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from bot.build import compiler_output
from bot.testing.types import Located, TestCase
from bot.testresults import log_scan
from bot.testresults.cases import Reading, head_line, tally
from bot.testresults.log_scan import SWEEP_PREFIX, LogSummary, Scan

_HEADER = re.compile(r"^(?:platform [a-z0-9]+ -- Python|rootdir:|plugins:)", re.MULTILINE)
_CRASH = re.compile(
    r"^(?:Fatal Python error: .+|Segmentation fault.*|Aborted.*|Killed.*|\+{3,} Timeout \+{3,}|"
    r"thread '.*' panicked at .*|fatal runtime error: .+)$"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PANICKED = re.compile(r"^thread '.*' .*panicked at \S+:$")
# what agent-d's launcher prints when the stream reports the kernel's error (bot/emit/ffi_rs.py)
_STREAM_ERROR = re.compile(r"^\w+: \w+ failed on the stream: .+$")
_SECTION_PREFIXES = ("ERROR at setup of ", "ERROR at teardown of ", "ERROR at call of ")
_COLLECTING = "ERROR collecting "
NO_CRASH_LINE = "the test process ended before this test reported an outcome"
DETAIL_LIMIT = 2000  # characters of a failure's E lines kept for the classifier


@dataclass
class ParsedLog(LogSummary, Reading):
    """Everything read from one log. The counts come from the summary line when it exists, else
    they are the per-case lines'."""

    source: ClassVar[str] = "log"
    crashed: str = ""  # node id of a case that never got an outcome
    crash_message: str = ""
    header: bool = False  # real pytest header markers present
    panics: list[str] = field(default_factory=list)  # why a launch failed: Rust panics, stream errors
    located: list[Located] = field(default_factory=list)  # the places the JIT named under its errors

    def failure_details(self) -> dict[str, str]:
        """Every ``E`` line of each failed case, joined, by node id (the XML keeps only the first:
        torch's "Greatest absolute difference: nan" comes after "not close")."""
        return {c.nodeid: c.detail for c in self.cases if c.detail}

    def xpass_cases(self) -> dict[str, TestCase]:
        """The xfail-marked cases that passed, by node id."""
        return {c.nodeid: c for c in self.cases if c.outcome == "xpassed"}


@dataclass(frozen=True)
class _Crash:
    """The case a dead process was running, the crash line it left, and all it printed after."""

    nodeid: str
    message: str
    detail: str


def has_pytest_header(text: str) -> bool:
    """True when the text carries lines only the pytest framework prints.

    Any of ``platform <os> -- Python``, ``rootdir:`` or ``plugins:`` at the start of a line
    (the same markers TileGym's validator accepts; ``collected N items`` and ``test session
    starts`` are not accepted because hand-made runners imitate them).
    """
    return bool(_HEADER.search(_strip_ansi(text)))


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _panics(lines: list[str]) -> list[str]:
    """Why a launch returned rc -3, as the captured output says: a Rust panic's message (the line
    after ``thread '..' panicked at <file>:<line>:<col>:``, the JIT's words), or the launcher's own
    line for an error the stream reported (``DriverError(700, "an illegal memory access ...")``)."""
    found = [
        lines[i + 1].strip()
        for i, line in enumerate(lines[:-1])
        if _PANICKED.match(line.strip()) and lines[i + 1].strip()
    ]
    found += [line.strip() for line in lines if _STREAM_ERROR.match(line.strip())]
    return list(dict.fromkeys(found))


def _located(lines: list[str]) -> list[Located]:
    """The places the JIT named under its errors: each ``  --> file:line:col`` pointer (rustc's rule,
    ``compiler_output.location``) with the message on the line above it (a panic's, or the
    launcher's ``<symbol>: <kernel> launch failed: error: ...``, taken after its prefix)."""
    found = []
    for i, line in enumerate(lines[1:], start=1):
        at = compiler_output.location(line)
        said = lines[i - 1].strip()
        if at is None or not said:
            continue
        message = said.partition(" launch failed: ")[2] or said
        found.append(Located(at[0], at[1], at[2], message.removeprefix("error: ")))
    return list(dict.fromkeys(found))


def parse_log(text: str) -> ParsedLog:
    """Parse a pytest ``-v`` log. Never raises; an unrecognised text gives an empty result."""
    text = _strip_ansi(text.replace("\r\n", "\n").replace("\r", "\n"))
    lines = text.split("\n")
    found = log_scan.scan(lines)
    out = ParsedLog(
        **vars(found.summary),
        skip_groups=found.skip_groups,
        header=has_pytest_header(text),
        panics=_panics(lines),
        located=_located(lines),
    )
    crash = _crash(found, lines)
    if crash is not None:
        out.crashed, out.crash_message = crash.nodeid, crash.message
    out.cases = _cases(found, crash)
    if not out.has_summary:  # no summary line (crash, kill): count what the per-case lines say
        counts = tally(out.cases)
        out.passed, out.failed, out.skipped = counts["passed"], counts["failed"], counts["skipped"]
        out.errors, out.xfailed, out.xpassed = counts["error"], counts["xfailed"], counts["xpassed"]
    return out


def _crash(found: Scan, lines: list[str]) -> _Crash | None:
    """The case whose line started and never got an outcome, with no summary after it: the process
    died inside it. Its crash line is the first one that names a crash, on the start line (``t.py::t
    Fatal Python error: Aborted``) or after it."""
    nodeid = found.pending
    if not nodeid or nodeid in found.outcome:
        return None
    rest = lines[found.pending_line][len(nodeid) :].strip()
    printed = [rest, *(line.strip() for line in lines[found.pending_line + 1 :])]
    crash_lines = [text for text in printed if _CRASH.match(text)]
    detail = " | ".join(text for text in printed if text)[:DETAIL_LIMIT]
    return _Crash(nodeid, crash_lines[0] if crash_lines else NO_CRASH_LINE, detail)


def _cases(found: Scan, crash: _Crash | None) -> list[TestCase]:
    """The cases in the order they reported; a crashed case and each file that failed to collect
    come last, as errors."""
    outcome, reason = dict(found.outcome), dict(found.reason)
    order = list(found.order)
    if crash is not None:
        order.append(crash.nodeid)
        outcome[crash.nodeid], reason[crash.nodeid] = "error", "crashed: " + crash.message
    texts = _e_lines_by_title(found.e_lines)
    for path, e_lines in _collection_errors(found.e_lines):
        if path not in outcome:
            order.append(path)
            outcome[path] = "error"
            texts.setdefault(path, []).extend(e_lines)
    crash_detail = {crash.nodeid: crash.detail} if crash is not None else {}
    full_reasons = [why for _, why in found.skip_groups]
    cases = []
    for nodeid in order:
        case = TestCase(nodeid=nodeid, outcome=outcome[nodeid])
        if case.outcome in ("failed", "error"):
            e_lines = texts.get(head_line(nodeid), [])
            said = [t for t in e_lines if not t.startswith(SWEEP_PREFIX)]  # the sweep line is detail only
            message = said[0] if said else found.short_msg.get(nodeid, "")
            case.message = message or reason.get(nodeid, "")
            case.detail = " | ".join(e_lines)[:DETAIL_LIMIT] or crash_detail.get(nodeid, "")
        elif case.outcome in ("skipped", "xfailed", "xpassed"):
            case.message = _full_reason(reason.get(nodeid, ""), full_reasons)
        cases.append(case)
    return cases


def _e_lines_by_title(e_lines: dict[str, list[str]]) -> dict[str, list[str]]:
    """The E lines of every section under the node title it names (setup, call and teardown
    sections of one node together)."""
    by_title: dict[str, list[str]] = {}
    for title, texts in e_lines.items():
        key = title
        for prefix in _SECTION_PREFIXES:
            key = key.removeprefix(prefix)
        by_title.setdefault(key, []).extend(texts)
    return by_title


def _collection_errors(e_lines: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """``ERROR collecting <path>`` sections: each file pytest could not collect, with its E lines."""
    return [
        (title.removeprefix(_COLLECTING).strip(), texts)
        for title, texts in e_lines.items()
        if title.startswith(_COLLECTING)
    ]


def _full_reason(short: str, full_reasons: list[str]) -> str:
    """Expand a verbose-line reason truncated with ``...`` using the ``-rs`` reasons."""
    if short.endswith("..."):
        stem = short[:-3]
        return next((r for r in full_reasons if r.startswith(stem)), short)
    return short
