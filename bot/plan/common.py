"""Plan pieces both halves of the planner share: the dtype tables, the questions asked so far
(``Missing``) and the checks every wrapper starts with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bot import dtypes
from bot.plan.types import MissingFact, PyStep
from bot.targets.types import Source

# cutile generic strings the FFI dispatches, and the torch dtypes the wrapper accepts (the integer
# ones for an entry whose driving tensor has a fixed integer type, moe_align_block's int64 ids).
DEFAULT_DTYPES = list(dtypes.DEFAULT)
TORCH_DTYPES = dtypes.TORCH


@dataclass
class Missing:
    """The plan's questions, each citing what the readers tried for its key (``tried``)."""

    tried: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    items: list[MissingFact] = field(default_factory=list)

    def add(self, key: str, question: str) -> None:
        self.items.append(MissingFact(key, question, list(self.tried.get(key, ()))))

    def asked(self, key: str) -> bool:
        return any(m.key == key for m in self.items)


def torch_dtypes(dtypes: list[str]) -> list[str]:
    """The torch names of the FFI's dtypes the wrapper accepts."""
    return [TORCH_DTYPES[d] for d in dtypes if d in TORCH_DTYPES]


PROLOGUE = Source(
    "policy", "wrapper prologue: CUDA tensors on one device, an accepted dtype, detached (forward only)"
)


def wrapper_prologue(op: str, params: list[str], same_dtype: bool) -> list[PyStep]:
    """The checks every wrapper starts with; ``same_dtype`` also requires one dtype for all ``params``."""
    if not params:
        return []
    first = params[0]

    def check(expr: str, error: str, message: str) -> PyStep:
        return PyStep("check", expr=expr, error=error, message=f"cutile-rs {op}: {message}", source=PROLOGUE)

    steps = [check(f"not {p}.is_cuda", "ValueError", f"{p} must be a CUDA tensor") for p in params]
    steps += [check(f"{p}.device != {first}.device", "ValueError", f"{p} is on another device than {first}")
              for p in params[1:]]  # fmt: skip
    steps.append(
        check(
            f"{first}.dtype not in _DTYPES", "NotImplementedError", f"dtype {{{first}.dtype}} not supported"
        )
    )
    if same_dtype:
        steps += [check(f"{p}.dtype != {first}.dtype", "NotImplementedError", f"{p}.dtype must equal {first}.dtype")
                  for p in params[1:]]  # fmt: skip
    steps.append(PyStep("detach", names=params, source=PROLOGUE))
    return steps
