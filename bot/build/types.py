"""The typed values of the build stage: the build's result, and the faults it places in the
pull request's files (``bot/build/annotations.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BuildResult:
    ok: bool
    so_path: str
    command: str
    seconds: float
    log_tail: str
    errors_by_file: dict[str, list[str]] = field(default_factory=dict)
    symbol_found: bool = False
    symbols: list[str] = field(default_factory=list)
    smoke_ok: bool = False
    smoke_detail: str = ""
    cargo_runs: int = 1  # cargo builds the change's kernels took together (2: one kernel left out)
    built_with: list[str] = field(default_factory=list)  # the change's kernels in this library


ANNOTATION_LEVELS = ("failure", "warning", "notice")  # the Checks API's annotation_level


@dataclass(frozen=True)
class Annotation:
    """A fault at a place in a file of the pull request, for the check run (bot/build/annotations.py):
    ``path`` relative to the repo, lines from 1; columns (from 1, 0: none) only on a single line."""

    path: str
    start_line: int
    end_line: int
    level: str  # failure | warning | notice
    title: str
    message: str
    start_column: int = 0
    end_column: int = 0
