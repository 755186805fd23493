"""One verdict everywhere: for every verdict class, correctness.md, the decision log, the validator
block, the returned VERDICT line, the PR review, the check title and its conclusion say the same
thing; on a BLOCKED run the validator names the checks it could not run instead of failing them.

Each case writes the real reports over a finished port folder (tests/validator_support.py),
removes what a run stopped at that point would never have produced, runs the built-in validator,
and renders the GitHub texts from the same verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from validator_support import OP, RAW_LOG, make_port, needs_cc

from bot.classify import classify
from bot.classify.types import Verdict, VerdictKind
from bot.github import render
from bot.github.artifact import KernelVerdict
from bot.report import report, validator
from bot.report.types import PortResult
from bot.targets.types import Target
from bot.testing.types import TestResult

FAILED_LOG = RAW_LOG.replace("PASSED [100%]", "FAILED [100%]").replace("1 passed", "1 failed")
CRS = "src/tilegym/ops/cutile_rs"

# (kind, class, reason, what the run never produced, pytest exit)
CASES = [
    ("ALL_PASS", "", "1 passed, 0 skipped (cited)", [], 0),
    ("FAIL", "host", "the launcher rejected its arguments (rc=-6)", [], 1),
    ("FAIL", "kernel", "numeric mismatch (Mismatched elements: 3 / 64)", [], 1),
    ("BLOCKED", "env", "no CUDA GPU on this machine", ["raw log"], None),
    ("BLOCKED", "kernel", "kernel.rs cannot be launched", ["raw log"], None),
    ("BLOCKED", "host", "cannot infer: python.alloc", ["raw log", "ffi.rs", "wrapper", "library"], None),
]
HEADLINES = {
    ("ALL_PASS", ""): "ALL_PASS",
    ("FAIL", "host"): "FAIL (fail_class: host)",
    ("FAIL", "kernel"): "FAIL (fail_class: kernel)",
    ("BLOCKED", "env"): "BLOCKED (block_class: env)",
    ("BLOCKED", "kernel"): "BLOCKED (block_class: kernel)",
    ("BLOCKED", "host"): "BLOCKED (block_class: host)",
}


def _run_stopped(tmp_path: Path, kind: str, klass: str, reason: str, never: list[str], rc: int | None):
    out_dir, repo, so = make_port(tmp_path)
    raw = out_dir / "correctness_cutile_rs.txt"
    if kind == "FAIL":
        raw.write_text(FAILED_LOG)
    produced = {
        "raw log": raw,
        "ffi.rs": out_dir / "ffi.rs",
        "wrapper": repo / CRS / f"{OP}.py",
        "library": so,
    }
    for name in never:
        produced[name].unlink()
        so = None if name == "library" else so
    tests = None
    if rc is not None:
        failed = int(kind == "FAIL")
        tests = TestResult(True, "python -m pytest ...", rc, str(raw), passed=1 - failed, failed=failed)
    result = PortResult(
        target=Target(repo, OP),
        verdict=Verdict(VerdictKind(kind), klass, reason),
        stages=[],
        out_dir=str(out_dir),
        tests=tests,
    )
    report.write_reports(out_dir, result, [], raw if raw.is_file() else None)
    run = validator.validate(out_dir, OP, repo, so)
    result.verdict = classify.after_validator(result.verdict, run.exit_code, "")
    returned = report.returned_text("python -m pytest ...", rc, [run], result.verdict)
    return out_dir, run, returned, result


@needs_cc
@pytest.mark.parametrize(("kind", "klass", "reason", "never", "rc"), CASES, ids=lambda c: str(c))
def test_every_text_tells_the_same_verdict(tmp_path, kind, klass, reason, never, rc):
    out_dir, run, returned, result = _run_stopped(tmp_path, kind, klass, reason, never, rc)
    headline = HEADLINES[(kind, klass)]
    assert result.verdict.headline == headline  # the validator did not change the verdict

    correctness = (out_dir / "reports" / "correctness.md").read_text()
    # the spec allows only these two first lines; the body states the final verdict in the shared words
    assert correctness.splitlines()[0] == ("VERDICT: ALL_PASS" if kind == "ALL_PASS" else "VERDICT: FAIL")
    assert f"Final verdict: **{headline}**: {reason}" in correctness
    decision_log = (out_dir / "reports" / "agent_d.md").read_text()
    assert f"VERDICT: {kind}" in decision_log

    assert returned.rstrip().splitlines()[-1] == f"VERDICT: {kind}"
    block_tail = run.output.rstrip().splitlines()[-1]
    if kind == "BLOCKED":
        assert [ln for ln in run.output.splitlines() if ln.startswith("FAIL")] == []
        assert block_tail == (
            f"NOT RUN: {len(never)} check(s): the port was {headline} before their inputs existed"
        )
        assert run.exit_code == 3 and "exit=3" in returned
        not_run = [ln for ln in run.output.splitlines() if ln.startswith("NOT RUN: ") and ln != block_tail]
        assert len(not_run) == len(never)
        assert "correctness_cutile_rs.txt missing (pytest did not run)" in not_run[0]
    else:
        assert (block_tail, run.exit_code) == ("PASS", 0)

    verdicts = {OP: KernelVerdict(kind, klass, reason, returned)}
    assert render.check_title(verdicts) == f"VERDICT: {headline}"
    assert render.CONCLUSION[kind] == ("success" if kind == "ALL_PASS" else "failure")
    review = render.review_body([_artifact(verdicts)], "c" * 40, "t" * 40, [])
    assert review.splitlines()[0] == f"## agent-d: VERDICT: {headline}"
    assert f"| `{OP}` | {headline} | {render.escape_md(reason)} |" in review  # PR-derived text is inert
    assert review.splitlines()[-1] == f"VERDICT: {kind}"


def _artifact(verdicts: dict[str, KernelVerdict]):
    from bot.github.artifact import Artifact

    return Artifact(
        repo="o/r",
        head_sha="c" * 40,
        base_tree="b" * 40,
        tested_tree="t" * 40,
        ops=sorted(verdicts),
        verdicts=verdicts,
        patch="",
        changed_paths=[],
    )


@needs_cc
def test_a_wrong_file_still_fails_a_blocked_run(tmp_path):
    """BLOCKED only excuses what was never produced: a present but broken ffi.rs is still a FAIL."""
    out_dir, run, _, _ = _run_stopped(tmp_path, "BLOCKED", "env", "no CUDA GPU", ["raw log"], None)
    (out_dir / "ffi.rs").write_text('#[no_mangle]\npub extern "C" fn cutile_demo_op() -> i32 { 0 }\n')
    run = validator.validate(out_dir, OP, out_dir.parent.parent / "repo", None)
    assert run.exit_code == 1
    assert run.output.rstrip().splitlines()[-1].startswith("FAIL: ")
    assert "check(s) not run" in run.output.rstrip().splitlines()[-1]


def test_several_kernels_one_title_with_the_deciding_classes():
    verdicts = {
        "a": KernelVerdict("BLOCKED", "env", "no GPU"),
        "b": KernelVerdict("FAIL", "host", "rc=-6"),
        "c": KernelVerdict("BLOCKED", "host", "missing facts"),
    }
    assert render.check_title(verdicts) == "VERDICT: BLOCKED (block_class: env, host)"
    assert render.check_title({"b": verdicts["b"]}) == "VERDICT: FAIL (fail_class: host)"
    assert render.check_title({}) == "VERDICT: BLOCKED"
