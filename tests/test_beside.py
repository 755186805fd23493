"""The CPU checks beside pytest (bot/testing/beside.py): a stop they raise ends a real pytest-like
child at once and is the outcome; when they hold, the tests' outcome is returned; the two overlap."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from bot.errors import Failed
from bot.targets.types import Target
from bot.testing import beside, testrun

SLOW_CHILD = [
    sys.executable,
    "-c",
    "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)",
]


def _run_child(tmp_path: Path, cancel: testrun.Cancel, argv=None) -> testrun.RunOutcome:
    argv = argv or [*SLOW_CHILD, str(tmp_path / "pid")]
    return testrun.run(Target(tmp_path, "x"), argv, tmp_path / "log.txt", {}, 120, cancel=cancel)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_stop_from_the_checks_ends_the_tests_child_and_is_raised(tmp_path: Path) -> None:
    cancel = testrun.Cancel()
    started = time.monotonic()

    def checks() -> None:
        deadline = time.monotonic() + 30
        while not (tmp_path / "pid").is_file() or not (tmp_path / "pid").read_text().strip():
            assert time.monotonic() < deadline, "the tests' child never started"
            time.sleep(0.05)
        raise Failed("host", "the dry run found `bm` 32 where the reference launches 64")

    with pytest.raises(Failed, match="`bm` 32"):
        beside.first_beside(lambda: _run_child(tmp_path, cancel), checks, cancel)
    assert time.monotonic() - started < 30  # not the child's 60 s: it was ended
    log = (tmp_path / "log.txt").read_text()
    assert _gone(int((tmp_path / "pid").read_text()))
    assert testrun.CANCELLED in log and "`bm` 32" in log
    assert cancel.is_set() and "dry run" in cancel.why


def test_when_the_checks_hold_the_tests_outcome_is_returned_and_both_overlap(tmp_path: Path) -> None:
    cancel = testrun.Cancel()
    argv = [sys.executable, "-c", "import time; time.sleep(1.5); print('done')"]
    started = time.monotonic()
    outcome = beside.first_beside(lambda: _run_child(tmp_path, cancel, argv), lambda: time.sleep(1.5), cancel)
    took = time.monotonic() - started
    assert outcome.code == 0 and not cancel.is_set()
    assert "done" in (tmp_path / "log.txt").read_text()
    assert took < 2.9  # side by side: not 1.5 + 1.5


def test_the_tests_own_failure_is_raised_once_the_checks_held(tmp_path: Path) -> None:
    cancel = testrun.Cancel()
    held = []

    def tests() -> None:
        raise RuntimeError("pytest could not start")

    with pytest.raises(RuntimeError, match="could not start"):
        beside.first_beside(tests, lambda: held.append(True), cancel)
    assert held == [True]


def test_a_run_started_after_cancel_ends_at_once(tmp_path: Path) -> None:
    cancel = testrun.Cancel()
    cancel.set("the dry run stopped the port first")
    started = time.monotonic()
    outcome = _run_child(tmp_path, cancel)
    assert time.monotonic() - started < 20
    assert outcome.code != 0 and not outcome.stopped  # ended by the cancel, not by the deadline
