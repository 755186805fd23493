"""Two kernels of one change, generated and built once by the real pipeline, then tested side by side
with ``test_jobs=2`` and one after the other with 1; one verdict and one reports folder each.

The seam is ``testrun.run`` (pytest of one kernel): a stand-in in front of the real one notes which
kernels' pytest runs are under way at once and, for the side-by-side case, holds each at a barrier
until the other kernel arrives. Had the kernels been tested one after the other, the barrier would
break and the kernel waiting at it would get an internal-error verdict.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from bot.classify.types import VerdictKind
from bot.demo import assemble_checkout
from bot.pipeline import PortOptions, port
from bot.testing import testrun

pytestmark = pytest.mark.slow
OPS = ["silu_and_mul", "swiglu"]  # the commit's order, which the results keep; both have test files
TEST_STAGE_LINE = re.compile(r"\[agent-d\] (abi smoke|interpreter|registration|test|classify) {2,}")
# how long one kernel waits at the barrier for the other before it breaks: each kernel's dry run
# comes first, and on a loaded 2-core machine one can finish minutes after the other
MEETING_S = 400.0


@pytest.fixture(scope="module")
def repo(tmp_path_factory, tilegym_wheel) -> Path:
    """One checkout for the module: a second port of it regenerates nothing and rebuilds little."""
    return assemble_checkout(tmp_path_factory.mktemp("parallel") / "tg", tilegym_wheel, OPS, OPS).repo


class PytestRuns:
    """In front of ``testrun.run``: which kernels' pytest runs are under way, the most at once, the
    order they started in; ``meet``: each kernel's first run waits there for the other kernel's."""

    def __init__(self, meet: bool = False, broken: str = "") -> None:
        self.real = testrun.run
        self.barrier = threading.Barrier(len(OPS), timeout=MEETING_S) if meet else None
        self.broken = broken  # this kernel's pytest run raises instead of running
        self.lock = threading.Lock()
        self.under_way: set[str] = set()
        self.most_at_once = 0
        self.started: list[str] = []

    def __call__(self, target, argv, log_path: Path, *args, **kwargs):
        with self.lock:
            self.under_way.add(target.op)
            self.most_at_once = max(self.most_at_once, len(self.under_way))
            self.started.append(target.op)
        try:
            if self.barrier is not None and log_path.name == "correctness_cutile_rs.txt":
                self.barrier.wait()
            if target.op == self.broken:
                raise RuntimeError(f"stand-in failure in {target.op}'s test stage")
            return self.real(target, argv, log_path, *args, **kwargs)
        finally:
            with self.lock:
                self.under_way.discard(target.op)


@pytest.fixture(autouse=True)
def _few_dry_run_cases(monkeypatch):
    monkeypatch.setenv("AGENT_D_DRYRUN_MAX_CASES", "3")  # the dry run is not what these tests are about


def _port(repo: Path, out: Path, cargo_target_dir: Path, test_jobs: int, lines: list[str]):
    options = PortOptions(
        repo=repo,
        base="HEAD~1",
        out_root=out,
        cargo_target_dir=cargo_target_dir,
        test_jobs=test_jobs,
        echo=lines.append,
        answer=lambda text: None,
    )
    return port(options)


def _stages(result) -> dict[str, str]:
    return {s.name: s.status for s in result.stages}


def _assert_own_reports(out: Path, op: str, verdict_line: str) -> None:
    block = (out / op / "validator_block.txt").read_text()
    assert block.rstrip().endswith(verdict_line), block
    decisions = (out / op / "reports" / "agent_logs" / "agent_d.md").read_text()
    assert "stage build: ok" in decisions and "1 build for 2 kernels" in decisions, decisions


def test_two_kernels_are_tested_side_by_side_with_two_test_jobs(
    repo, tmp_path, cargo_target_dir, monkeypatch
):
    runs = PytestRuns(meet=True)
    monkeypatch.setattr(testrun, "run", runs)
    lines: list[str] = []
    results = _port(repo, tmp_path / "out", cargo_target_dir, 2, lines)
    # both at the barrier together; else each kernel's stages say what kept one of them away
    assert runs.most_at_once == 2, [(r.target.op, r.verdict.line, _stages(r)) for r in results]
    assert [r.target.op for r in results] == OPS
    for result in results:
        op = result.target.op
        # no GPU here: the tests ran and the verdict says the machine proves nothing (not a broken barrier)
        assert (result.verdict.kind, result.verdict.klass) == (VerdictKind.BLOCKED, "env"), result.verdict
        # pytest ran on a machine that cannot run it: the stage says blocked, as the verdict does
        assert _stages(result)["test"] == "blocked" and _stages(result)["classify"] == "ok"
        assert result.tests is not None and Path(result.tests.log_path).parent == tmp_path / "out" / op
        _assert_own_reports(tmp_path / "out", op, result.verdict.line)
    # every line of the test stage says whose it is; the verdict lines come after, in the kernels' order
    assert "[agent-d] test silu_and_mul, swiglu: 2 at a time, each line tagged [<kernel>]" in lines
    for op in OPS:
        mine = [
            TEST_STAGE_LINE.match(ln.removeprefix(f"[{op}] ")) for ln in lines if ln.startswith(f"[{op}] ")
        ]
        assert {m[1] for m in mine if m} == {"abi smoke", "interpreter", "test", "classify"}, lines
    assert not [ln for ln in lines if TEST_STAGE_LINE.match(ln)]  # no stage line of the tests untagged
    verdicts = [f"[agent-d] {r.target.op}: {r.verdict.headline}: {r.verdict.reason}" for r in results]
    assert [ln for ln in lines if ln in verdicts] == verdicts


def test_with_one_test_job_the_kernels_are_tested_one_after_the_other(repo, tmp_path, cargo_target_dir,
                                                                      monkeypatch):  # fmt: skip
    runs = PytestRuns()
    monkeypatch.setattr(testrun, "run", runs)
    lines: list[str] = []
    results = _port(repo, tmp_path / "out", cargo_target_dir, 1, lines)
    assert runs.started[: len(OPS)] == OPS
    assert runs.most_at_once == 1  # no pytest run began before the one before it had ended
    assert [r.target.op for r in results] == OPS
    for result in results:
        assert (result.verdict.kind, result.verdict.klass) == (VerdictKind.BLOCKED, "env"), result.verdict
        _assert_own_reports(tmp_path / "out", result.target.op, result.verdict.line)
    headers = [f"[agent-d] test {op}" for op in OPS]  # each kernel's lines follow its own header
    assert [ln for ln in lines if ln in headers] == headers
    assert not any(ln.startswith("[silu_and_mul]") for ln in lines)  # untagged, as before


def test_a_kernel_whose_test_stage_breaks_side_by_side_gets_its_own_verdict(repo, tmp_path, cargo_target_dir,
                                                                            monkeypatch):  # fmt: skip
    runs = PytestRuns(meet=True, broken="swiglu")
    monkeypatch.setattr(testrun, "run", runs)
    lines: list[str] = []
    results = _port(repo, tmp_path / "out", cargo_target_dir, 2, lines)
    assert runs.most_at_once == 2
    silu_and_mul, swiglu = results
    assert (swiglu.verdict.kind, swiglu.verdict.klass) == (VerdictKind.BLOCKED, "host")
    assert "internal error in agent-d: RuntimeError: stand-in failure in swiglu" in swiglu.verdict.reason
    assert _stages(swiglu)["test"] == "failed" and "classify" not in _stages(swiglu)
    decisions = (tmp_path / "out" / "swiglu" / "reports" / "agent_logs" / "agent_d.md").read_text()
    assert "stopped by:" in decisions and "RuntimeError: stand-in failure" in decisions
    # the other kernel, tested at the same time, is untouched by it
    assert (silu_and_mul.verdict.kind, silu_and_mul.verdict.klass) == (VerdictKind.BLOCKED, "env")
    assert _stages(silu_and_mul)["test"] == "blocked" and _stages(silu_and_mul)["classify"] == "ok"
    assert "stand-in failure" not in (tmp_path / "out" / "silu_and_mul" / "validator_block.txt").read_text()
    _assert_own_reports(tmp_path / "out", "silu_and_mul", silu_and_mul.verdict.line)
