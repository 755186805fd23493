"""From cases to the verdict: one row per config the backends share, the ratios, the geometric
means per dtype and overall, and stage E's verdict (skill ``agents/agent_e.md``).

The overall geomean of cutile-rs / cuTile over the configs both measured decides: at most 1.05 is
``DONE``, above is ``INVESTIGATE`` (severity by how far: MILD_GAP to 1.10, MODERATE_GAP to 1.50,
LARGE_GAP beyond). ``DONE`` also needs every selected cutile-rs and cuTile case to have produced a
median: a failed case, a passed one without a record, or one the run's deadline never reached
makes the run ``INVESTIGATE``
(MISSING_DATA when the geomean itself passes). No shared config at all is ``BLOCKED``: nothing
to compare. A slow single row is listed, never a verdict of its own. PyTorch is measured beside
them and its ratio shown; it gates nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from bot.perf.result import (
    CUTILE,
    CUTILE_RS,
    DONE_AT_MOST,
    NO_DTYPE,
    PYTORCH,
    Case,
    Geomean,
    PerfResult,
    Row,
)

SLOWEST_SHOWN = 5
_GATED = (CUTILE_RS, CUTILE)  # a case of these without a median keeps the run from DONE


def rows(cases: Iterable[Case]) -> list[Row]:
    """One row per config a cutile-rs case ran, in the order the cutile-rs cases came."""
    by_config: dict[str, Row] = {}
    for case in cases:
        if case.backend not in (CUTILE_RS, CUTILE, PYTORCH):
            continue
        row = by_config.get(case.config)
        if row is None:
            row = by_config[case.config] = Row(
                case.config, case.dtype, {b: None for b in (CUTILE_RS, CUTILE, PYTORCH)}
            )
        if case.median_ms is not None:
            row.ms[case.backend] = case.median_ms
    ported = {c.config for c in cases if c.backend == CUTILE_RS}
    out = [r for r in by_config.values() if r.config in ported]
    for row in out:
        row.vs_cutile = _ratio(row.ms[CUTILE_RS], row.ms[CUTILE])
        row.vs_pytorch = _ratio(row.ms[CUTILE_RS], row.ms[PYTORCH])
    return out


def geomeans(table: list[Row]) -> tuple[list[Geomean], Geomean]:
    """The geomean of each ratio per dtype (in the order the dtypes first come) and over every row."""
    dtypes = list(dict.fromkeys(r.dtype for r in table))
    per = [_geomean(d, [r for r in table if r.dtype == d]) for d in dtypes]
    return per, _geomean("all", table)


def verdict(cases: list[Case], overall: Geomean) -> tuple[str, str, str]:
    """(verdict, severity, one-line reason)."""
    missing = [
        c
        for c in cases
        if c.backend in _GATED
        and c.outcome in ("passed", "failed", "error", "not run")
        and c.median_ms is None
    ]
    ratio = overall.vs_cutile
    if ratio is None:
        ran = sum(1 for c in cases if c.backend == CUTILE_RS and c.median_ms is not None)
        why = (
            "no test_perf case was selected"
            if not cases
            else f"no config has both a cutile-rs and a cuTile median ({ran} cutile-rs median(s))"
        )
        return "BLOCKED", "MISSING_DATA", why
    said = f"geomean cutile-rs / cuTile {ratio:.4f} over {overall.configs} config(s)"
    gap = _severity(ratio)
    if missing:
        said += f"; {len(missing)} selected case(s) gave no median"
    if gap == "DONE" and not missing:
        return "DONE", "DONE", f"{said} (at most {DONE_AT_MOST})"
    if gap == "DONE":
        return "INVESTIGATE", "MISSING_DATA", said
    return "INVESTIGATE", gap, f"{said}, above {DONE_AT_MOST}"


def slowest(table: list[Row]) -> list[Row]:
    """The rows past the gate, slowest first (for the report text and the check's title)."""
    slow = [r for r in table if r.vs_cutile is not None and r.vs_cutile > DONE_AT_MOST]
    return sorted(slow, key=lambda r: -(r.vs_cutile or 0.0))[:SLOWEST_SHOWN]


def unmeasured(cases: list[Case]) -> list[str]:
    """``<nodeid>: <why>`` for every case that gave no median (skips included, with their reason)."""
    out = []
    for case in cases:
        if case.median_ms is not None:
            continue
        why = case.message or ("no benchmark record" if case.outcome == "passed" else "")
        out.append(f"{case.nodeid}: {case.outcome}" + (f": {why}" if why else ""))
    return out


def summarise(cases: list[Case], **fields) -> PerfResult:
    """The whole result of a run's ``cases``; ``fields``: the command, exit code, notes, ..."""
    table = rows(cases)
    per, overall = geomeans(table)
    kind, severity, reason = verdict(cases, overall)
    return PerfResult(
        kind,
        severity,
        reason,
        cases=cases,
        rows=table,
        by_dtype=per,
        overall=overall,
        unmeasured=unmeasured(cases),
        slowest=slowest(table) if kind == "INVESTIGATE" else [],
        **fields,
    )


def _severity(ratio: float) -> str:
    if ratio <= DONE_AT_MOST:
        return "DONE"
    if ratio <= 1.10:
        return "MILD_GAP"
    if ratio <= 1.50:
        return "MODERATE_GAP"
    return "LARGE_GAP"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _geomean(dtype: str, table: list[Row]) -> Geomean:
    vs_cutile = [r.vs_cutile for r in table if r.vs_cutile is not None]
    vs_pytorch = [r.vs_pytorch for r in table if r.vs_pytorch is not None]
    return Geomean(dtype, len(vs_cutile), _gm(vs_cutile), _gm(vs_pytorch), len(vs_pytorch))


def _gm(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def dtype_label(dtype: str) -> str:
    return "-" if dtype == NO_DTYPE else dtype
