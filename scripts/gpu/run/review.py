"""``run --stage review``: the port job's seconds on the GPU, its CPU checks (the launch dry run, the
device compile) before pytest (``--dry-run-first``, the old order) and beside it (the default),
for the time-to-review table of docs/benchmarks.md.

Per generated op, ``rounds`` pairs of ``agent-d verify``, the two orders alternated so a warming
machine favours neither, one run at a time (the GPU is not shared). Each run's stage seconds are
read from its ``[agent-d] <stage> <status> <seconds>s`` lines; ``results.json`` gets
``review[<op>]``: one entry per run with its order, wall seconds, stages and verdict.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpu.run.steps import Step, parse_verify

ORDERS = ("first", "beside")  # --dry-run-first, then the default
STAGE_LINE = re.compile(
    r"^\[agent-d\] (?P<name>\S.{0,17}?)\s+(?:ok|FAILED|BLOCKED|skipped)\s+(?P<s>[0-9.]+)s", re.M
)


def review_steps(
    manifest: dict, root: Path, site: Path, ops: list[str], python: str, out_logs: Path, rounds: int = 2
) -> list[Step]:
    b = root / "payload" / "agent_d"
    reader = root / "payload" / "reader" / "kernel-reader"
    steps: list[Step] = []
    for op in ops:
        if manifest["ops"][op]["pack"]["status"] != "generated":
            continue
        for n in range(rounds):
            orders = ORDERS if n % 2 == 0 else ORDERS[::-1]
            for order in orders:
                argv = [python, "-m", "bot.cli", "verify", "--repo", str(b), "--kernel", op, "--out",
                        str(b / "cutile_kernel_out"), "--python", python, "--test-timeout", "{timeout}",
                        "--no-perf", "--json"]  # fmt: skip
                if order == "first":
                    argv.insert(-1, "--dry-run-first")
                env = {"PYTHONPATH": str(site), "AGENT_D_READER": str(reader)}
                log = str(out_logs / f"{op}.review.{n}.{order}.txt")
                steps.append(Step("review", op, order, argv, str(b), env, log, 1.0, group=len(steps)))
    return steps


def stage_seconds(text: str) -> dict[str, float]:
    """Each stage's seconds from a verify log (a stage said twice keeps its sum)."""
    seconds: dict[str, float] = {}
    for m in STAGE_LINE.finditer(text):
        name = m["name"].strip()
        seconds[name] = round(seconds.get(name, 0.0) + float(m["s"]), 2)
    return seconds


def record_review(step: Step, res: dict, results: dict) -> str:
    text = Path(step.log).read_text(encoding="utf-8", errors="replace")
    verdict = parse_verify(text)
    entry = {
        "order": step.tree,
        "seconds": res["seconds"],
        "exit": res["exit"],
        "timed_out": res["timed_out"],
        "stages": stage_seconds(text),
        "verdict": {k: verdict.get(k, "") for k in ("verdict", "class", "reason")},
    }
    results.setdefault("review", {}).setdefault(step.op, []).append(entry)
    return f"{entry['verdict']['verdict']} in {res['seconds']} s; stages {entry['stages']}"
