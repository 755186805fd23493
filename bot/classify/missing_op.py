"""A test that calls another op which has no cutile-rs backend in the checkout.

TileGym's tests may run more than the op under test: test_moe's fused MoE calls
``moe_align_block_size`` before the GEMM it checks. With only moe's kernel.rs ported, the cutile-rs
run stops in TileGym's dispatcher (``moe_align_block_size is not implemented for this backend:
cutile-rs``). That is no fault of the generated wrapper, nor of the kernel: the porter must port
the other op too. This module reads the dispatcher's words, tells the op's own dispatch name from
another one, and finds which reference module registers the other one, so the verdict can say
which kernel.rs is missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bot.targets.discover import cutile_module_of

BACKEND = "cutile-rs"
# TileGym's words when a dispatch name has nothing for the current backend: an interface's stub,
# and the dispatcher's own (with DISABLE_FALLBACK=1)
_WORDS = (
    re.compile(r"\b(?P<name>\w+) is not implemented for this backend: cutile[-_]rs\b"),
    re.compile(r"backend 'cutile[-_]rs' has no implementation for '(?P<name>\w+)'"),
    re.compile(r"No backend implementation found for '(?P<name>\w+)' with backend 'cutile[-_]rs'"),
)


@dataclass(frozen=True)
class MissingOp:
    name: str  # the dispatch name the test called
    module: str  # the cuTile reference module that registers it ("" when none does)

    @property
    def op(self) -> str:
        """The op whose kernel.rs would provide it: the reference module's name (TileGym's layout)."""
        return Path(self.module).stem if self.module else ""

    def reason(self, own: str) -> str:
        where = f" (the cuTile backend has it in {self.module})" if self.module else ""
        return (
            f"the tests call {self.name}, which no {BACKEND} backend provides in this checkout{where}: "
            f"another op's port, not {own}'s; its cases cannot pass until that op is ported"
        )

    def fix(self) -> str:
        folder = f"src/tilegym/ops/cutile_rs/{self.op}_kernel/kernel.rs" if self.op else "its kernel.rs"
        return f"port {self.op or self.name} too: add {folder} in this pull request, or land its port first"


def find(text: str, own_names: set[str], repo: Path) -> MissingOp | None:
    """The first dispatch name in ``text`` that has no cutile-rs backend and is not one of
    ``own_names`` (the op's own: a missing registration of its own is the host's wiring fault)."""
    for pattern in _WORDS:
        for match in pattern.finditer(text):
            name = match.group("name")
            if name not in own_names:
                return MissingOp(name, cutile_module_of(repo, name))
    return None
