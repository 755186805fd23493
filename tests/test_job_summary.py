"""The Actions job summary and log groups: written where Actions asks for them, nowhere else,
redacted, and never the reason a job fails."""

from __future__ import annotations

import logging

from bot import progress
from bot.github import job_summary
from bot.github.redact import REDACTOR


def test_the_summary_goes_to_the_file_actions_names_and_is_redacted(tmp_path):
    secret = "ghs_SummaryCanary0123456789abcdefghijkl"
    REDACTOR.add(secret)
    path = tmp_path / "summary.md"
    job_summary.append(
        job_summary.conclude(5, "failure", f"token {secret} leaked?"), {"GITHUB_STEP_SUMMARY": str(path)}
    )
    job_summary.append("## second", {"GITHUB_STEP_SUMMARY": str(path)})
    text = path.read_text()
    assert secret not in text and "token *** leaked?" in text
    assert text.index("## agent-d conclude") < text.index("## second")  # appended, step after step


def test_no_summary_outside_actions_and_an_unwritable_one_only_warns(tmp_path, caplog):
    job_summary.append("## nowhere", {})
    assert list(tmp_path.iterdir()) == []
    caplog.set_level(logging.WARNING)
    job_summary.append("## lost", {"GITHUB_STEP_SUMMARY": str(tmp_path / "no-such-dir" / "summary.md")})
    assert "could not be written" in caplog.text


def test_dispatch_says_what_it_queued_or_why_nothing_runs():
    queued = job_summary.dispatch(True, "kernels added", ["silu_and_mul", "swiglu"], 42)
    assert "GPU jobs queued for `silu_and_mul`, `swiglu` (check run 42)." in queued
    idle = job_summary.dispatch(False, "no kernel.rs added <b>x</b>", [], None)
    assert "No GPU job runs." in idle and "&lt;b&gt;" in idle  # PR-derived text stays inert


def test_stages_fold_into_log_groups_only_in_actions(monkeypatch):
    lines: list[str] = []
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    with progress.group(lines.append, "agent-d build"):
        lines.append("[agent-d] build ok")
    assert lines == ["::group::agent-d build", "[agent-d] build ok", "::endgroup::"]
    lines.clear()
    try:
        with progress.group(lines.append, "agent-d test x"):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert lines == ["::group::agent-d test x", "::endgroup::"]  # closed on the way out, whatever ended it
    monkeypatch.delenv("GITHUB_ACTIONS")
    lines.clear()
    with progress.group(lines.append, "agent-d build"):
        lines.append("x")
    assert lines == ["x"]
