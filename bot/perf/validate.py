"""Stage E's validators on the perf reports: agent-d's own checks, and the checkout's scripts.

:func:`check` reads the out folder the way TileGym's ``validate_agent_e.sh`` and
``validate_perf_log.sh`` do (the performance.md first line, exactly one ``geomean_ratio=`` line,
each perf log present with ``Performance Test Results`` sections and no ``FAILED``, the agent
log), one ``OK:``/``FAIL:``/``WARN:`` line each, then ``---`` and ``PASS`` (exit 0) or
``FAIL: N issue(s)`` (exit 1). :func:`upstream` runs the checkout's own scripts where it has
them: ``validate_perf_log.sh`` on the cutile-rs and the cuTile log, then ``validate_agent_e.sh``.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from bot.perf.reports import PERF_LOGS, SECTION
from bot.perf.result import CUTILE, CUTILE_RS
from bot.report.types import ValidatorRun
from bot.report.validator.repo_script import SKILL, run_script

SCRIPTS = (f".agents/skills/{SKILL}/scripts", f"skills/{SKILL}/scripts")
TIMEOUT_S = 120.0
_VERDICT = re.compile(r"^VERDICT: (DONE|INVESTIGATE)$")
_GEOMEAN = re.compile(r"^geomean_ratio=[0-9]+(\.[0-9]+)?\s*$", re.MULTILINE)


def check(out_dir: Path, op: str) -> ValidatorRun:
    """agent-d's own reading of the perf reports (what validate_agent_e.sh checks)."""
    lines: list[str] = []
    report = out_dir / "reports" / "performance.md"
    text = report.read_text(encoding="utf-8", errors="replace") if report.is_file() else ""
    if not text.strip():
        lines.append("FAIL: performance.md missing or empty")
    else:
        first = text.splitlines()[0]
        lines.append(
            f"OK: verdict line: {first}"
            if _VERDICT.match(first)
            else f"FAIL: first line must be 'VERDICT: DONE' or 'VERDICT: INVESTIGATE', got: {first}"
        )
        found = len(_GEOMEAN.findall(text))
        lines.append(
            "OK: machine-readable geomean line"
            if found == 1
            else f"FAIL: performance.md has {found} 'geomean_ratio=' lines, expected exactly 1"
        )
    for backend in (CUTILE_RS, CUTILE):
        lines.append(_perf_log_line(out_dir / PERF_LOGS[backend], PERF_LOGS[backend]))
    agent = out_dir / "reports" / "agent_logs" / "agent_e.md"
    has_log = agent.is_file() and agent.stat().st_size > 0
    lines.append("OK: agent_e.md log" if has_log else "FAIL: agent_e.md log missing")
    failed = sum(1 for ln in lines if ln.startswith("FAIL"))
    lines += ["---", "PASS" if not failed else f"FAIL: {failed} issue(s)"]
    return ValidatorRun(f"agent-d perf-validate {op}", "\n".join(lines) + "\n", 1 if failed else 0)


def _perf_log_line(path: Path, label: str) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    if text is None:
        return f"FAIL: {label}: file not found"
    if not text:
        return f"FAIL: {label}: file is empty"
    sections = sum(1 for ln in text.splitlines() if SECTION in ln)
    failed = sum(1 for ln in text.splitlines() if "FAILED" in ln)
    if not sections:
        return f"FAIL: {label}: no '{SECTION}' found"
    if failed:
        return f"FAIL: {label}: {failed} test(s) FAILED"
    return f"OK: {label}: {sections} perf records"


def scripts_dir(repo: Path) -> Path | None:
    """The checkout's skill scripts folder holding ``validate_agent_e.sh`` (``.agents/skills`` first)."""
    for rel in SCRIPTS:
        if (repo / rel / "validate_agent_e.sh").is_file():
            return repo / rel
    return None


def upstream(repo: Path, out_dir: Path, op: str, timeout_s: float = TIMEOUT_S) -> list[ValidatorRun]:
    """The checkout's own perf validators on ``out_dir``, in agent_e.md's order; [] when it has none."""
    repo = Path(repo).resolve()
    folder = scripts_dir(repo)
    if folder is None:
        return []
    out_dir = Path(out_dir).resolve()
    runs = []
    for backend, label in ((CUTILE_RS, "perf_cutile_rs"), (CUTILE, "baseline_perf_cutile")):
        if (folder / "validate_perf_log.sh").is_file():
            runs.append(
                _script(
                    repo,
                    folder / "validate_perf_log.sh",
                    [str(out_dir / PERF_LOGS[backend]), label],
                    out_dir,
                    timeout_s,
                )
            )
    runs.append(_script(repo, folder / "validate_agent_e.sh", [op], out_dir, timeout_s))
    return runs


def _script(repo: Path, script: Path, args: list[str], out_dir: Path, timeout_s: float) -> ValidatorRun:
    """``bash <script> <args>`` from the repo root with CUTILE_KERNEL_OUT_ROOT and TILEGYM_PATH set;
    past ``timeout_s`` its process group is killed and the run says so (exit 124)."""
    rel = script.relative_to(repo).as_posix()
    env = dict(os.environ, CUTILE_KERNEL_OUT_ROOT=str(out_dir.parent), TILEGYM_PATH=str(repo))
    shown = " ".join(shlex.quote(a) for a in args)
    command = (
        f"cd {shlex.quote(str(repo))} && CUTILE_KERNEL_OUT_ROOT={shlex.quote(str(out_dir.parent))} "
        f"TILEGYM_PATH={shlex.quote(str(repo))} bash {shlex.quote(rel)} {shown} 2>&1"
    )
    return run_script(["bash", rel, *args], repo, env, command, timeout_s, (out_dir.parent,))
