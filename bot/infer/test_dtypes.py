"""Facts from the op's correctness tests: the fp8 dtypes they parametrize over.

TileGym's kernels dispatch f32, f16 and bf16 (``bot.dtypes.DEFAULT``); an op whose tests
also pass ``torch.float8_e5m2`` (attention) must accept it too, or the wrapper would refuse a case
the cuTile backend runs. Only the decorators of the functional tests discovery found are read, so
a benchmark's dtypes do not widen the op.
"""

from __future__ import annotations

import ast

from bot import dtypes
from bot.infer.facts import Facts
from bot.targets.types import Discovery, Source, Target

# torch's fp8 dtypes -> cutile element types (ffi_util's dtype_str spelling)
FP8 = dtypes.FP8_FROM_TORCH


def gather(target: Target, found: Discovery, facts: Facts) -> None:
    extra: list[str] = []
    where: list[str] = []
    for site in found.tests:
        path = target.repo / site.path
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name not in site.functional:
                continue
            for deco in fn.decorator_list:
                for node in ast.walk(deco):
                    if isinstance(node, ast.Attribute) and node.attr in FP8 and FP8[node.attr] not in extra:
                        extra.append(FP8[node.attr])
                        where.append(f"{site.path}:{deco.lineno} {fn.name} passes torch.{node.attr}")
    if extra:
        facts.offer("ffi.dtypes", list(dtypes.DEFAULT) + extra, Source("tests", "; ".join(where)))
