"""The typed values of the test stage: the checkout's pytest run, read by ``bot/testresults``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TestCase:
    __test__ = False  # not a pytest test class
    nodeid: str
    outcome: str  # passed | failed | skipped | error
    message: str = ""
    detail: str = ""  # failures: every ``E`` line of its traceback, joined (the values, the NaN)


@dataclass(frozen=True)
class Located:
    """A message the JIT tied to a place in the kernel's source (``  --> <file>:<line>:<col>``), the
    path as it printed it: relative to the crate it was compiled in, or absolute."""

    path: str
    line: int
    column: int
    message: str


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class
    ran: bool
    command: str
    exit_code: int | None
    log_path: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    cases: list[TestCase] = field(default_factory=list)
    gpu: bool = False
    env_problem: str = ""  # why the tests could not run meaningfully here
    env_fix: str = ""  # what would let them run (every fix, one line)
    stopped_by_timeout: bool = False  # agent-d killed pytest at --test-timeout
    silent_for: float = 0.0  # seconds pytest had printed nothing when it was stopped (a hang)
    rest_logs: list[str] = field(default_factory=list)  # runs of what remained after a crash (rerun.py)
    skip_groups: list[tuple[int, str]] = field(default_factory=list)  # -rs summary: (count, reason)
    test_skips: list[str] = field(default_factory=list)  # the test file's own skip texts (cited)
    panics: list[str] = field(default_factory=list)  # Rust panic messages in the log (JIT, launcher)
    located: list[Located] = field(default_factory=list)  # JIT errors the log ties to a source line
    source: str = ""  # where cases and counts were read: "junit" (the XML) or "log" (no XML)
