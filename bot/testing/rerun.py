"""After a crash: hear what the dying test said, then run what remains.

Under pytest's output capture, whatever the process writes to its own stderr just before it
dies (a Rust runtime's "has overflowed its stack", glibc's "free(): invalid pointer") is lost
with it. So the test that crashed runs once more alone with capture off (``-s``), its output in
``correctness_cutile_rs.crash.txt``, and that output joins the crashed case's detail: it is the
classifier's evidence of whose fault the crash is (docs/classification.md).

A dead test process must also not cost the other tests their results.

A test that aborts or segfaults takes pytest down with it, so the tests after it never run. The
log keeps every result up to the crash (``bot/testresults/log.py`` turns the test that never finished
into an error case); then pytest runs again, in a fresh process, on the same selection minus
every test already seen, its output in ``correctness_cutile_rs.rest-<n>.txt``. A second crash
starts a third run, up to ``MAX_RERUNS``. The correctness log itself stays the first run's, and
the verdict stays the crash's: the extra runs only add results.
"""

from __future__ import annotations

import time
from pathlib import Path

from bot import progress
from bot.targets.types import Target
from bot.testing import testrun
from bot.testing.types import TestResult
from bot.testresults.combine import to_test_result
from bot.testresults.log import DETAIL_LIMIT

MAX_RERUNS = 3


def crashed(result: TestResult) -> bool:
    return any(c.message.startswith("crashed:") for c in result.cases)


def run_what_remains(
    target: Target,
    argv: list[str],
    first: TestResult,
    out_dir: Path,
    env: dict[str, str],
    deadline: float,
    echo: progress.Echo = progress.silent,
    cancel: testrun.Cancel | None = None,
) -> TestResult:
    """``first`` with the results of later runs added, while the last run crashed and time is left."""
    cancel = cancel or testrun.Cancel()  # nobody ends these runs early unless given one
    if first.stopped_by_timeout or cancel.is_set():  # stopped by us, not a crash
        return first
    if crashed(first):
        _hear_the_crash(target, argv, first, out_dir, env, deadline, cancel)
    result, last = first, first
    for n in range(1, MAX_RERUNS + 1):
        left = deadline - time.monotonic()
        if not crashed(last) or left <= 0 or cancel.is_set():
            break
        seen = [c.nodeid for c in result.cases]
        echo(f"[agent-d]   pytest died in {seen[-1]}: running the {len(seen)} tests not seen yet again")
        log_path = out_dir / f"correctness_cutile_rs.rest-{n}.txt"
        rest_argv = [*argv, *(f"--deselect={nodeid}" for nodeid in seen)]
        outcome = testrun.run(target, rest_argv, log_path, env, left, None, echo, cancel=cancel)
        last = to_test_result(
            log_path.read_text(encoding="utf-8", errors="replace"),
            command=testrun.shown(rest_argv),
            exit_code=outcome.code,
            log_path=str(log_path),
            gpu=first.gpu,
        )
        if not last.cases:
            break
        result = _merged(result, last)
        if outcome.stopped:  # out of time: what it saw is kept, the verdict stays the crash's
            break
    return result


CRASH_PROBE_S = 120.0


def _hear_the_crash(
    target: Target,
    argv: list[str],
    first: TestResult,
    out_dir: Path,
    env: dict[str, str],
    deadline: float,
    cancel: testrun.Cancel | None = None,
) -> None:
    """The crashed test alone, capture off; what it printed goes into its case's detail."""
    case = next(c for c in first.cases if c.message.startswith("crashed:"))
    left = min(deadline - time.monotonic(), CRASH_PROBE_S)
    if left <= 0:
        return
    log_path = out_dir / "correctness_cutile_rs.crash.txt"
    alone = [*argv[:3], case.nodeid, "-s", "-v", "--tb=short", "--timeout=60"]  # python -m pytest <test>
    testrun.run(target, alone, log_path, env, left, cancel=cancel)
    said = log_path.read_text(encoding="utf-8", errors="replace")
    tail = " | ".join(line.strip() for line in said.splitlines()[-40:] if line.strip())
    case.detail = (case.detail + " | alone, capture off: " + tail)[: DETAIL_LIMIT * 2]


def _merged(into: TestResult, rest: TestResult) -> TestResult:
    into.cases = into.cases + [c for c in rest.cases if c.nodeid not in {k.nodeid for k in into.cases}]
    into.passed += rest.passed
    into.failed += rest.failed
    into.skipped += rest.skipped
    into.errors += rest.errors
    into.skip_groups = into.skip_groups + rest.skip_groups
    into.panics = list(dict.fromkeys(into.panics + rest.panics))
    into.located = list(dict.fromkeys(into.located + rest.located))
    into.rest_logs = [*into.rest_logs, rest.log_path]
    return into
