"""``table``'s second document: docs/perf.md, the perf stage's results of ``run --stage perf``.

Per op: stage E's verdict, then per dtype and over all configs the geomean of cutile-rs / cuTile
and of cutile-rs / PyTorch (CUPTI medians of TileGym's own ``test_perf``, forward pass), with the
agent-d commit and the time each op was measured; the slowest configs, the host cause and the
reason where the run was not DONE. Rendered from the same results files as docs/gpu.md, merged
the same way (a later run's op replaces an earlier one's).
"""

from __future__ import annotations

import json
from pathlib import Path

from gpu.tables.gpu_md import NOTES, RENDERED_FROM, _origin, _shown, merge, ran_commit

TITLE = "# agent-d on a GPU: the perf stage (TileGym's stage E)"
NO_DTYPE = "(not in the test id)"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _dtype(name: str) -> str:
    return "-" if name == NO_DTYPE else f"`{name}`"


def rows(op: str, perf: dict, origin: str) -> list[str]:
    verdict = perf.get("verdict", "?")
    out = []
    for g in perf.get("by_dtype", []):
        out.append(f"| {op} | {verdict} | {_dtype(g['dtype'])} | {g['configs']} | {_ratio(g['vs_cutile'])} | "
                   f"{_ratio(g['vs_pytorch'])} | {origin} |")  # fmt: skip
    out.append(f"| {op} | {verdict} | all | {perf.get('configs', 0)} | **{_ratio(perf.get('geomean_vs_cutile'))}** | "
               f"{_ratio(perf.get('geomean_vs_pytorch'))} | {origin} |")  # fmt: skip
    return out


def notes(op: str, perf: dict) -> list[str]:
    out = []
    if perf.get("verdict") != "DONE":
        out.append(
            f"- {op}: {perf.get('verdict')} ({perf.get('severity', '-')}): {_cell(perf.get('reason', ''))}"
        )
    slow = perf.get("slowest") or []
    if slow:
        shown = ", ".join(f"`{_cell(s['config'])}` {_ratio(s['vs_cutile'])}" for s in slow)
        out.append(f"  - slowest: {shown}")
    if perf.get("host_cause"):
        out.append(f"  - host cause: {_cell(perf['host_cause'])}")
    if perf.get("unmeasured"):
        out.append(f"  - {perf['unmeasured']} selected case(s) gave no median")
    return out


def render(results: dict, sources: list[str]) -> str:
    measured = {op: r for op, r in results.get("ops", {}).items() if r.get("perf")}
    out = [TITLE, ""]
    out.append(f"- TileGym commit: `{results.get('tilegym_commit', '?')}`")
    extra = ", ".join(x for x in (results.get("driver") and f"driver {results['driver']}",
                                  results.get("torch") and f"torch {results['torch']}") if x)  # fmt: skip
    out.append(f"- Device: {results.get('device') or 'no GPU'}" + (f" ({extra})" if extra else ""))
    out.append(
        "- Reproduce: on an unpacked bundle (docs/gpu-proof.md), `python3 scripts/gpu_proof.py run --bundle "
        "gpu_bundle --out OUT --stage perf --ops <op> [<op> ...]` on the GPU machine, then `python "
        "scripts/gpu_proof.py table --results OUT/results.json [MORE.json ...] --out docs/gpu.md --perf-out "
        "docs/perf.md`."
    )
    out.append(f"{RENDERED_FROM}{' '.join(f'`{x}`' for x in sources)}")
    out += [
        "",
        "Each op: `agent-d verify --kernel <op> --perf` on agent-d's tree; its correctness run is the gate "
        "(the perf stage runs after `ALL_PASS`), then one pytest run of TileGym's own `test_perf` for the "
        "cutile-rs, cuTile and PyTorch backends, the same configs for each (`CUPTI=1`, `MODE=forward`). "
        "Ratios are geomeans over the configs both backends measured, of the CUPTI median of each case. "
        "Verdict (skill `agents/agent_e.md`): DONE when cutile-rs / cuTile over all configs is at most "
        "1.05 and every selected case gave a median; INVESTIGATE otherwise; BLOCKED without a shared config.",
        "",
        "| op | verdict | dtype | configs | cutile-rs / cuTile | cutile-rs / PyTorch | measured in |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for op, r in measured.items():
        out += rows(
            op, r["perf"], _origin(r.get("perf_from")) if r.get("perf_from") else _single(results, r["perf"])
        )
    body = [line for op, r in measured.items() for line in notes(op, r["perf"])]
    if body:
        out += ["", *body]
    return "\n".join(out) + "\n"


def _single(results: dict, perf: dict) -> str:
    """When and by which agent-d one run's op was measured (a merge of runs says it per op)."""
    return f"{perf.get('finished_utc', results.get('time_utc', '?'))}, agent-d `{ran_commit(results)[:7]}`"


def perf_table(results_paths: list[Path], out_path: Path) -> str:
    """Write ``out_path`` when a results file has perf entries; the ops written, "" when none had any."""
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in results_paths]
    results = merge(runs) if len(runs) > 1 else runs[0]
    measured = [op for op, r in results.get("ops", {}).items() if r.get("perf")]
    if not measured:
        return ""
    text = render(results, [_shown(p) for p in results_paths])
    old = Path(out_path).read_text(encoding="utf-8") if Path(out_path).is_file() else ""
    if NOTES in old:
        text += old[old.index(NOTES) :]
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(text, encoding="utf-8")
    return ", ".join(measured)
