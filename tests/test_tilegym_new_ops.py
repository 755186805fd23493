"""Kernels for TileGym ops that have no cutile-rs port yet, written by us (tests/fixtures/tilegym_ops).

In a TileGym checkout assembled from the tilegym==1.5.1 wheel (its cuTile reference ops are those
of TileGym main for these ops), agent-d plans each op with no missing fact and no contract line,
generates its host side, and one cargo build of the aggregated crate holding all of them compiles
against the real cutile 0.2.0 crates; each symbol is exported and answers the ABI smoke call.
Their proof on a GPU is scripts/gpu_proof.py's (docs/gpu.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from checkout_support import checkout_with_kernels

from bot.apply import apply
from bot.build import build, toolchain
from bot.emit import generate
from bot.pipeline import make_plan
from bot.report.validator import exported_functions
from bot.targets.discover import discover
from bot.targets.types import Target
from bot.testing.stage_tests import abi_smoke

pytestmark = pytest.mark.slow
KERNELS = Path(__file__).parent / "fixtures" / "tilegym_ops"
OPS = sorted(d.name[: -len("_kernel")] for d in KERNELS.iterdir() if (d / "kernel.rs").is_file())


# A correctness test of ours that passes fp8 to fmha, as TileGym's test_attention does: its dispatch
# (and the element types ffi.rs imports) must take float8_e5m2 too.
FP8_TEST = """
import pytest
import torch

import tilegym

_backends = ["cutile"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e5m2])
@pytest.mark.parametrize("backend", _backends)
def test_op(dtype, backend):
    q = torch.zeros((1, 1, 16, 64), dtype=dtype, device="cuda")
    tilegym.ops.fmha(q, q, q)
"""


@pytest.fixture()
def repo(tmp_path, tilegym_wheel):
    checkout = checkout_with_kernels(tmp_path / "tg", tilegym_wheel, KERNELS, OPS)
    (checkout / "tests" / "ops" / "test_fmha_fp8.py").write_text(FP8_TEST)
    return checkout


def test_new_ops_plan_without_contract_and_build_in_one_crate(repo, cargo_target_dir):
    assert OPS, "no kernels in tests/fixtures/tilegym_ops"
    for op in OPS:
        target = Target(repo, op)
        plan, _facts, co = make_plan(target, repo / "out" / op)
        assert plan.missing == [], (op, [m.key for m in plan.missing])
        assert plan.contract_lines == 0, op
        assert discover(target).reference is not None, op  # read from the wheel's cuTile reference
        if op == "attention":
            assert "f8e5m2" in plan.ffi.dtypes, plan.ffi.dtypes
        apply.apply(apply.formatted(generate.generate(target, plan, co), repo), repo)
    first = Target(repo, OPS[0])
    built = build.build(first, toolchain.resolve(), cargo_target_dir, repo / "build.txt", exported_functions)
    for op in OPS:
        assert f"cutile_{op}" in built.symbols, (op, built.symbols)
        ok, detail = abi_smoke(Target(repo, op), built.so_path)
        assert ok and "-5" in detail, (op, detail)
