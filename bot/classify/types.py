"""The typed values of the classify stage: the verdict, and its one wording."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bot.build.types import Annotation


class VerdictKind(str, Enum):
    ALL_PASS = "ALL_PASS"
    FAIL = "FAIL"
    BLOCKED = "BLOCKED"


@dataclass
class Verdict:
    kind: VerdictKind
    klass: str  # fail_class (host|kernel) or block_class (env|host|kernel); "" for ALL_PASS
    reason: str  # one line, always set
    followup: str = ""  # agent_b_followup for kernel faults
    host_fix: str = ""
    runner_fix: str = ""  # env: what the runner's owner must do
    withheld: bool = False  # agent-d's own bug: its generated files were not applied and are never pushed
    annotations: tuple[Annotation, ...] = ()  # where the fault is, file and line (bot/build/annotations.py)

    @property
    def fix(self) -> str:
        """The one line saying what to do next, for whoever must act: the host fix (agent-d), the
        follow-up (the kernel's author), the runner's fix (env)."""
        if self.kind is VerdictKind.ALL_PASS:
            return ""
        return {"kernel": self.followup, "env": self.runner_fix}.get(self.klass, self.host_fix)

    @property
    def line(self) -> str:
        return f"VERDICT: {self.kind.value}"

    @property
    def headline(self) -> str:
        return verdict_headline(self.kind.value, self.klass)


def verdict_headline(kind: str, klass: str) -> str:
    """The one wording of a verdict and its class, in every text agent-d writes (reports, the
    final line, the review, the check title): ``ALL_PASS``, ``FAIL (fail_class: host)``,
    ``BLOCKED (block_class: env)``."""
    kind = getattr(kind, "value", kind)
    if kind == "ALL_PASS" or not klass:
        return str(kind)
    label = "block_class" if kind == "BLOCKED" else "fail_class"
    return f"{kind} ({label}: {klass})"
