"""One reader (issue 32): the reference is read by the semantic model and carried over; the readers
that distilled it into wrapper steps are gone. The five ops of the tilegym 1.5.1 wheel plan carried
with no question, and a porter's contract that states the wrapper is rendered by the plan's own
wrapper half, still checking the reference kernels' boolean parameters (bmm's trans_a, trans_b)
as the carried launch checks them."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.emit import generate
from bot.emit.stage_generate import make_plan
from bot.targets.types import Target

pytestmark = pytest.mark.slow
CONTRACTS = Path(__file__).parent / "fixtures" / "contracts"
OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]
FLAG_CHECKS = ("if (trans_a != 0) && (trans_a != 1) {", "if (trans_b != 0) && (trans_b != 1) {")


def _ffi(repo, op, out):
    target = Target(repo, op)
    plan, _facts, co = make_plan(target, out)
    assert not plan.missing, (op, [m.key for m in plan.missing])
    files = apply.formatted(generate.generate(target, plan, co), repo)
    return plan, next(f.content for f in files.files if f.path.endswith("ffi.rs"))


def test_the_distilling_readers_are_gone():
    for module in (
        "bot.infer.direct",
        "bot.infer.launch",
        "bot.infer.reference.direct",
        "bot.infer.reference.launch",
    ):
        assert importlib.util.find_spec(module) is None, module


def test_the_wheel_ops_plan_carried_and_a_wrapper_contract_keeps_the_flag_checks(tmp_path, tilegym_wheel):
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, OPS, OPS).repo
    for op in OPS:
        plan, ffi = _ffi(repo, op, tmp_path / "carried" / op)
        assert plan.carry is not None and plan.contract_lines == 0, op
        if op == "bmm":  # from the reference kernels' `ct.Constant[bool]`, through the carried mapping
            assert all(check in ffi for check in FLAG_CHECKS)
        if op == "matmul":  # a scalar the carried launch passes names the launch line and parameter
            (m,) = [c for c in plan.ffi.scalars if c.name == "m"]
            assert re.search(
                r"matmul\.py: ct\.launch:\d+ argument M -> scalar m: a C argument", m.source.detail
            )
    shutil.copy(CONTRACTS / "bmm.yaml", repo / "src/tilegym/ops/cutile_rs/bmm_kernel/host_contract.yaml")
    plan, ffi = _ffi(repo, "bmm", tmp_path / "contract" / "bmm")
    assert plan.carry is None and plan.contract_lines > 0  # the porter's wrapper, rendered by the plan
    assert all(check in ffi for check in FLAG_CHECKS)
