"""Failures that are the machine's or the input's shape, not a bug in agent-d, in plain words.

A full disk (ENOSPC, EDQUOT), a read-only file system (EROFS) and Python input nested deeper
than the interpreter can parse (RecursionError) each get a verdict that says what happened
and what to do, instead of "internal error".
"""

from __future__ import annotations

import errno
import os
from pathlib import PurePath

from bot.errors import Blocked, StageStop

_DISK_FULL = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded"}


def explain(exc: BaseException, stage: str = "", writing: str = "") -> StageStop | None:
    """The verdict for ``exc`` when it is one of the failures above, else None.

    ``writing``: what was being written, for errors that name no file (a failed flush).
    """
    where = f" (stage {stage})" if stage else ""
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        return Blocked(
            "env",
            f"{_DISK_FULL[exc.errno]} while writing {_path(exc, writing)}{where}",
            host_fix="free space on that disk (cargo's target folder is the largest: --cargo-target-dir "
            "can put it on another disk), then run again",
        )
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return Blocked(
            "env",
            f"read-only file system: agent-d could not write {_path(exc, writing)}{where}",
            host_fix="run on a writable checkout, or give --out a writable folder for the reports",
        )
    if isinstance(exc, RecursionError):
        return Blocked(
            "host",
            f"{_file_being_read(exc) or 'a file of the checkout'} is nested too deeply for agent-d to "
            f"read{where}: {exc}",
            host_fix="split the deeply nested expression; the traceback is in reports/agent_logs/agent_d.md",
        )
    return None


def one_line(exc: BaseException) -> str:
    """What ``explain`` says, or the exception's type and message, on one line."""
    stop = explain(exc)
    text = stop.reason if stop is not None else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def _file_being_read(exc: BaseException) -> str:
    """The file the innermost reading frame had open (its local ``path`` or ``test_file``), if any."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for name in ("path", "test_file"):
            value = frame.f_locals.get(name)
            if isinstance(value, (str, PurePath)) and os.path.isfile(value):
                return str(value)
    return ""


def _path(exc: OSError, writing: str) -> str:
    # a failed copy names its source first and the file it was writing second
    return str(exc.filename2 or exc.filename or writing or "a file")
