"""Progress lines for a person watching: on stderr, so stdout keeps only the result.

``heartbeat`` covers work that is silent for minutes (a cold cargo build, a slow test
file): a line with the elapsed time at least every ``HEARTBEAT_S`` seconds, so a log never
looks hung.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Echo = Callable[[str], None]
HEARTBEAT_S = 15.0


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def silent(line: str) -> None:
    """``--quiet``: progress goes nowhere."""


def one_at_a_time(echo: Echo) -> Echo:
    """``echo`` behind a lock: lines from kernels tested side by side come out whole, one after
    another (``print`` writes a line and its newline in two calls, which other threads can split)."""
    if echo is silent:
        return echo
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            echo(line)

    return say


def tagged(echo: Echo, kernel: str) -> Echo:
    """Every line starts with ``[<kernel>]``: with kernels tested side by side, whose line it is.
    ``silent`` stays ``silent`` (``heartbeat`` starts no thread for it)."""
    if echo is silent:
        return echo
    return lambda line: echo(f"[{kernel}] {line}")


@contextmanager
def group(echo: Echo, title: str) -> Iterator[None]:
    """In a GitHub Actions log, the block's lines folded under ``title`` (``::group::``); elsewhere
    nothing. Groups do not nest there: one phase of the port at a time."""
    folding = echo is not silent and os.environ.get("GITHUB_ACTIONS") == "true"
    if folding:
        echo(f"::group::{title}")
    try:
        yield
    finally:
        if folding:
            echo("::endgroup::")


@contextmanager
def heartbeat(
    echo: Echo, what: str, every: float | None = None, status: Callable[[], str] | None = None
) -> Iterator[Callable[[], None]]:
    """Say ``[agent-d] <what>: still running, <n>s elapsed[, <status()>]`` every ``every`` seconds
    until the block ends; ``status`` adds what the work is doing now (the crate being compiled).

    Yields ``alive()``: calling it (when the work itself printed something) restarts the
    silence count, so a line only comes when nothing else did.
    """
    if echo is silent:
        yield lambda: None
        return
    every = HEARTBEAT_S if every is None else every
    start = time.monotonic()
    last = [start]
    done = threading.Event()

    def alive() -> None:
        last[0] = time.monotonic()

    def beat() -> None:
        while not done.wait(min(every, max(0.05, last[0] + every - time.monotonic()))):
            now = time.monotonic()
            if now - last[0] >= every:
                doing = status() if status else ""
                echo(
                    f"[agent-d] {what}: still running, {now - start:.0f}s elapsed"
                    + (f", {doing}" if doing else "")
                )
                last[0] = now

    thread = threading.Thread(target=beat, name="agent-d-heartbeat", daemon=True)
    thread.start()
    try:
        yield alive
    finally:
        done.set()
        thread.join()
