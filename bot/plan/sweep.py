"""How many autotune configs a generated wrapper sweeps when the cuTile reference chose them.

cutile-rs compiles a kernel for each config on its first use, inside the first call of a shape:
on the H200, bmm's sweep over the 18 configs its reference lists for sm_90 reached 15 of them in
58 s (about 4 s each), and pytest-timeout ended the case at 60 s (docs/specification.md, "The correctness run"), a FAIL on
first try. TileGym's own hand ports sweep 1 to 4 configs. So a config group read from the
reference keeps at most ``SWEEP_LIMIT`` configs, chosen by a rule and said where it is written:

- the reference's first config always (the one a wrapper launches with autotuning off);
- then every value of every field at least once (``bot.cover``), then every pair of values of two
  fields as far as the limit goes (so the sweep spreads over the grid), then the reference's order;
- kept in the reference's order; a config listed twice is swept once.

A porter who wants others writes ``python.configs`` in host_contract.yaml: the contract's list is
the porter's choice and is swept whole.
"""

from __future__ import annotations

import ast
import itertools
import operator
import re
from collections.abc import Mapping

from bot.cover import greedy_cover
from bot.infer.naming import DEVICE_CALL
from bot.targets.types import Source

# at about 4 s a config on first use, 8 configs take about half of a case's 60 s
SWEEP_LIMIT = 8
NOTE_KEY = "note"  # a group's line for the wrapper's comment: what was kept of how many
CUT_KEY = "cut_from"  # a cut group's count of distinct configs before the cut


def fit(
    groups: tuple[Mapping[str, object], ...], source: Source
) -> tuple[tuple[Mapping[str, object], ...], Source]:
    """``groups`` with repeats dropped and each group over the limit cut to it, and ``source``
    saying which were changed; groups from anywhere but the reference as written."""
    if source.kind != "reference":  # the porter's list (the contract) is swept as written
        return groups, source
    out: list[Mapping[str, object]] = []
    said: list[str] = []
    for group in groups:
        listed = list(group["configs"])
        configs = [c for i, c in enumerate(listed) if c not in listed[:i]]  # a repeat compiles nothing new
        if len(configs) == len(listed) and len(configs) <= SWEEP_LIMIT:
            out.append(group)
            continue
        kept, left_out = _kept(configs)
        if len(kept) == len(configs):
            note = f"the reference's {_count(listed, configs)}, each once"
        else:
            note = (
                f"{len(kept)} of the reference's {_count(listed, configs)} (sweep limit {SWEEP_LIMIT}: each "
                "is compiled on first use): its first, every field value once, then every pair of values, "
                "then its order"
            )
        if left_out:
            note += f"; values left out: {', '.join(left_out)}"
        fitted = {**group, "configs": [configs[i] for i in kept], NOTE_KEY: note}
        if len(kept) < len(configs):
            fitted[CUT_KEY] = len(configs)
        out.append(fitted)
        said.append(f"when {group['when']}: {note}")
    if not said:
        return groups, source
    detail = f"{source.detail}; " + "; ".join(said) + "; python.configs in host_contract.yaml sweeps others"
    return tuple(out), Source(source.kind, detail)


def _kept(configs: list[object]) -> tuple[list[int], list[str]]:
    """The indices kept, and each field value no kept config names: the first config, a cover of
    every field value, then of every pair of values of two fields (the sweep spread over the grid,
    not bunched at its start), then the reference's order."""
    fields = [
        sorted((k, repr(v)) for k, v in cfg.items()) if isinstance(cfg, Mapping) else [] for cfg in configs
    ]
    singles = [frozenset(f) for f in fields]
    pairs = [frozenset(itertools.combinations(f, 2)) for f in fields]
    by_value, uncovered = greedy_cover(singles, SWEEP_LIMIT, first=(0,), fill=False)
    kept, _ = greedy_cover(pairs, SWEEP_LIMIT, first=by_value)
    return kept, [f"{k}={v}" for k, v in sorted(uncovered, key=lambda kv: (kv[0], len(kv[1]), kv[1]))]


def _count(listed: list[object], distinct: list[object]) -> str:
    if len(listed) == len(distinct):
        return f"{len(listed)} configs"
    return f"{len(distinct)} distinct configs ({len(listed)} listed)"


def cut_line(groups: list[Mapping[str, object]], capability: tuple[int, int] | None = None) -> str:
    """The host cause a cut sweep may be, for the perf stage: "" when no group was cut. With the
    GPU's ``capability``, only the groups whose device test it passes."""
    cut = [g for g in groups if g.get(CUT_KEY) and _may_apply(str(g["when"]), capability)]
    if not cut:
        return ""
    counts = ", ".join(f"{len(g['configs'])} of {g[CUT_KEY]} when {g['when']}" for g in cut)
    return (
        f"the wrapper tunes over fewer configs than the cuTile reference ({counts}; sweep limit "
        f"{SWEEP_LIMIT}): the reference's tuned pick may be one left out; python.configs in "
        "host_contract.yaml sweeps others"
    )


def capability_of(device: str) -> tuple[int, int] | None:
    """(9, 0) for "NVIDIA H200 (sm_90)", as the interpreter probe names the GPU; None without it."""
    found = re.search(r"\bsm_(\d+)(\d)\b", device)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _may_apply(when: str, capability: tuple[int, int] | None) -> bool:
    """False only when a conjunct of ``when`` that reads nothing but the device capability is false
    for ``capability``; read, never run (the condition comes from the checkout)."""
    if capability is None or when in ("always", "else"):
        return True
    try:
        tree = ast.parse(when, mode="eval").body
    except SyntaxError:
        return True
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    return all(_device_test(part, capability) is not False for part in parts)


_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def _device_test(node: ast.expr, capability: tuple[int, int]) -> bool | None:
    """``_device_capability() <op> literal`` (or its ``[i]``, or ``not`` of one) for this device;
    None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _device_test(node.operand, capability)
        return None if inner is None else not inner
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE):
        return None
    left = _capability_value(node.left, capability)
    try:
        right = ast.literal_eval(node.comparators[0])
    except ValueError:
        return None
    if left is None:
        return None
    try:
        return bool(_COMPARE[type(node.ops[0])](left, right))
    except TypeError:
        return None


def _capability_value(node: ast.expr, capability: tuple[int, int]) -> object | None:
    """The capability for ``_device_capability()``, a part of it for ``[0]``/``[1]``; else None."""
    if _is_query(node):
        return capability
    if isinstance(node, ast.Subscript) and _is_query(node.value) and isinstance(node.slice, ast.Constant):
        index = node.slice.value
        return capability[index] if isinstance(index, int) and -2 <= index < 2 else None
    return None


def _is_query(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", "") == DEVICE_CALL and not node.args
