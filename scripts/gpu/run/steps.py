"""A step of the GPU run (a command with its time limit) and the readers of its output, shared by
the op tests (``run.device``) and the fault corpus (``run.faults``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def log(msg: str) -> None:
    print(f"[gpu_proof] {msg}", flush=True)


@dataclass
class Step:
    kind: str  # "pytest" | "verify" | "bench" | "perf" (verify --perf) | "review" (verify, two orders)
    op: str
    tree: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    log: str
    weight: float = 1.0  # share of the time budget
    ops: list[str] = field(default_factory=list)
    group: int = 0  # steps of one group run at the same time (an op's two correctness runs)


def run_step(step: Step, base_env: dict[str, str], timeout: float) -> dict:
    env = dict(os.environ)
    env.update(base_env)
    env.update(step.env)
    argv = [_with_timeout(a, timeout) for a in step.argv]
    Path(step.log).parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    timed_out = False
    with open(step.log, "w", encoding="utf-8") as logf:
        logf.write(f"$ (cd {step.cwd}) {' '.join(argv)}\n")
        logf.flush()
        proc = subprocess.Popen(
            argv, cwd=step.cwd, env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            code = None
            logf.write(f"\n[gpu_proof] timed out after {timeout:.0f}s: stopped\n")
    return {"exit": code, "timed_out": timed_out, "seconds": round(time.monotonic() - start, 1)}


_SHARE = re.compile(r"\{timeout(?::([0-9.]+))?\}")


def _with_timeout(arg: str, timeout: float) -> str:
    """``{timeout}``: the step's seconds less a margin to write its results; ``{timeout:0.4}``: that
    share of them (a command with two limits of its own, the perf stage's verify)."""
    return _SHARE.sub(lambda m: str(int(max((timeout - 15) * float(m.group(1) or 1), 10))), arg)


def parse_pytest(text: str) -> dict:
    """Counts, first failure and outcomes by test id, read by agent-d's own log reader
    (``bot.testresults.log``), so both trees' runs and ``agent-d verify`` read logs by one rule."""
    from bot.testresults.log import parse_log

    parsed = parse_log(text)
    first = next((c for c in parsed.cases if c.outcome in ("failed", "error")), None)
    first_failure = ""
    if first is not None:
        first_failure = f"{first.outcome.upper()} {first.nodeid}" + (
            f" - {first.message[:200]}" if first.message else ""
        )
    return {
        "passed": parsed.passed,
        "failed": parsed.failed,
        "skipped": parsed.skipped,
        "errors": parsed.errors,
        "summary": re.sub(r" in [\d.]+s\b.*$", "", parsed.summary_line),
        "first_failure": first_failure,
        "outcomes": {c.nodeid: c.outcome.upper() for c in parsed.cases},
        "header": parsed.header,
    }


def parse_verify(text: str) -> dict:
    verdict = re.findall(r"^VERDICT: (ALL_PASS|FAIL|BLOCKED)\s*$", text, re.M)
    summary = None
    idx = text.rfind("\n[\n")
    if idx >= 0:
        try:
            summary = json.loads(text[idx + 1 : text.rfind("]") + 1])
        except json.JSONDecodeError:
            summary = None
    item = summary[0] if summary else {}
    line = next(
        (
            ln
            for ln in reversed(text.splitlines())
            if ln.startswith("[agent-d] ")
            and ": " in ln
            and any(k in ln for k in ("ALL_PASS", "FAIL", "BLOCKED"))
        ),
        "",
    )
    return {
        "verdict": item.get("verdict") or (verdict[-1] if verdict else ""),
        "class": item.get("class", ""),
        "reason": item.get("reason", ""),
        "fix": item.get("fix", ""),
        "line": line,
        "perf": item.get("perf"),  # the perf stage's summary (verify --perf), None when it did not run
    }
