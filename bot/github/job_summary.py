"""The Actions job summary (``$GITHUB_STEP_SUMMARY``): each command's outcome at a glance on the
workflow run's page, the verdict and perf tables where they exist.

The summary is Markdown GitHub renders; everything in it is written by agent-d or escaped by
``render``, and redacted like every other text agent-d writes. Outside Actions it goes nowhere.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from bot.github import render, render_perf
from bot.github.artifact import Artifact
from bot.github.redact import redact

log = logging.getLogger(__name__)


def wanted(env: Mapping[str, str] | None = None) -> str:
    """The summary file Actions gave this step, or "" (not in Actions: no summary)."""
    return (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY", "")


def append(markdown: str, env: Mapping[str, str] | None = None) -> None:
    """Add ``markdown`` to the job summary; a summary that cannot be written never fails the job."""
    path = wanted(env)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(redact(markdown).rstrip() + "\n\n")
    except OSError as exc:
        log.warning("the job summary %s could not be written: %s", path, exc.strerror or exc)


def dispatch(run: bool, reason: str, kernels: list[str], check_run_id: int | None) -> str:
    lines = ["## agent-d dispatch", ""]
    if run:
        listed = ", ".join(f"`{k}`" for k in kernels) or "none"
        lines.append(f"GPU jobs queued for {listed} (check run {check_run_id}).")
    else:
        lines.append("No GPU job runs.")
    lines.append(f"\n{render.escape_md(reason)}" if reason else "")
    return "\n".join(lines)


def port_job(artifacts: list[Artifact]) -> str:
    verdicts = render.merged_verdicts(artifacts)
    lines = [f"## agent-d port: {render.check_title(verdicts)}", "", render.verdict_table(verdicts)]
    perf = render_perf.table(render_perf.merged(artifacts))
    return "\n".join(lines + (["", "### Performance", "", *perf] if len(perf) > 2 else []))


def finalize(conclusion: str, title: str, tables: list[str], notes: list[str]) -> str:
    lines = [f"## agent-d finalize: {title} ({conclusion})", "", *tables]
    return "\n".join(lines + (["", *(f"- {note}" for note in notes)] if notes else []))


def conclude(check_run_id: int, conclusion: str, why: str) -> str:
    return f"## agent-d conclude\n\nCheck run {check_run_id}: {conclusion}. {why}"
