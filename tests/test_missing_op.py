"""A test that calls another op with no cutile-rs backend (bot/classify/missing_op.py): the verdict
names that op and its kernel.rs, never the wrapper, never the kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.classify import missing_op
from bot.classify.types import Verdict, VerdictKind
from bot.job import Job, PortOptions
from bot.targets.types import Target
from bot.testing.stage_tests import with_missing_op
from bot.testing.types import TestCase, TestResult

STUB = "NotImplementedError: moe_align_block_size is not implemented for this backend: cutile-rs"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    reference = tmp_path / "src" / "tilegym" / "ops" / "cutile"
    reference.mkdir(parents=True)
    (reference / "moe_align_block.py").write_text(
        "from tilegym.backend import register_impl\n\n\n"
        '@register_impl("moe_align_block_size", backend="cutile")\n'
        "def moe_align_block_size(topk_ids, block_size, num_experts):\n    pass\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    "text",
    [
        STUB,
        "NotImplementedError: Current backend 'cutile-rs' has no implementation for 'moe_align_block_size'. "
        "Fallback to 'pytorch' is disabled (DISABLE_FALLBACK=1).",
        "No backend implementation found for 'moe_align_block_size' with backend 'cutile-rs'. Fallback ...",
    ],
)
def test_the_dispatchers_words_name_the_other_op_and_its_reference(repo, text):
    found = missing_op.find(text, {"moe", "invoke_fused_moe_kernel"}, repo)
    assert found == missing_op.MissingOp("moe_align_block_size", "src/tilegym/ops/cutile/moe_align_block.py")
    assert found.op == "moe_align_block"
    assert "the tests call moe_align_block_size" in found.reason("moe") and "not moe's" in found.reason("moe")
    assert "src/tilegym/ops/cutile_rs/moe_align_block_kernel/kernel.rs" in found.fix()


def test_the_ops_own_name_and_other_backends_are_not_another_op(repo):
    own = "NotImplementedError: invoke_fused_moe_kernel is not implemented for this backend: cutile-rs"
    assert missing_op.find(own, {"moe", "invoke_fused_moe_kernel"}, repo) is None
    assert missing_op.find(STUB.replace("cutile-rs", "tilecpp"), {"moe"}, repo) is None
    # a name no reference registers: said by its dispatch name
    unknown = missing_op.find(STUB.replace("moe_align_block_size", "mystery_op"), {"moe"}, repo)
    assert unknown.module == "" and unknown.fix().startswith("port mystery_op too: add its kernel.rs")


def test_a_failed_run_that_stopped_in_the_dispatcher_is_said_as_the_missing_port(repo, tmp_path):
    options = PortOptions(repo=repo, kernel="moe", out_root=tmp_path / "out", echo=lambda _: None)
    job = Job.start(Target(repo, "moe"), options)
    tests = TestResult(
        True, "pytest", 1, "log", failed=1, cases=[TestCase("t::test_op[cutile_rs]", "failed", STUB)]
    )
    wiring = Verdict(VerdictKind.FAIL, "host", f"backend not wired ({STUB})", host_fix="wire the backend")
    said = with_missing_op(job, wiring, tests)
    assert (said.kind, said.klass) == (VerdictKind.FAIL, "host")
    assert said.reason.startswith("the tests call moe_align_block_size") and said.fix.startswith(
        "port moe_align_block"
    )
    kernel = Verdict(VerdictKind.FAIL, "kernel", "numeric mismatch", followup="check the math")
    passed = TestResult(True, "pytest", 1, "log", failed=1, cases=[TestCase("t::x", "failed", "not close")])
    assert with_missing_op(job, kernel, passed) is kernel  # no dispatcher words: as classified
