"""One variant of an autotuned reference, and what reading a variant needs and leaves behind.

A variant is one kernel launched under one condition: its configs, grid, cache key and the
config fields renamed to kernel.rs's generics. Reading one looks up the module's functions and
kernel.rs's entries, writes sizes in the caller's names, and notes what the whole reading must
say: caller flags refused, config fields dropped, asserts beside the launch, flag checks.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from bot.infer.launch.syntax import NotThisShape
from bot.infer.list_params import ListArg
from bot.read.types import Entry, KernelSignature


@dataclass
class Variant:
    """One kernel the reference launches under one condition, with what the wrapper needs of it."""

    condition: str  # Python condition over the wrapper's names; "" for the last (else) branch
    kernel: str  # reference kernel name
    entry: str  # kernel.rs entry it corresponds to
    grid0: str
    configs: list[tuple[str, list[dict[str, object]]]]  # (capability condition or "", configs)
    key: list[str]
    generator: str  # the configs argument of exhaustive_search, as written
    renamed: dict[str, str]  # config field -> kernel.rs generic / compile option
    line: int  # of the exhaustive_search call (or of the direct ct.launch)
    values: dict[str, str] = field(default_factory=dict)  # C argument -> Python value (a caller's flag)
    grid_xyz: list[str] = field(default_factory=list)  # a multi-axis grid's three terms
    ref_params: list[str] = field(default_factory=list)  # the reference kernel's parameters
    # the reference kernel's list parameters, kernel.rs taking one element: one launch per element
    lists: list[ListArg] = field(default_factory=list)


class VariantReader:
    """The module, kernel.rs and caller a variant is read against, and the notes variants leave."""

    def __init__(self, functions: dict[str, ast.FunctionDef], signature: KernelSignature, params: list[str]):
        self.functions = functions
        self.signature = signature
        self.params = params
        self.alloc: dict[str, ast.Call] = {}
        self.refused: list[str] = []  # caller flags kernel.rs cannot honour
        self.refusal_notes: list[str] = []  # why each refused flag is refused
        self.dropped_notes: list[str] = []  # why each dropped config field is dropped
        self.launch_asserts: list[tuple[ast.Assert, str]] = []  # asserts beside the helper calls
        self.flag_checks: list[dict[str, str]] = []  # FFI checks of C arguments feeding bool generics

    def entry(self, kernel_name: str) -> Entry:
        """The kernel.rs entry of a reference kernel: named exactly so, else by suffix."""
        bare = kernel_name.lstrip("_")
        exact = [e for e in self.signature.entries if e.name == bare]
        # entries named exactly after another reference function belong to that one
        claimed = {name.lstrip("_") for name in self.functions} - {bare}
        suffix = [e for e in self.signature.entries if e.name.endswith("_" + bare) and e.name not in claimed]
        found = exact or suffix
        if len(found) != 1:
            raise NotThisShape(f"reference kernel {kernel_name} matches {len(found)} kernel.rs entries")
        return found[0]

    def caller_names(self, expr: ast.expr) -> ast.expr:
        """``c.shape[0]`` of an output allocated as ``torch.empty((M, N), ...)`` is ``M``."""

        class Through(ast.NodeTransformer):
            def visit_Subscript(inner, node: ast.Subscript) -> ast.AST:
                inner.generic_visit(node)
                base = node.value
                if (
                    isinstance(base, ast.Attribute)
                    and base.attr == "shape"
                    and isinstance(base.value, ast.Name)
                    and base.value.id in self.alloc
                    and isinstance(node.slice, ast.Constant)
                ):
                    dims = getattr(self.alloc[base.value.id], "args", [None])[0]  # a list has no shape
                    i = node.slice.value
                    if (
                        isinstance(dims, ast.Tuple)
                        and isinstance(i, int)
                        and -len(dims.elts) <= i < len(dims.elts)
                    ):
                        return copy.deepcopy(dims.elts[i])
                return node

        return Through().visit(copy.deepcopy(expr))
