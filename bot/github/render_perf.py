"""The perf stage's text on GitHub: the review's compact table and the ``<check>/perf`` check run.

The summaries come from the artifact (untrusted data, schema-checked by ``read_artifact``); the
config and dtype names in them come from the pull request's test ids, so they are shown as code
spans or escaped, never as markup. Deterministic, like every body agent-d posts.
"""

from __future__ import annotations

from bot.github.artifact import Artifact
from bot.github.render import code_span, escape_md

ORDER = {"DONE": 0, "INVESTIGATE": 1, "BLOCKED": 2}  # the worst measured verdict heads the section
NO_DTYPE = "(not in the test id)"


def merged(artifacts: list[Artifact]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for art in artifacts:
        out.update(art.perf)
    return out


def measured(perfs: dict[str, dict]) -> dict[str, dict]:
    """The kernels the perf stage ran for (not those it never reached or was told not to)."""
    return {op: p for op, p in sorted(perfs.items()) if p["verdict"] in ORDER}


def overall(perfs: dict[str, dict]) -> str:
    return max((p["verdict"] for p in measured(perfs).values()), key=ORDER.__getitem__, default="")


def _ratio(x: float | None) -> str:
    return "NA" if x is None else f"{x:.3f}"


def _dtype(name: str) -> str:
    return "-" if name == NO_DTYPE else code_span(name)


def table(perfs: dict[str, dict]) -> list[str]:
    """Per kernel: a row per dtype and one for all configs (geomeans of cutile-rs / cuTile and / PyTorch)."""
    rows = [
        "| Kernel | dtype | configs | cutile-rs / cuTile | cutile-rs / PyTorch |",
        "|---|---|---|---|---|",
    ]
    for op, p in measured(perfs).items():
        for g in p["by_dtype"]:
            rows.append(
                f"| `{op}` | {_dtype(g['dtype'])} | {g['configs']} | {_ratio(g['vs_cutile'])} | {_ratio(g['vs_pytorch'])} |"
            )
        rows.append(
            f"| `{op}` | **all** | {p['configs']} | **{_ratio(p['geomean_vs_cutile'])}** | "
            f"{_ratio(p['geomean_vs_pytorch'])} |"
        )
    return rows


def kernel_lines(op: str, p: dict) -> list[str]:
    """The verdict, the slowest configs and the host cause of one kernel, one bullet each."""
    lines = [f"- `{op}`: **{p['verdict']}** ({p['severity']}): {escape_md(p['reason'])}"]
    if p["slowest"]:
        slow = ", ".join(f"{code_span(s['config'])} {_ratio(s['vs_cutile'])}" for s in p["slowest"])
        lines.append(f"  - slowest (cutile-rs / cuTile): {slow}")
    if p["host_cause"]:
        lines.append(f"  - host cause: {escape_md(p['host_cause'])}")
    if p["kernel_cause"]:
        lines.append(f"  - {escape_md(p['kernel_cause'])}")
    if p["unmeasured"]:
        lines.append(
            f"  - {p['unmeasured']} selected case(s) gave no median (reports/performance.md names them)"
        )
    return lines


def section(perfs: dict[str, dict]) -> list[str]:
    """The review's perf section ([] when the perf stage ran for no kernel)."""
    ran = measured(perfs)
    if not ran:
        return []
    out = [
        f"### Performance (stage E): {overall(perfs)}",
        "",
        "Geomeans of the CUPTI medians of TileGym's own `test_perf` cases, the same configs on each "
        "backend; `DONE` when cutile-rs / cuTile over all configs is at most 1.05.",
        "",
        *table(perfs),
        "",
    ]
    for op, p in ran.items():
        out += kernel_lines(op, p)
    return out


def check_outcome(perfs: dict[str, dict]) -> tuple[str, str, str] | None:
    """(conclusion, title, summary) of the perf check: ``success`` when every kernel is DONE, else
    ``neutral`` (the check informs, it never fails a pull request), naming the slowest configs."""
    ran = measured(perfs)
    if not ran:
        return None
    verdict = overall(perfs)
    title = f"perf: {verdict}"
    if verdict != "DONE":
        slow = [f"{op} {s['config']} {_ratio(s['vs_cutile'])}" for op, p in ran.items() for s in p["slowest"]]
        why = [f"{op}: {p['reason']}" for op, p in ran.items() if p["verdict"] != "DONE"]
        title += ": " + ("slowest " + ", ".join(slow[:3]) if slow else "; ".join(why))
    summary = "\n".join(section(perfs))
    return ("success" if verdict == "DONE" else "neutral"), " ".join(title.split()), summary
