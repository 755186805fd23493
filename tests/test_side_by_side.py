"""What kernels tested side by side share, without a port: the interpreter probe asked once however
many threads ask together, progress lines that come out whole and say whose they are, and a runner
that ends every step before it returns."""

from __future__ import annotations

import threading

import pytest

from bot import progress
from bot.pipeline import _once
from bot.testing import side_by_side

THREADS = 8


def test_once_calls_its_function_once_when_many_threads_ask_together():
    calls: list[int] = []
    start = threading.Barrier(THREADS, timeout=30)

    def slow_probe() -> object:
        calls.append(1)
        threading.Event().wait(0.3)  # a window for the other threads to come in, were they let in
        return object()

    get = _once(slow_probe)
    answers: list[object] = []

    def ask() -> None:
        start.wait()
        answers.append(get())

    threads = [threading.Thread(target=ask) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(answers) == THREADS and all(a is answers[0] for a in answers)


def test_once_tries_again_after_a_call_that_raised():
    outcomes = iter([RuntimeError("probe died"), "python 3"])

    def flaky() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    get = _once(flaky)
    with pytest.raises(RuntimeError, match="probe died"):
        get()
    assert get() == "python 3" and get() == "python 3"


def test_lines_from_many_threads_come_out_whole_and_tagged_with_their_kernel():
    written: list[str] = []

    def two_writes(line: str) -> None:  # as print does: the text, then its newline
        written.append(line)
        threading.Event().wait(0.0005)  # another thread may run here, were it let in
        written.append("\n")

    echo = progress.one_at_a_time(two_writes)
    start = threading.Barrier(4, timeout=30)

    def speak(kernel: str) -> None:
        tagged = progress.tagged(echo, kernel)
        start.wait()
        for n in range(50):
            tagged(f"[agent-d] line {n}")

    threads = [threading.Thread(target=speak, args=(f"op{k}",)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = "".join(written).splitlines()
    assert len(lines) == 200
    for k in range(4):
        assert [ln for ln in lines if ln.startswith(f"[op{k}] ")] == [
            f"[op{k}] [agent-d] line {n}" for n in range(50)
        ]


def test_quiet_stays_quiet_when_tagged():
    assert progress.tagged(progress.one_at_a_time(progress.silent), "op") is progress.silent


def test_run_each_ends_every_step_and_then_raises_what_escaped_one():
    ended: list[str] = []
    both = threading.Barrier(2, timeout=30)

    def broken() -> None:
        both.wait()
        raise RuntimeError("escaped")

    def fine() -> None:
        both.wait()
        ended.append("fine")

    with pytest.raises(RuntimeError, match="escaped"):
        side_by_side.run_each([broken, fine], workers=2)
    assert ended == ["fine"]
