"""One pass over the lines of a pytest ``-v`` log, each line read for what it says.

The log is the raw output of the correctness run (``--tb=short -v``, with or without ``-rs``,
``-s`` or ``-x``), as tee'd to ``correctness_cutile_rs.txt``. What is read, in the order pytest
prints it:

- the ``collected N items / M deselected / K selected`` line;
- per-case lines of verbose mode, ``<file>.py::<name>[<params>] PASSED  [ 10%]``; with ``-s``
  the outcome word can come on a later line after the test's own output, and with xdist the
  line is ``[gw0] [ 10%] PASSED <nodeid>``; a case whose line started and never got its word is
  left ``pending`` (the process may have died in it: ``log.py`` decides);
- the ``E   ...`` lines of each ``--tb=short`` section of the FAILURES and ERRORS blocks;
- the short summary: ``FAILED <nodeid> - <message>`` lines, and the skip groups of ``-rs``,
  ``SKIPPED [n] <file>[:<line>]: <reason>`` (pytest folds identical skips into one line with their
  count ``n``; the ``Skipped: `` prefix some pytest versions put before an imperative
  ``pytest.skip()`` reason is dropped);
- the final summary line (``=== 3 passed, 1 failed in 1.2s ===``, ``no tests ran``, ...), and
  pytest's ``Interrupted:`` and ``stopping after N failures`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.testresults.cases import worse

OUTCOME_WORDS = {
    "PASSED": "passed",
    "FAILED": "failed",
    "SKIPPED": "skipped",
    "ERROR": "error",
    "XFAIL": "xfailed",
    "XPASS": "xpassed",
}
_WORDS = "|".join(OUTCOME_WORDS)
# Verbose line: node id first, then the outcome word, an optional "(reason)" and "[ nn%]".
_VERBOSE = re.compile(
    rf"^(?P<nid>\S+?\.py::\S.*?)\s+(?P<word>{_WORDS})(?:\s+\((?P<reason>.*)\))?(?:\s+\[\s*\d+%\])?\s*$"
)
# xdist: "[gw3] [ 12%] PASSED tests/x.py::test_a[1]"
_XDIST = re.compile(rf"^\[gw\d+\]\s+(?:\[\s*\d+%\]\s+)?(?P<word>{_WORDS})\s+(?P<nid>\S+?\.py::.+?)\s*$")
# A node id that starts a line but whose outcome has not come yet (-s output, crash).
_STARTED = re.compile(r"^(?P<nid>\S+?\.py::\S+)(?:\s|$)")
# The outcome on a line of its own, after the test printed something (-s).
_LONE_WORD = re.compile(rf"^(?P<word>{_WORDS})(?:\s+\((?P<reason>.*)\))?(?:\s+\[\s*\d+%\])?\s*$")
# "E   AssertionError: ..." in a --tb=short section.
_E_LINE = re.compile(r"^E\s{1,}(?P<text>\S.*)$")
# Section titles inside FAILURES / ERRORS: "____ Test_X.test_op[a-b] ____", "____ ERROR at setup of t ____".
# a failure's title line: pytest pads it with "_" to the terminal's width, down to one of each side
# for a long test id (``_ Test_BMM_FWD.test_op[cutile_rs-...-torch.float16] _``)
_SECTION = re.compile(r"^_+ (?P<title>\S.*?) _+$")
# TileGym's autotuner logs each config it compiled and timed (``[bmm] config 15/18: namespace(...)``)
_SWEEP = re.compile(r"\]\s+\[(?P<op>[\w.]+)\] config (?P<k>\d+)/(?P<n>\d+): ")
SWEEP_PREFIX = "autotune sweep: "
SWEEP_LINE = SWEEP_PREFIX + "config {k} of {n} reached"
SWEEP_READ = re.compile(
    re.escape(SWEEP_PREFIX) + r"config (?P<k>\d+) of (?P<n>\d+) reached"
)  # SWEEP_LINE, read back
_BLOCK = re.compile(
    r"^={3,} (?P<name>FAILURES|ERRORS|short test summary info|warnings summary|PASSES)\b.*={3,}$"
)
# Short summary: "FAILED nodeid - message", "ERROR nodeid", "SKIPPED [1] file.py:8: reason".
_SHORT = re.compile(rf"^(?P<word>{_WORDS})\s+(?P<nid>\S+?\.py::\S.*?)(?:\s+-\s+(?P<msg>.*))?\s*$")
_SHORT_SKIP = re.compile(r"^SKIPPED \[(?P<n>\d+)\] (?P<loc>\S+?):(?:\d+:)?\s*(?P<reason>.*)$")
_COLLECTED = re.compile(
    r"collected (?P<n>\d+) items?(?: / (?P<err>\d+) errors?)?(?: / (?P<desel>\d+) deselected)?"
    r"(?: / (?P<sel>\d+) selected)?"
)
_COUNT = re.compile(
    r"^(?P<n>\d+) (?P<what>passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?|rerun|"
    r"subtests? passed|subtests? failed|subtests? skipped)$"
)
_SUMMARY = re.compile(r"^(?:=+ )?(?P<body>.+?) in (?P<secs>\d+(?:\.\d+)?)s(?: \([^)]*\))?(?: =+)?$")
_STOPPING = re.compile(r"^!+ stopping after \d+ failures? !+$")
SUMMARY_COUNTS = ("passed", "failed", "skipped", "errors", "xfailed", "xpassed", "deselected", "warnings")


@dataclass
class LogSummary:
    """What pytest's own lines say of the whole run. The counts are the summary line's."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    xfailed: int = 0
    xpassed: int = 0
    deselected: int = 0
    warnings: int = 0
    collected: int | None = None  # from "collected N items"
    selected: int | None = None  # "/ K selected", or collected minus deselected
    collection_errors: int = 0
    summary_line: str = ""  # the final "=== ... in 1.2s ===" line, stripped of "=" padding
    no_tests_ran: bool = False
    interrupted: bool = False  # "Interrupted: ..." (collection error, Ctrl-C)
    stopped_early: bool = False  # "stopping after N failures" (-x)

    @property
    def has_summary(self) -> bool:
        return bool(self.summary_line)


