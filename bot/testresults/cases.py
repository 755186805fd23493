"""What every parser of test results shares: the reading it returns, the order of outcomes, and the
labels a pytest node id gives the report.

Case outcomes are the lower-case pytest words: ``passed``, ``failed``, ``skipped``, ``error``,
and also ``xfailed`` / ``xpassed`` (pytest counts those apart from skips and passes; an xfail
marker is banned in the correctness run, so it must stay visible).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from bot.testing.types import TestCase

# When one node id is reported twice (a pass followed by a teardown error), the worse wins.
SEVERITY = {"passed": 0, "xfailed": 1, "skipped": 2, "xpassed": 3, "failed": 4, "error": 5}
BACKEND_TOKENS = ("cutile_rs", "cutile-rs")


@dataclass
class Reading:
    """What one parser read of a run: its cases in the order they ran and its skip reasons, each
    with how many skips gave it. Every parser returns one, so the results combine the same way
    whichever format they came from."""

    source: ClassVar[str] = ""  # the format read: "junit" or "log"
    cases: list[TestCase] = field(default_factory=list)
    skip_groups: list[tuple[int, str]] = field(default_factory=list)  # (count, full reason)


def worse(new: str, old: str) -> bool:
    """True when outcome ``new`` outranks ``old`` (an error after a pass is an error)."""
    return SEVERITY[new] > SEVERITY[old]


def tally(cases: list[TestCase]) -> dict[str, int]:
    """How many cases have each outcome; every outcome is a key."""
    counts = dict.fromkeys(SEVERITY, 0)
    for case in cases:
        counts[case.outcome] += 1
    return counts


def split_nodeid(nodeid: str) -> tuple[str, str, str]:
    """``(file, name, params)``: ``a.py::C::t[1-2]`` -> ``("a.py", "C::t", "1-2")``."""
    file, _, rest = nodeid.partition("::")
    name, params = rest, ""
    lb = rest.find("[")
    if lb >= 0 and rest.endswith("]"):
        name, params = rest[:lb], rest[lb + 1 : -1]
    return file, name, params


def case_label(nodeid: str) -> str:
    """The test's name without file and parameters: ``Test_X::test_op``."""
    file, name, _ = split_nodeid(nodeid)
    return name or file


def config_label(nodeid: str, drop_backend: bool = True) -> str:
    """A "Config" label from the parametrize part of a node id.

    ``tests/ops/test_x.py::Test_X::test_op[4-8-float16-cutile_rs]`` -> ``4-8-float16``. The
    backend token (``cutile_rs`` or ``cutile-rs``; ids spell it both ways) is dropped when
    ``drop_backend`` because every row of the report is the cutile-rs backend. An id that is
    only the backend gives ``cutile-rs``; an unparametrized test gives ``""``.
    """
    _, _, params = split_nodeid(nodeid)
    if not params or not drop_backend:
        return params
    out = params
    for tok in BACKEND_TOKENS:
        # Remove the token as a whole "-"-separated field, wherever it sits.
        out = re.sub(rf"(?:(?<=-)|^){re.escape(tok)}(?:-|$)", "", out)
    out = out.strip("-")
    return out or ("cutile-rs" if params else "")


def head_line(nodeid: str) -> str:
    """The title pytest gives a node in its FAILURES/ERRORS sections: ``Class.test[params]``."""
    _, _, rest = nodeid.partition("::")
    return (rest or nodeid).replace("::", ".")
