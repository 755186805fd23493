"""A time and a memory limit on agent-d's own in-process work (reading the reference, planning,
generating), so an input that makes it run on, or grow without end, ends in a verdict, not in the
job's timeout or the runner's out-of-memory killer.

A pull request controls kernel.rs and the host contract; both are bounded where they are read,
and this is the net under those bounds. The limit is a timer signal (``SIGALRM``), so it only
applies in the main thread (where ``agent-d port`` plans); ``Expired`` is a ``BaseException``
so no ``except Exception`` on the way swallows it.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "AGENT_D_PLAN_TIMEOUT"
DEFAULT_S = 300.0
MEMORY_ENV = "AGENT_D_PLAN_MEMORY_MB"
DEFAULT_MEMORY_MB = 4096.0  # more address space than the work it stands over: planning needs ~100 MB


class Expired(BaseException):
    """The limit ran out; the message says what was stopped."""


def _setting(name: str, default: float) -> float:
    """A number from the environment; the default where it is unset or not a number."""
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def seconds() -> float:
    return _setting(ENV, DEFAULT_S)


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


class OutOfMemory(BaseException):
    """The work outgrew its memory limit; the message says what was stopped."""


def memory_mb() -> float:
    return _setting(MEMORY_ENV, DEFAULT_MEMORY_MB)


def _address_space() -> int:
    """This process's address space now, in bytes (``VmSize``); 0 where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


@contextmanager
def memory_within(limit_mb: float, what: str) -> Iterator[None]:
    """The block may grow this process's address space by ``limit_mb`` more; past that an allocation
    fails, and the ``MemoryError`` is raised out of the block as ``OutOfMemory`` (no limit for <= 0,
    or where the address space cannot be read). Every thread of the process shares the limit while
    the block runs: the port's other threads only wait on children meanwhile."""
    used = _address_space()
    if limit_mb <= 0 or not used:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = used + int(limit_mb * 1024 * 1024)
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))
    try:
        yield
    except MemoryError:
        raise OutOfMemory(f"{what} needed more than {limit_mb:g} MB and was stopped ({MEMORY_ENV})") from None
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
