"""Issue 32's re-spelling table: each re-spelling of each reference (tests/respell_corpus.py) plans
with no contract line, as a port plans it, and the wheel ops' re-spellings launch as their
references do (the launch dry run on our demo tests).

A re-spelling behaves as its original (test_respell_corpus.py runs both and compares their
launches), so a port that launches as the re-spelled reference launches as the original.
Generated at test time from the references of the tilegym 1.5.1 wheel; nothing of TileGym is
kept. ``table_rows`` is what docs/respell.md's table is written from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import respell_corpus as corpus
from checkout_support import checkout_with_kernels, torch_python

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.dryrun import result as dry_result
from bot.dryrun import run as dry
from bot.emit import generate, soundness
from bot.errors import StageStop
from bot.pipeline import make_plan
from bot.read.reader import read_kernel
from bot.targets.discover import discover
from bot.targets.types import Target
from bot.testing.testrun import read_test_files

pytestmark = pytest.mark.slow
KERNELS = Path(__file__).parent / "fixtures" / "tilegym_ops"
FIXTURE_OPS = sorted(d.name[: -len("_kernel")] for d in KERNELS.iterdir() if (d / "kernel.rs").is_file())
WHEEL_OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]


def table_rows(repo: Path, ops: list[str]) -> list[dict]:
    """One row per (op, kind): what planning the re-spelled reference gave."""
    rows = []
    for op in ops:
        target = Target(repo, op)
        reference = repo / discover(target).reference.path
        original = reference.read_text(encoding="utf-8")
        try:
            for kind, text in sorted(corpus.respellings(original).items()):
                reference.write_text(text, encoding="utf-8")
                rows.append({"op": op, "kind": kind, **_planned(target, repo / "out" / op / kind)})
        finally:
            reference.write_text(original, encoding="utf-8")
    return rows


def _planned(target: Target, out: Path) -> dict:
    try:
        plan, _facts, _co = make_plan(target, out)
    except StageStop as stop:
        return {"stop": f"{stop.kind} {stop.klass}: {stop.reason}"}
    return {
        "carried": plan.carry is not None,
        "missing": [m.key for m in plan.missing],
        "contract_lines": plan.contract_lines,
    }


def test_every_respelling_of_every_reference_plans_without_a_contract(tmp_path, tilegym_wheel):
    ours = checkout_with_kernels(tmp_path / "tg", tilegym_wheel, KERNELS, FIXTURE_OPS)
    wheel = assemble_checkout(tmp_path / "wheel", tilegym_wheel, WHEEL_OPS, WHEEL_OPS).repo
    rows = table_rows(ours, FIXTURE_OPS) + table_rows(wheel, WHEEL_OPS)
    assert len({r["kind"] for r in rows}) >= 8
    assert len({r["op"] for r in rows}) == len(FIXTURE_OPS) + len(WHEEL_OPS)
    for row in rows:
        assert "stop" not in row, row
        assert row["contract_lines"] == 0, row
        assert row["missing"] == [], row


def test_the_wheel_ops_respelled_launch_as_their_references(tmp_path, tilegym_wheel):
    python = torch_python()
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, WHEEL_OPS, WHEEL_OPS).repo
    for op in WHEEL_OPS:
        target = Target(repo, op)
        reference = repo / discover(target).reference.path
        respelled = corpus.respellings(reference.read_text(encoding="utf-8"))
        reference.write_text(respelled[corpus.ALL], encoding="utf-8")  # every kind at once
        out = tmp_path / "out" / op
        plan, _facts, co = make_plan(target, out / "plan")
        assert not plan.missing and plan.contract_lines == 0, (op, plan.missing)
        files = apply.formatted(generate.generate(target, plan, co), repo)
        soundness.check_files(files, repo)
        apply.apply(files, repo)
        out.mkdir(parents=True, exist_ok=True)
        tests = read_test_files(repo, discover(target).test_sites)
        found = dry.dry_run(target, plan, read_kernel(target.kernel_rs), python, tests, out)
        assert found.status == "compared", (op, found.why)
        assert found.identical, (op, [dry_result.describe_row(r) for r in found.differences])
        assert dry.CASES <= len(found.cases) <= 8, op
