"""Toward one reader (issue 32): what the autotuned and direct readers of ``bot/infer`` still add to
a carried port. With both switched off, the plan from the semantic model alone (the carried host
code and its mapping onto kernel.rs) must generate the same files, byte for byte, the wired test
files included (which cuTile skips they inherit follows the carried program's refusals). On TileGym main
26 of 27 ops do (geglu's ffi.rs differs in three provenance comments, docs/carry.md); here, the five
ops of the tilegym 1.5.1 wheel, one with boolean flags (bmm's trans_a, trans_b)."""

from __future__ import annotations

import pytest

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.emit import generate
from bot.emit.stage_generate import make_plan
from bot.infer.reference import direct, launch
from bot.targets.types import Target

pytestmark = pytest.mark.slow
OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]


def _files(repo, op, out) -> dict[str, str]:
    target = Target(repo, op)
    plan, _facts, co = make_plan(target, out)
    assert plan.carry is not None and not plan.missing, (op, plan.missing)
    files = apply.formatted(generate.generate(target, plan, co), repo)
    return {f.path: f.content for f in files.files}  # new files and wired ones (test files included)


def test_the_carried_plan_alone_generates_what_todays_plan_does(tmp_path, tilegym_wheel, monkeypatch):
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, OPS, OPS).repo
    today = {op: _files(repo, op, tmp_path / "a" / op) for op in OPS}
    monkeypatch.setattr(direct, "gather", lambda *args, **kwargs: None)
    monkeypatch.setattr(launch, "gather", lambda *args, **kwargs: None)
    alone = {op: _files(repo, op, tmp_path / "b" / op) for op in OPS}
    for op in OPS:
        assert alone[op] == today[op], op
    bmm_ffi = next(text for path, text in alone["bmm"].items() if path.endswith("ffi.rs"))
    assert "if (trans_a != 0) && (trans_a != 1) {" in bmm_ffi  # from `ct.Constant[bool]`, no reader's fact
