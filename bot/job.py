"""One kernel's port as the pipeline runs it: the options it is given, the record of its stages
(their timing and progress lines), and the verdict a stop becomes.

A stage that cannot go on raises ``StageStop`` (FAIL or BLOCKED with its class); ``Job.attempt``
turns that into the kernel's verdict, and anything unexpected into BLOCKED(host) "internal
error" (or the machine's fault, ``bot/classify/machine_errors.py``) with the traceback kept in its log.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bot import progress
from bot.apply.types import ApplyResult
from bot.classify import machine_errors
from bot.classify.types import Verdict, VerdictKind
from bot.errors import OwnBug, StageStop
from bot.perf.result import CONFIG_CAP
from bot.read.types import KernelSignature
from bot.report.types import PortResult, StageRecord
from bot.targets.types import Discovery, Target

T = TypeVar("T")


@dataclass
class PortOptions:
    repo: Path
    kernel: str | list[str] | None = None  # the kernel(s) named; None: those the change adds
    base: str | None = None
    out_root: Path | None = None
    python: str = ""
    cargo_target_dir: Path | None = None
    cargo_home: Path | None = None  # CARGO_HOME of the build (a runner's cargo cache); None: inherited
    test_timeout: float = 3600.0
    test_jobs: int = 1  # kernels tested side by side (bot/testing/side_by_side.py); they share the GPU
    dry_run_first: bool = False  # the CPU checks before pytest, not beside it (bot/testing/beside.py)
    echo: Callable[[str], None] = progress.to_stderr  # progress lines
    answer: Callable[[str], None] = print  # the returned text: validator block and verdict line
    echo_pytest: bool = False
    verify_only: bool = False  # skip generation and build: test an already built tree (GPU runners)
    sandbox: bool = False  # the checkout's code runs under bubblewrap (bot/sandbox.py)
    perf: bool | None = None  # the perf stage after ALL_PASS (bot/perf): None on where a CUDA GPU is visible
    perf_timeout: float = 1800.0  # seconds for the perf stage's pytest (collection and run)
    perf_configs: int = CONFIG_CAP  # the perf stage's cap on configs, covering every parameter value (0: all)
    force: bool = False  # overwrite a person's uncommitted edits of the files agent-d writes whole

    def out_dir(self, op: str) -> Path:
        root = self.out_root or Path(
            os.environ.get("CUTILE_KERNEL_OUT_ROOT") or self.repo / "cutile_kernel_out"
        )
        return root / op


@dataclass
class Run:
    echo: Callable[[str], None]
    stages: list[StageRecord] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def stage(
        self,
        name: str,
        fn: Callable[[], T],
        detail: Callable[[T], str] | None = None,
        status: Callable[[T], str] | None = None,
    ) -> T:
        """Run one stage and say how it went. ``status``: what a value the stage returned says of
        what it ran (``failed`` for pytest's non-zero exit, ``blocked`` where the machine cannot run
        it), so its line never says ``ok`` for that; without it, a stage that returns is ``ok``."""
        start = time.monotonic()
        try:
            value = fn()
        except StageStop as stop:
            self.record(name, time.monotonic() - start, stop_status(stop), stop_line(stop))
            raise
        except Exception as exc:
            self.record(name, time.monotonic() - start, "failed", f"{type(exc).__name__}: {exc}")
            raise
        said = status(value) if status is not None else "ok"
        self.record(name, time.monotonic() - start, said, detail(value) if detail else "")
        return value

    def record(self, name: str, seconds: float, status: str, detail: str) -> None:
        """``status``: ok, failed, blocked (could not run here) or skipped (not run, ``detail`` says why)."""
        self.stages.append(StageRecord(name, seconds, status, detail))
        mark = {"ok": "ok", "failed": "FAILED", "blocked": "BLOCKED", "skipped": "skipped"}[status]
        self.echo(f"[agent-d] {name:<18} {mark:<6} {seconds:7.2f}s  {detail}".rstrip())


def stop_status(stop: StageStop) -> str:
    # a stage that could not run here (BLOCKED) did not fail: its line says which
    return "blocked" if stop.kind == "BLOCKED" else "failed"


def stop_line(stop: StageStop) -> str:
    return f"{stop.kind} {stop.klass}: {stop.reason}"


@dataclass
class Job:
    """One kernel's port while the change's kernels go through the stages side by side."""

    target: Target
    run: Run
    out_dir: Path
    result: PortResult
    found: Discovery | None = None
    pytest_cmd: str = "(pytest not run)"
    pytest_rc: int | None = None
    stopped: bool = False
    # facts are missing: this stop is the verdict once the build has shown that kernel.rs compiles
    awaiting_facts: StageStop | None = None
    applied: ApplyResult | None = None  # what apply wrote, to take back when the build faults it
    signature: KernelSignature | None = None  # the kernel's, as the reader gave it
    force: bool = False  # PortOptions.force

    @classmethod
    def start(cls, target: Target, options: PortOptions) -> Job:
        run = Run(options.echo)
        out_dir = options.out_dir(target.op).resolve()
        result = PortResult(target, Verdict(VerdictKind.BLOCKED, "host", "not run"), run.stages, str(out_dir))
        return cls(target, run, out_dir, result, force=options.force)

    def attempt(self, step: Callable[[], object]) -> None:
        """Run the next step of this kernel's port unless an earlier one stopped it; a stop is its verdict."""
        if self.stopped:
            return
        try:
            step()
        except StageStop as stop:
            self.stop(stop)
        except Exception as exc:  # the verdict must still say why, and reports must still be written
            self.crash(exc)

    def crash(self, exc: Exception) -> None:
        """An unexpected exception (called while handling it): the machine's fault when it is one (a
        full or read-only disk, too-deep input), else BLOCKED host; the traceback in the log."""
        self.run.log.append("stopped by:\n" + traceback.format_exc())
        self.stopped = True
        stages = self.run.stages
        failed = stages[-1].name if stages and stages[-1].status == "failed" else ""
        stop = machine_errors.explain(exc, failed)
        self.result.verdict = (
            verdict_of(stop)
            if stop is not None
            else Verdict(
                VerdictKind.BLOCKED, "host", f"internal error in agent-d: {type(exc).__name__}: {exc}"
            )
        )

    def stop(self, stop: StageStop) -> None:
        self.stopped = True
        self.result.verdict = verdict_of(stop)


def verdict_of(stop: StageStop) -> Verdict:
    return Verdict(
        VerdictKind(stop.kind),
        stop.klass,
        stop.reason,
        stop.followup,
        stop.host_fix,
        stop.runner_fix,
        withheld=isinstance(stop, OwnBug),
        annotations=stop.annotations,
    )
