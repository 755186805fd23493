"""Stage E's files (skill ``agents/agent_e.md``, "Output Files") in the kernel's out folder.

- ``reports/performance.md``: first line ``VERDICT: DONE`` or ``VERDICT: INVESTIGATE`` (a BLOCKED
  run writes INVESTIGATE there, the only other allowed word, and says BLOCKED right below), the
  per-config table, the geomeans per dtype and overall, exactly one ``geomean_ratio=X.XXXX`` line
  (none when there is no ratio: nothing to put in it), ``Geo-mean ratio:`` and ``Severity:``;
- ``perf_cutile_rs.txt``, ``baseline_perf_cutile.txt`` and ``perf_pytorch.txt``: each backend's
  clean validator input, one ``Performance Test Results`` section per case that produced a median
  (its node id, ``PASSED``, the record as pytest wrote it), no failure text;
- ``reports/agent_logs/perf_investigation.log``: every case without a median and why;
- ``reports/agent_logs/agent_e.md`` and ``reports/agent_e.md``: the decision log, the commands,
  the ``<PERF_LOG>`` block and the validator block.

The raw pytest log is ``reports/agent_logs/perf_cutile_rs.full.txt`` (bot/perf/run.py), the JUnit
XML with the records ``perf_records.xml``.
"""

from __future__ import annotations

from pathlib import Path

from bot.perf.result import CUTILE, CUTILE_RS, PYTORCH, PerfResult, Row
from bot.perf.summarise import dtype_label

PERF_LOGS = {CUTILE_RS: "perf_cutile_rs.txt", CUTILE: "baseline_perf_cutile.txt", PYTORCH: "perf_pytorch.txt"}
SECTION = "Performance Test Results"
INVESTIGATION = Path("reports") / "agent_logs" / "perf_investigation.log"


def perf_log(result: PerfResult, backend: str) -> str:
    """One backend's validator input: a section per case with a median, nothing else."""
    out = []
    for case in result.cases:
        if case.backend == backend and case.median_ms is not None:
            out += [
                f"{SECTION}: {case.nodeid}",
                f"{case.nodeid} PASSED",
                f"benchmark: {_one_line(case.record)}",
                "",
            ]
    return "\n".join(out)


