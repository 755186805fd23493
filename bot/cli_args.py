"""Options that ``port``, ``verify`` (bot/cli.py) and ``port-job`` (bot/github/cli.py) share."""

from __future__ import annotations

import argparse

from bot.errors import UsageError
from bot.perf.result import CONFIG_CAP


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
    p.add_argument(
        "--dry-run-first",
        action="store_true",
        help="run the launch dry run and the device compile before pytest, not beside it: a fault they "
        "find then spends no GPU time, at the cost of their seconds before the tests start (default: side "
        "by side, pytest stopped at once when they find one)",
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


def positive_seconds(text: str) -> float:
    return _parsed(text, float, "a number of seconds", lambda v: v > 0, "a positive number of seconds")


def _count(text: str) -> int:
    """A whole number of at least 0 (argparse's type for a count)."""
    return _parsed(text, int, "a whole number", lambda v: v >= 0, "a whole number of at least 0")


def _parsed(text: str, convert, what: str, fits, want: str):
    """``convert(text)`` when it reads and ``fits``; else argparse's error saying what to give."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not fits(value):
        raise argparse.ArgumentTypeError(f"{text!r}: give {want}")
    return value


PERF_ENV = "AGENT_D_PERF"  # on | off | auto: the default of --perf / --no-perf (the workflow's input)
_PERF_WORDS = {"on": True, "off": False, "auto": None, "": None}


def add_perf(p: argparse.ArgumentParser) -> None:
    """``--perf`` / ``--no-perf``, ``--perf-timeout`` and ``--perf-configs``: the perf stage after ALL_PASS (bot/perf)."""
    p.add_argument(
        "--perf",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="after ALL_PASS, run TileGym's test_perf for cutile-rs, cuTile and PyTorch and report stage E's "
        f"verdict (default: ${PERF_ENV} = on, off or auto; auto or unset: on where the tests' interpreter "
        "sees a CUDA GPU, off otherwise)",
    )
    p.add_argument(
        "--perf-timeout",
        type=positive_seconds,
        default=1800.0,
        metavar="SECONDS",
        help="seconds for each kernel's perf stage (default: %(default)g)",
    )
    p.add_argument(
        "--perf-configs",
        type=_count,
        default=CONFIG_CAP,
        metavar="N",
        help="measure at most N configs of test_perf, chosen to name every parameter value at least once "
        "(stage E's cap; 0: every config; default: %(default)d)",
    )


def perf_choice(given: bool | None, env: dict[str, str]) -> bool | None:
    """``--perf``/``--no-perf`` when given, else ``$AGENT_D_PERF``; None: decide by the GPU."""
    if given is not None:
        return given
    word = env.get(PERF_ENV, "").strip().lower()
    if word not in _PERF_WORDS:
        raise UsageError(f"{PERF_ENV}={word!r}: give on, off or auto")
    return _PERF_WORDS[word]
