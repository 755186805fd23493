"""``run --stage perf``: the perf stage (TileGym's stage E) of each agent-d-generated op on tree B.

One ``agent-d verify --kernel <op> --perf`` per op, one op at a time (the timings must not share
the GPU): its correctness run is the gate (stage E runs after ALL_PASS), then TileGym's own
``test_perf`` for cutile-rs, cuTile and PyTorch. The step's time is split between them: the gate's
share (``--gate-share``, 0.3 by default) for the correctness run, the rest less a margin for the
perf stage, capped at ``--perf-configs`` configs when given. ``results.json`` gets each op's ``perf``
entry (the summary of ``verify --json``, with the gate's verdict, the step's exit and time);
the reports (``performance.md``, the perf logs, the JUnit XML with the records) travel in
``logs.tar.gz`` under ``agent_d_reports/<op>/``. It works on a bundle unpacked by an earlier call
of the same warm machine.
"""

from __future__ import annotations

import time
from pathlib import Path

from gpu.run.steps import Step, parse_verify

GATE_SHARE, MARGIN_SHARE = 0.3, 0.05  # of the step's seconds: the correctness gate; left to write results


def perf_steps(
    manifest: dict,
    root: Path,
    site: Path,
    ops: list[str],
    python: str,
    out_logs: Path,
    configs: int | None = None,
    gate_share: float = GATE_SHARE,
) -> list[Step]:
    """One verify-with-perf step per generated op, each its own group (they run one after the other);
    ``configs``: agent-d's ``--perf-configs`` (None: its default)."""
    if not 0.05 <= gate_share <= 0.9:
        raise ValueError(f"--gate-share {gate_share}: give a share from 0.05 to 0.9")
    perf_share = round(1.0 - gate_share - MARGIN_SHARE, 3)
    b = root / "payload" / "agent_d"
    reader = root / "payload" / "reader" / "kernel-reader"
    steps = []
    for op in ops:
        if manifest["ops"][op]["pack"]["status"] != "generated":
            continue
        argv = [python, "-m", "bot.cli", "verify", "--repo", str(b), "--kernel", op, "--out",
                str(b / "cutile_kernel_out"), "--python", python, "--test-timeout", f"{{timeout:{gate_share}}}",
                "--perf", "--perf-timeout", f"{{timeout:{perf_share}}}", "--json"]  # fmt: skip
        if configs is not None:
            argv[-1:-1] = ["--perf-configs", str(configs)]
        env = {"PYTHONPATH": str(site), "AGENT_D_READER": str(reader)}
        steps.append(Step("perf", op, "agent_d", argv, str(b), env, str(out_logs / f"{op}.agent_d.perf.txt"), 1.0,
                          group=len(steps)))  # fmt: skip
    return steps


def record_perf(step: Step, res: dict, results: dict) -> str:
    """The op's ``perf`` entry from the step's log; the detail line for the run's log."""
    text = Path(step.log).read_text(encoding="utf-8", errors="replace")
    verdict = parse_verify(text)
    summary = verdict.pop("perf", None)
    entry = {
        **(summary or {"verdict": "NOT_RUN", "reason": _why_not(verdict, res)}),
        "gate": verdict,
        "exit": res["exit"],
        "timed_out": res["timed_out"],
        "seconds": res["seconds"],
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    results["ops"][step.op]["perf"] = entry
    ratio = entry.get("geomean_vs_cutile")
    return (
        f"perf {entry['verdict']}"
        + (f" geomean cutile-rs/cuTile {ratio}" if ratio is not None else "")
        + (
            f" (gate: {verdict.get('verdict')} {verdict.get('class')})"
            if verdict.get("verdict") != "ALL_PASS"
            else ""
        )
    )


def _why_not(verdict: dict, res: dict) -> str:
    if res["timed_out"]:
        return "the step ran out of time before verify printed its result"
    if verdict.get("verdict") and verdict["verdict"] != "ALL_PASS":
        return f"the correctness gate is {verdict['verdict']} {verdict.get('class', '')}: {verdict.get('reason', '')}"
    return "verify printed no perf result"


def summary_lines(results: dict) -> list[str]:
    lines = []
    for op, r in results["ops"].items():
        p = r.get("perf")
        if p:
            lines.append(
                f"  perf {op}: {p['verdict']} cutile-rs/cuTile {p.get('geomean_vs_cutile')} "
                f"cutile-rs/PyTorch {p.get('geomean_vs_pytorch')}: {p.get('reason', '')}"
            )
    return lines
