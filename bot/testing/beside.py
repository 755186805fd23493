"""The CPU checks (the launch dry run, the device compile) beside pytest, joined before classifying.

Neither needs the other: the dry run and the device compile run on the CPU and pytest does not
read their results, so on a GPU runner they overlap instead of adding up (issue 35: push to review
within 30 s). What the checks find still decides first, as it did when they ran before pytest:
a stop they raise ends the pytest run at once (``testrun.Cancel``) and is the verdict; pytest's
own outcome counts only when the checks hold. ``--dry-run-first`` keeps the old order, where a
fault found on the CPU spends no GPU time at all.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from bot.testing import testrun

T = TypeVar("T")


def first_beside(tests: Callable[[], T], checks: Callable[[], None], cancel: testrun.Cancel) -> T:
    """``tests`` in a thread of its own while ``checks`` runs here; ``tests``'s value once both
    have ended. An exception from ``checks`` (a stop, a Ctrl-C) ends ``tests`` through ``cancel``
    and is raised once ``tests`` has ended; one from ``tests`` is raised after ``checks`` held."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-d-pytest")
    try:
        future = pool.submit(tests)
        try:
            checks()
        except BaseException as exc:
            cancel.set(_why(exc))
            wait([future])
            raise
        return future.result()
    finally:
        pool.shutdown()


def _why(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "agent-d was interrupted"
    reason = getattr(exc, "reason", "")
    return f"the dry run or the device compile stopped the port first ({reason or type(exc).__name__})"
