"""The one line that says a perf gap is the host's, when the evidence says so.

Stage E routes a wrapper-caused gap back to the host stage (agent D); the kernel's own gaps go to
the kernel's author. Two kinds of evidence, both measured, neither guessed:

- the CUPTI record of a cutile-rs case lists more GPU time in copies and fills (``Memcpy``,
  ``Memset``, torch's copy, fill and elementwise kernels) than the same config's cuTile record:
  the wrapper copies or fills what the reference does not, and CUPTI counts it;
- the porter's host contract launches the kernel otherwise than the cuTile reference (tile sizes,
  grid; ``bot/classify/launch_diff.py``), or the launch dry run found a difference;
- the wrapper tunes over fewer configs than the reference (``bot/plan/sweep.py`` cut the list):
  the reference's pick may be one the port never tries. Said as a possibility, last.

A launch the dry run found equal to the reference's, and no extra copy, names no host cause; then,
with the CUPTI records of both kernels, :func:`kernel_cause` says the gap is the kernel's own, with
the two kernels' times where it weighs most: stage E's route to the kernel's author.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bot.perf.result import CUTILE, CUTILE_RS, Case, Kernel

# GPU work that moves or fills memory rather than computing the op
_COPY_OR_FILL = re.compile(r"memcpy|memset|copy|fill|elementwise_kernel|cat_?array", re.IGNORECASE)
NOTICEABLE = 0.05  # extra copy time, as a share of the cutile-rs call, that accounts for a gap


def host_cause(
    cases: list[Case], launch_differences: list[str], dry_run_differences: list[str], sweep_cut: str = ""
) -> str:
    """The host's part in a gap as one line; "" when the evidence names none. ``sweep_cut``: the
    line :func:`bot.plan.sweep.cut_line` gives when the wrapper tunes over fewer configs than the
    reference (the dry run compares first configs only, so it cannot clear the sweep)."""
    copies = _extra_copies(cases)
    if copies:
        return copies
    if launch_differences:
        return f"the porter's host contract launches otherwise than the cuTile reference: {launch_differences[0]}"
    if dry_run_differences:
        return f"the launch differs from the cuTile reference's: {dry_run_differences[0]}"
    return sweep_cut


def _extra_copies(cases: list[Case]) -> str:
    """The config where the wrapper's copies and fills weigh most, when they weigh noticeably."""
    worst: tuple[float, str] | None = None
    for case, reference in _paired(cases):
        total = sum(k.self_us for k in case.kernels)
        ours = _copy_time(case)
        extra = ours - _copy_time(reference)
        if total <= 0 or extra / total < NOTICEABLE:
            continue
        names = sorted({_short(k.name) for k in case.kernels if _COPY_OR_FILL.search(k.name)})
        line = (
            f"the wrapper launches copies or fills the cuTile reference does not: {', '.join(names)} take "
            f"{ours:.1f} of {total:.1f} us per call ({extra / total:.0%} more than cuTile) in {case.config}"
        )
        if worst is None or extra / total > worst[0]:
            worst = (extra / total, line)
    return worst[1] if worst else ""


def _paired(cases: list[Case]) -> Iterator[tuple[Case, Case]]:
    """Each cutile-rs case with CUPTI kernels and the same config's cuTile case that has them."""
    cutile = {c.config: c for c in cases if c.backend == CUTILE and c.kernels}
    for case in cases:
        if case.backend == CUTILE_RS and case.kernels and case.config in cutile:
            yield case, cutile[case.config]


def _copy_time(case: Case) -> float:
    return sum(k.self_us for k in case.kernels if _COPY_OR_FILL.search(k.name))


def _short(name: str) -> str:
    """A kernel's name without its template arguments, for one line."""
    return re.sub(r"<.*", "", name).strip()[:60] or name[:60]


def kernel_cause(cases: list[Case], launch_equal: bool) -> str:
    """The gap as the kernel's own, when the host is cleared: the launch equals the reference's
    (``launch_equal``: the dry run compared it and no contract changed it) and the wrapper adds no
    copy; the config where the port's kernel lags cuTile's most. "" without that evidence."""
    if not launch_equal or _extra_copies(cases):
        return ""
    worst: tuple[float, str] | None = None
    for case, reference in _paired(cases):
        ours, theirs = _main_kernel(case), _main_kernel(reference)
        if ours is None or theirs is None or theirs.self_us <= 0:
            continue
        ratio = ours.self_us / theirs.self_us
        line = (
            "not the host's: the launch equals the cuTile reference's (launch dry run) and the wrapper "
            f"adds no GPU work; the port's kernel {_short(ours.name)} takes {ours.self_us:.1f} us per call "
            f"where cuTile's takes {theirs.self_us:.1f} us ({ratio:.2f}x, {case.config}): a gap in "
            "kernel.rs, for its author"
        )
        if worst is None or ratio > worst[0]:
            worst = (ratio, line)
    return worst[1] if worst and worst[0] > 1.0 else ""


def _main_kernel(case: Case) -> Kernel | None:
    """The kernel that computes the op: the one with the most time that is no copy or fill."""
    compute = [k for k in case.kernels if not _COPY_OR_FILL.search(k.name)]
    return max(compute, key=lambda k: k.self_us, default=None)
