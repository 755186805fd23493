"""The process groups agent-d starts (cargo, pytest, a validator script), so a Ctrl-C or a SIGTERM
ends them too.

Each is started in a session of its own (its deadline kills the whole group: rustc, build scripts,
pytest workers), which also means a signal to agent-d does not reach it. ``started`` records a
group while it runs; on SIGINT or SIGTERM the CLI calls ``stop_all``, which ends every recorded
group (SIGTERM, then SIGKILL after ``GRACE_S``) and says what it stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

GRACE_S = 3.0

_lock = threading.Lock()
_stopping = threading.Event()
_running: dict[int, tuple[str, subprocess.Popen]] = {}  # group id -> (what it is, its leader)


@contextlib.contextmanager
def started(proc: subprocess.Popen, what: str) -> Iterator[subprocess.Popen]:
    """Record ``proc`` (the leader of its own session) as running ``what`` while the block runs.
    Once ``stop_all`` has run, a process started after it (a worker thread going on to its next
    stage) is ended at once and ``Stopping`` raised: nothing new runs after a Ctrl-C."""
    with _lock:
        if _stopping.is_set():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise Stopping(f"{what} was not run: agent-d is stopping")
        _running[proc.pid] = (what, proc)
    try:
        yield proc
    except Exception:
        _forget(proc)
        raise
    except BaseException:
        # a Ctrl-C or SIGTERM unwinding: stop_all, which comes next, must still find the group
        if proc.poll() is not None:
            _forget(proc)
        raise
    _forget(proc)


def _forget(proc: subprocess.Popen) -> None:
    with _lock:
        _running.pop(proc.pid, None)


class Stopping(RuntimeError):
    """A process was started after a Ctrl-C or SIGTERM: it was ended, and its stage stops."""


def running() -> list[str]:
    with _lock:
        return sorted(what for what, _proc in _running.values())


def stop_all() -> list[str]:
    """End every recorded group: SIGTERM, up to ``GRACE_S`` for the leaders to exit, then SIGKILL
    for whatever of each group is left (a rustc a cargo left behind); what was stopped, in words."""
    with _lock:
        _stopping.set()
        groups = dict(_running)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(proc.poll() is None for _what, proc in groups.values()):
        time.sleep(0.05)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return sorted(what for what, _proc in groups.values())
