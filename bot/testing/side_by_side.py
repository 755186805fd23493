"""Kernels tested side by side (``--test-jobs N``): each kernel's smoke, tests and verdict in a
thread of its own, at most N at a time; every kernel still gets its own verdict.

What the threads share, and why that is safe:

- progress lines: one echo behind a lock, each line tagged with its kernel (``bot/progress.py``);
- the interpreter probe: asked once, behind a lock (``pipeline._once``); the ``Interpreter`` it
  gives is frozen;
- the built library: only read (the ABI smoke and the tests load it in their own processes);
- ``os.environ``: only read (each pytest run copies it into an environment of its own); nothing
  changes it while the tests run;
- files: each kernel writes under its own reports folder ``<out root>/<op>/`` (logs, JUnit XML,
  reports). ``CUTILE_KERNEL_OUT_ROOT``, given to the tests, is the shared parent: a test that
  writes there outside its own op's folder could meet another kernel's;
- the checkout: pytest runs in it for every kernel. Its ``.pytest_cache`` is written by each run
  (pytest creates the folder atomically; its last-failed list ends as the last run to finish
  wrote it); agent-d never reads it (no ``--lf``), so the results do not depend on it. Python
  writes ``__pycache__`` files atomically.

The GPU is shared too, and nothing here divides it: use N > 1 where the kernels' tests fit in the
GPU's memory together.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait


def run_each(steps: list[Callable[[], None]], workers: int) -> None:
    """Every step, at most ``workers`` at a time, in threads; all have ended on return. Each step
    handles its own failure (``job.Job.attempt`` makes it that kernel's verdict); an exception that
    escapes one anyway is raised here once the others have ended.

    Interrupted (Ctrl-C): no step starts after it; the running ones end with their pytest run."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-d-test")
    try:
        futures = [pool.submit(step) for step in steps]
        wait(futures)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    for future in futures:
        future.result()