def investigation_log(result: PerfResult) -> str:
    lines = list(result.unmeasured)
    failures = [c for c in result.cases if c.outcome in ("failed", "error") and c.message]
    lines += [
        f"{c.nodeid}: {c.outcome}: {c.message}" for c in failures if not any(c.nodeid in u for u in lines)
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def _ms(x: float | None) -> str:
    return "NA" if x is None else f"{x:.4g}"


def _x(x: float | None) -> str:
    return "NA" if x is None else f"{x:.2f}x"


def _row_verdict(row: Row) -> str:
    if row.vs_cutile is None:
        return "NA"
    return "PASS" if row.vs_cutile <= 1.05 else "INVESTIGATE"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def performance_md(result: PerfResult, op: str) -> str:
    first = "DONE" if result.verdict == "DONE" else "INVESTIGATE"
    lines = [f"VERDICT: {first}", "", f"## Performance Results: {op}", ""]
    if result.verdict in ("BLOCKED", "NOT_RUN"):
        lines += [
            f"Final verdict: **{result.verdict}**: {result.reason}. (performance.md may only start with DONE "
            "or INVESTIGATE; without usable data the run is not DONE.)",
            "",
        ]
    else:
        lines += [f"Final verdict: **{result.verdict}** ({result.severity}): {result.reason}.", ""]
    if result.command:
        lines += [f"Command: `{result.command}` (exit {_exit(result.exit_code)})", ""]
    lines += [
        "Times: the CUPTI median of each case's forward pass in ms, from TileGym's own benchmark record "
        '(`record_property("benchmark", ...)` of test_perf). Baseline: the cuTile backend on the same '
        "configs; PyTorch for reference (it gates nothing).",
        "",
        "| Config | dtype | cuTile (ms) | cutile-rs (ms) | PyTorch (ms) | cutile-rs / cuTile | cutile-rs / PyTorch | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result.rows:
        lines.append(
            f"| {_cell(row.config) or '-'} | {dtype_label(row.dtype)} | {_ms(row.ms[CUTILE])} | "
            f"{_ms(row.ms[CUTILE_RS])} | {_ms(row.ms[PYTORCH])} | {_x(row.vs_cutile)} | {_x(row.vs_pytorch)} | "
            f"{_row_verdict(row)} |"
        )
    lines += ["", *geomean_table(result), ""]
    if result.geomean_ratio is not None:
        lines += [f"geomean_ratio={result.geomean_ratio:.4f}", f"Geo-mean ratio: {result.geomean_ratio:.2f}x"]
    lines += [f"Severity: {result.severity}", ""]
    lines += _sections(result)
    return "\n".join(lines).rstrip("\n") + "\n"


def geomean_table(result: PerfResult) -> list[str]:
    rows = [
        "| dtype | configs | geomean cutile-rs / cuTile | geomean cutile-rs / PyTorch |",
        "|---|---|---|---|",
    ]
    for g in [*result.by_dtype, *([result.overall] if result.overall else [])]:
        rows.append(f"| {dtype_label(g.dtype)} | {g.configs} | {_gm(g.vs_cutile)} | {_gm(g.vs_pytorch)} |")
    return rows


def _gm(x: float | None) -> str:
    return "NA" if x is None else f"{x:.4f}"


def _sections(result: PerfResult) -> list[str]:
    out: list[str] = []
    if result.slowest:
        out += ["## Slowest configs (cutile-rs / cuTile above 1.05)", ""]
        out += [f"- {_cell(r.config)}: {_x(r.vs_cutile)}" for r in result.slowest] + [""]
    if result.host_cause:
        out += ["## Host-side cause", "", result.host_cause, ""]
    if result.kernel_cause:
        out += ["## The kernel's own time", "", result.kernel_cause, ""]
    if result.unmeasured:
        out += ["## Cases without a median", "", *[f"- {_cell(u)}" for u in result.unmeasured], ""]
    if result.notes:
        out += ["## Notes", "", *[f"- {n}" for n in result.notes], ""]
    return out


def perf_log_block(result: PerfResult, out_dir: Path) -> str:
    """``<PERF_LOG>`` of agent_e.md's closing contract."""
    ratio = "NA" if result.geomean_ratio is None else f"{result.geomean_ratio:.2f}x"
    return "\n".join(
        [
            "<PERF_LOG>",
            f"geomean_ratio={ratio}",
            f"severity={result.severity}",
            f"report={out_dir / 'reports' / 'performance.md'}",
            f"perf_log={out_dir / PERF_LOGS[CUTILE_RS]}",
            f"investigation_log={out_dir / INVESTIGATION}",
            "</PERF_LOG>",
        ]
    )


def agent_log(result: PerfResult, op: str, out_dir: Path, validator_block: str) -> str:
    lines = [
        f"# Agent E (agent-d perf stage): {op}",
        "",
        f"VERDICT: {result.verdict} ({result.severity}): {result.reason}",
        "",
        f"pytest: `{result.command or '(not run)'}`",
        f"pytest exit: {_exit(result.exit_code)}",
        f"raw log: {out_dir / 'reports' / 'agent_logs' / 'perf_cutile_rs.full.txt'}",
        f"records (JUnit XML): {out_dir / 'perf_records.xml'}",
        *[f"{backend} records: {out_dir / name}" for backend, name in PERF_LOGS.items()],
        "",
        *geomean_table(result),
        "",
    ]
    lines += [f"- {n}" for n in result.notes]
    lines += ["", perf_log_block(result, out_dir), validator_block, f"VERDICT: {result.verdict}"]
    return "\n".join(lines) + "\n"


def write(result: PerfResult, op: str, out_dir: Path) -> None:
    """Every file but the agent logs (those carry the validators' output: :func:`write_agent_log`)."""
    reports = out_dir / "reports"
    (reports / "agent_logs").mkdir(parents=True, exist_ok=True)
    (reports / "performance.md").write_text(performance_md(result, op), encoding="utf-8")
    for backend, name in PERF_LOGS.items():
        (out_dir / name).write_text(perf_log(result, backend), encoding="utf-8")
    (out_dir / INVESTIGATION).write_text(investigation_log(result), encoding="utf-8")


def write_agent_log(result: PerfResult, op: str, out_dir: Path, validator_block: str) -> None:
    text = agent_log(result, op, out_dir, validator_block)
    (out_dir / "reports" / "agent_logs" / "agent_e.md").write_text(text, encoding="utf-8")
    (out_dir / "reports" / "agent_e.md").write_text(text, encoding="utf-8")


def _exit(code: int | None) -> str:
    return "not-run" if code is None else str(code)


def _one_line(text: str) -> str:
    return " ".join(text.split())
