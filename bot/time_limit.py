"""A time limit on agent-d's own in-process work (reading the reference, planning, generating), so
an input that makes it run on ends in a verdict, not in the job's timeout.

A pull request controls kernel.rs and the host contract; both are bounded where they are read,
and this is the net under those bounds. The limit is a timer signal (``SIGALRM``), so it only
applies in the main thread (where ``agent-d port`` plans); ``Expired`` is a ``BaseException``
so no ``except Exception`` on the way swallows it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "AGENT_D_PLAN_TIMEOUT"
DEFAULT_S = 300.0


class Expired(BaseException):
    """The limit ran out; the message says what was stopped."""


def seconds() -> float:
    try:
        return float(os.environ.get(ENV, DEFAULT_S))
    except ValueError:
        return DEFAULT_S


@contextmanager
def within(limit: float, what: str) -> Iterator[None]:
    """Raise ``Expired`` in the block after ``limit`` seconds (no limit off the main thread, or <= 0)."""
    if limit <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(_signum, _frame):
        raise Expired(f"{what} took more than {limit:g} s and was stopped ({ENV})")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
