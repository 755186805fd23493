"""A greedy cover: pick items until every value some item names is named once, then fill up.

Two stages choose a subset this way: stage E's configs to measure (``bot/perf/cover.py``) and the
autotune configs a generated wrapper sweeps (``bot/plan/sweep.py``). Both want the same thing from
a list too long to run whole: every value of every axis tried at least once, the rest in the list's
own order, and the same answer for the same list.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

# (candidate index, indices picked so far) -> larger wins a tie on new values
TieBreak = Callable[[int, list[int]], float]


def greedy_cover(
    values: Sequence[frozenset[Hashable]],
    limit: int,
    tiebreak: TieBreak | None = None,
    first: Sequence[int] = (),
    fill: bool = True,
) -> tuple[list[int], set[Hashable]]:
    """Indices of at most ``limit`` items, in list order, and the values none of them names.

    ``first`` are taken before the cover; then the item naming the most values not yet named, ties
    to ``tiebreak`` and then to the earlier item; once all are named (and ``fill``), the next items
    in order."""
    uncovered: set[Hashable] = set().union(*values) if values else set()
    picked: list[int] = []
    for i in first:
        if len(picked) < limit and i not in picked:
            picked.append(i)
            uncovered -= values[i]
    while uncovered and len(picked) < limit:
        best = max(
            (i for i in range(len(values)) if i not in picked),
            key=lambda i: (len(values[i] & uncovered), tiebreak(i, picked) if tiebreak else 0, -i),
        )
        picked.append(best)
        uncovered -= values[best]
    for i in range(len(values) if fill else 0):
        if len(picked) >= limit:
            break
        if i not in picked:
            picked.append(i)
    return sorted(picked), uncovered
