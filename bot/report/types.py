"""The typed values of the report stage: the stages' records, the validator's run, and
everything a port run produced (``PortResult``, the input of publication)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.build.types import BuildResult
from bot.classify.types import Verdict
from bot.plan.types import LaunchPlan
from bot.targets.types import Target
from bot.testing.types import TestResult

if TYPE_CHECKING:
    from bot.dryrun.result import DryRun
    from bot.perf.result import PerfResult


@dataclass
class StageRecord:
    name: str
    seconds: float
    status: str  # ok | failed | blocked (could not run here: the verdict is BLOCKED)
    detail: str = ""


@dataclass
class ValidatorRun:
    command: str
    output: str
    exit_code: int


@dataclass
class PortResult:
    """Everything a port run produced; the input of publication."""

    target: Target
    verdict: Verdict
    stages: list[StageRecord]
    out_dir: str
    validator_block: str = ""
    plan: LaunchPlan | None = None
    build: BuildResult | None = None
    tests: TestResult | None = None
    changed_files: list[str] = field(default_factory=list)
    # how the porter's contract changes the launch from what agent-d reads alone (bot/classify/launch_diff.py)
    launch_differences: list[str] = field(default_factory=list)
    # why the contract's launch could not be compared with the reference's (empty: it was, or no contract)
    launch_unknown: str = ""
    # the launch dry run against the cuTile reference (bot/dryrun); None: not run
    dry_run: DryRun | None = None
    # the perf stage after ALL_PASS (bot/perf, TileGym's stage E); None: the run never got that far
    perf: PerfResult | None = None
