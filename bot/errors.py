"""Stage outcomes that end a run early, each carrying the verdict class and a one-line reason."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.build.types import Annotation

# a wrapper's refusal of a launch kernel.rs does not port, wherever it surfaces (a test's failure,
# the dry run's port side): the kernel's gap, not the host's
UNPORTED_PATH = re.compile(
    r"the reference's launch through (?P<through>.+?) \(when (?P<when>.+?)\) is not ported"
)


class StageStop(Exception):
    """A stage could not go on. ``kind`` is FAIL or BLOCKED; ``klass`` the fault class; ``annotations``
    the places in the pull request's files the fault is at, when the evidence names them."""

    kind = "BLOCKED"

    def __init__(
        self,
        klass: str,
        reason: str,
        followup: str = "",
        host_fix: str = "",
        runner_fix: str = "",
        annotations: Sequence[Annotation] = (),
    ):
        super().__init__(reason)
        self.klass = klass
        self.reason = reason
        self.followup = followup
        self.host_fix = host_fix
        self.runner_fix = runner_fix
        self.annotations = tuple(annotations)


class Blocked(StageStop):
    """The run cannot proceed: env (no GPU, missing toolchain), host or kernel."""

    kind = "BLOCKED"


class Failed(StageStop):
    """Something ran and failed: a host fault (ours) or a kernel fault (the kernel author's)."""

    kind = "FAIL"


class UsageError(Exception):
    """Bad command-line input: exits with the usage status, before any stage runs."""


class OwnBug(Blocked):
    """A file agent-d generated is faulted by a linter or the compiler: agent-d's bug, never the porter's.

    BLOCKED (host); the kernel's generated files are withheld (not applied, never pushed)."""

    def __init__(self, reason: str, host_fix: str = "", annotations: Sequence[Annotation] = ()):
        super().__init__(
            "host",
            f"agent-d's own bug: {reason}",
            host_fix=host_fix or REPORT_OWN_BUG,
            annotations=annotations,
        )


REPORT_OWN_BUG = (
    "agent-d generated code that does not check; its files were withheld: report it to agent-d's "
    "maintainers with this verdict"
)