@dataclass
class Scan:
    """Everything one pass read, line by line; the cases are put together by ``log.py``."""

    summary: LogSummary = field(default_factory=LogSummary)
    order: list[str] = field(default_factory=list)  # node ids, in the order their first outcome came
    outcome: dict[str, str] = field(default_factory=dict)
    reason: dict[str, str] = field(default_factory=dict)  # the "(reason)" of a verbose line
    pending: str = ""  # node id whose outcome word has not arrived yet
    pending_line: int = -1  # the index of the line that started it
    block: str = ""  # current "=== NAME ===" block
    section: str = ""  # current "___ title ___" inside FAILURES/ERRORS
    e_lines: dict[str, list[str]] = field(default_factory=dict)  # section title -> its E lines
    short_msg: dict[str, str] = field(default_factory=dict)  # short summary: node id -> message
    skip_groups: list[tuple[int, str]] = field(default_factory=list)  # -rs lines: (count, full reason)

    def record(self, nid: str, word: str, why: str | None) -> None:
        """A case's outcome word; a node reported twice keeps the worse (a teardown error after a
        pass), and the reason that came with the outcome it keeps."""
        new = OUTCOME_WORDS[word]
        if nid not in self.outcome:
            self.order.append(nid)
            self.outcome[nid] = new
        elif worse(new, self.outcome[nid]):
            self.outcome[nid] = new
        if why and (nid not in self.reason or new == self.outcome[nid]):
            self.reason[nid] = why.strip()


def scan(lines: list[str]) -> Scan:
    """Read ``lines`` (ANSI colours already stripped) in one pass; never raises."""
    found = Scan()
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        any(read(found, i, line) for read in _READERS)  # the first reader that knows the line takes it
    return found


def _block_title(found: Scan, _i: int, line: str) -> bool:
    m = _BLOCK.match(line)
    if m:
        found.block, found.section, found.pending = m.group("name"), "", ""
    return bool(m)


