"""Stage "reports + validator" of one kernel, whatever happened before: the reports and the
decision log on disk, the validators run on them, and the answer (validator block, verdict line).

When the reports folder cannot be written (a full or read-only disk), they go to a fresh
temporary folder and the verdict says so; when nothing can be written, the answer is still
printed and says that.
"""

from __future__ import annotations

import tempfile
import traceback
from pathlib import Path

from bot.classify import classify, machine_errors
from bot.errors import Blocked
from bot.job import Job, PortOptions, Run, verdict_of
from bot.report import report
from bot.report.types import PortResult
from bot.report.validator import builtin, repo_script


def finish(job: Job, options: PortOptions) -> None:
    """Reports, validation and the answer, whatever happened: when the reports folder cannot be
    written (a full or read-only disk), they go to a fresh temporary folder and the verdict says
    so; when nothing can be written, the answer is still printed and says that."""
    result, run, target, out_dir = job.result, job.run, job.target, job.out_dir
    test_files = [site.path for site in job.found.test_sites] if job.found is not None else None
    try:
        _write_reports(job, out_dir, test_files)
    except OSError as exc:
        _unwritable(result, run, exc, out_dir)
        reason = result.verdict.reason
        try:
            out_dir = Path(tempfile.mkdtemp(prefix=f"agent-d-{target.op}-")) / target.op
            result.verdict.reason = f"{reason}; the reports are in {out_dir}"
            result.out_dir = str(out_dir)
            _write_reports(job, out_dir, test_files)
        except OSError as again:
            result.verdict.reason = (
                f"{reason}; no reports could be written ({machine_errors.one_line(again)})"
            )
            runs = [builtin.validate(out_dir, target.op, target.repo, None, test_files)]
            result.validator_block = report.validator_block(job.pytest_cmd, job.pytest_rc, runs)
    options.answer(result.validator_block)
    options.answer(result.verdict.line)
    options.echo(f"[agent-d] {target.op}: {result.verdict.headline}: {result.verdict.reason}")
    if result.verdict.fix:
        options.echo(f"[agent-d] {target.op}: fix: {result.verdict.fix}")


def _unwritable(result: PortResult, run: Run, exc: OSError, out_dir: Path) -> None:
    """The verdict for reports that could not be written, keeping what the run had found."""
    run.log.append("writing the reports failed:\n" + traceback.format_exc())
    stop = machine_errors.explain(exc, writing=f"the reports in {out_dir}") or Blocked(
        "env", f"the reports could not be written: {machine_errors.one_line(exc)}"
    )
    before, plain = result.verdict, machine_errors.explain(exc)
    result.verdict = verdict_of(stop)
    if plain is None or before.reason != plain.reason:  # the run found something else first: keep it
        result.verdict.reason += f" (the run itself: {before.headline}: {before.reason})"


def _write_reports(job: Job, out_dir: Path, test_files: list[str] | None) -> None:
    """The reports in ``out_dir`` (the kernel's, or the temporary folder that stands in for it)."""
    result, run, target = job.result, job.run, job.target
    out_dir.mkdir(parents=True, exist_ok=True)
    decision_log = _decision_log(result, run)
    so = Path(result.build.so_path) if result.build and result.build.so_path else None
    log_src = out_dir / "correctness_cutile_rs.txt"
    report.write_reports(out_dir, result, decision_log, log_src if log_src.is_file() else None)
    runs = [builtin.validate(out_dir, target.op, target.repo, so, test_files)]
    upstream = repo_script.run_repo_validator(target.repo, out_dir.parent, target.op, test_files=test_files)
    if upstream is not None:
        runs.append(upstream)
    failing = next((r for r in runs if r.exit_code != 0), None)
    if failing is not None:
        first = next((ln for ln in failing.output.splitlines() if ln.startswith("FAIL")), "validator failed")
        verdict = classify.after_validator(result.verdict, failing.exit_code, first)
        if verdict is not result.verdict:
            result.verdict = verdict
            report.write_reports(
                out_dir, result, _decision_log(result, run), log_src if log_src.is_file() else None
            )
    result.validator_block = report.validator_block(job.pytest_cmd, job.pytest_rc, runs)
    (out_dir / "validator_block.txt").write_text(result.validator_block + "\n" + result.verdict.line + "\n")


def _decision_log(result: PortResult, run: Run) -> list[str]:
    lines = [
        f"stage {s.name}: {s.status} in {s.seconds:.2f}s" + (f" ({s.detail})" if s.detail else "")
        for s in run.stages
    ]
    for difference in result.launch_differences:
        lines.append(f"the contract launches the kernel otherwise than the reference: {difference}")
    if result.tests is not None and result.tests.rest_logs:
        lines.append("after the crash, what remained ran again: " + ", ".join(result.tests.rest_logs))
    if result.changed_files:
        lines.append("files written: " + ", ".join(result.changed_files))
    elif result.plan is not None:
        lines.append("files written: none (the generated files already matched)")
    lines += run.log
    return lines
