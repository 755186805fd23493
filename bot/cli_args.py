"""Options that ``port``, ``verify`` (bot/cli.py) and ``port-job`` (bot/github/cli.py) share."""

from __future__ import annotations

import argparse


def kernels_at_a_time(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of kernels") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more kernels at a time")
    return value


def add_test_jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--test-jobs",
        type=kernels_at_a_time,
        default=1,
        metavar="N",
        help="test up to N kernels side by side after the one build (default: 1, one after the other). "
        "They share the GPU: give more than 1 only where their tests fit in its memory together",
    )


def add_sandbox(p: argparse.ArgumentParser, default: bool) -> None:
    """``--sandbox``/``--no-sandbox``: run the checkout's code (build, tests, validator script) under
    bubblewrap (bot/sandbox.py). On by default where PR code runs (port-job)."""
    p.add_argument(
        "--sandbox",
        action=argparse.BooleanOptionalAction,
        default=default,
        help="run the build, the tests and the checkout's scripts in a bubblewrap sandbox: no network, "
        "no runner files or processes, the environment's allow-list only; where it cannot be made the "
        f"port is BLOCKED (env) (default: {'on' if default else 'off'}; --no-sandbox only on a runner "
        "that runs trusted code alone, docs/github.md)",
    )
