"""What kernels tested side by side share, without a port: the interpreter probe asked once however
many threads ask together."""

from __future__ import annotations

import threading

import pytest

from bot.pipeline import _once

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