def _summary_line(found: Scan, _i: int, line: str) -> bool:
    m = _SUMMARY.match(line)
    counts = _parse_counts(m.group("body")) if m else None
    if m is None or counts is None:
        return False
    summary = found.summary
    summary.summary_line = line.strip("= ").strip()
    summary.no_tests_ran = m.group("body").strip() == "no tests ran"
    for key in SUMMARY_COUNTS:
        setattr(summary, key, counts.get(key, 0))
    found.pending = ""
    return True


def _parse_counts(body: str) -> dict[str, int] | None:
    """``"1 failed, 2 passed, 1 skipped"`` -> counts; None when the text is not a summary."""
    if body.strip() == "no tests ran":
        return {}
    counts: dict[str, int] = {}
    for part in body.split(", "):
        m = _COUNT.match(part.strip())
        if not m:
            return None
        what = m.group("what")
        key = {"error": "errors", "warning": "warnings"}.get(what, what)
        counts[key] = counts.get(key, 0) + int(m.group("n"))
    return counts


def _stop_line(found: Scan, _i: int, line: str) -> bool:
    """pytest's own word that the run ended before its end: interrupted, or ``-x`` stopping it."""
    if "Interrupted:" in line and line.startswith("!"):
        found.summary.interrupted = True
        return True
    if _STOPPING.match(line):
        found.summary.stopped_early = True
        return True
    return False


def _collected(found: Scan, _i: int, line: str) -> bool:
    m = _COLLECTED.search(line) if line.startswith(("collect", "collected")) else None
    if m:
        summary = found.summary
        summary.collected = int(m.group("n"))
        summary.collection_errors = int(m.group("err") or 0)
        deselected = int(m.group("desel") or 0)
        summary.selected = int(m.group("sel")) if m.group("sel") else summary.collected - deselected
    return bool(m)


def _inside_block(found: Scan, _i: int, line: str) -> bool:
    """A line of a named block: its failures' E lines, the short summary; the rest is skipped."""
    if found.block in ("FAILURES", "ERRORS"):
        _failure_line(found, line)
    elif found.block == "short test summary info":
        _short_summary_line(found, line)
    return bool(found.block)


def _failure_line(found: Scan, line: str) -> None:
    title = _SECTION.match(line)
    if title:
        found.section = title.group("title")
        found.e_lines.setdefault(found.section, [])
        return
    e_line = _E_LINE.match(line)
    if e_line and found.section:
        found.e_lines[found.section].append(e_line.group("text").strip())
        return
    sweep = _SWEEP.search(line) if found.section else None
    if sweep:  # the failed case's captured log: how far its autotune sweep got (the last line counts)
        lines = [t for t in found.e_lines[found.section] if not t.startswith(SWEEP_PREFIX)]
        found.e_lines[found.section] = lines + [SWEEP_LINE.format(k=sweep.group("k"), n=sweep.group("n"))]


def _short_summary_line(found: Scan, line: str) -> None:
    skip = _SHORT_SKIP.match(line)
    if skip:
        why = skip.group("reason").strip().removeprefix("Skipped: ")
        found.skip_groups.append((int(skip.group("n")), why))
        return
    short = _SHORT.match(line)
    if short and short.group("msg"):
        found.short_msg.setdefault(short.group("nid"), short.group("msg").strip())


def _case_line(found: Scan, i: int, line: str) -> bool:
    """A case's verbose line; its outcome word alone after its output (-s); or its start."""
    verbose = _VERBOSE.match(line) or _XDIST.match(line)
    if verbose:
        found.record(verbose.group("nid"), verbose.group("word"), verbose.groupdict().get("reason"))
        found.pending = ""
        return True
    lone = _LONE_WORD.match(line) if found.pending else None
    if lone:
        found.record(found.pending, lone.group("word"), lone.group("reason"))
        found.pending = ""
        return True
    started = _STARTED.match(line)
    if started:
        found.pending, found.pending_line = started.group("nid"), i
    return bool(started)


_READERS: tuple[Callable[[Scan, int, str], bool], ...] = (
    _block_title,
    _summary_line,
    _stop_line,
    _collected,
    _inside_block,
    _case_line,
)
