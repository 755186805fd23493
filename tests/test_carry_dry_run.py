"""The carried-over wrapper launched on a CPU beside its reference (the launch dry run): the wheel
ops' references carried over as code, and a re-spelled reference (a call through a local a
conditional expression binds), carried instead of asking for facts it states.

Needs the dry run's interpreter (torch and cuda.tile, ``scripts/setup.sh --test``), as
tests/test_dry_run.py does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from checkout_support import torch_python

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.dryrun import result as dry_result
from bot.dryrun import run as dry
from bot.emit import generate, soundness
from bot.pipeline import make_plan
from bot.read.reader import read_kernel
from bot.targets.discover import discover
from bot.targets.types import Target
from bot.testing.testrun import read_test_files

pytestmark = pytest.mark.slow
CARRIED_OPS = ["matmul", "bmm", "swiglu", "attention_sink"]

# matmul's reference with its persistent path called through a local bound by a conditional
# expression (a spelling the removed readers refused)
RESPELLED = [
    (
        "    stream = torch.cuda.current_stream()\n    if static_persistent:",
        "    stream = torch.cuda.current_stream()\n"
        "    run = _cutile_autotune_static_persistent_matmul if static_persistent else None\n"
        "    if static_persistent:",
    ),
    (
        "        _cutile_autotune_static_persistent_matmul(stream, a, b, c, M, N, K, trans_a, trans_b)",
        "        run(stream, a, b, c, M, N, K, trans_a, trans_b)",
    ),
]


# a test of our own for rope (the wheel ships none): two shapes, two head counts
ROPE_TEST = """
import pytest
import torch

from tilegym import set_backend
from tilegym.ops import apply_rope_base

_backends = ["cutile"]


@pytest.mark.parametrize("batch, heads, kv_heads, seq, dim", [(2, 4, 2, 16, 64), (1, 8, 8, 32, 128)])
@pytest.mark.parametrize("backend", _backends)
def test_op(batch, heads, kv_heads, seq, dim, backend):
    set_backend(backend)
    q = torch.randn(batch, heads, seq, dim, dtype=torch.float16, device="cuda")
    k = torch.randn(batch, kv_heads, seq, dim, dtype=torch.float16, device="cuda")
    cos = torch.randn(1, seq, dim, dtype=torch.float16, device="cuda")
    sin = torch.randn(1, seq, dim, dtype=torch.float16, device="cuda")
    apply_rope_base(q, k, cos, sin)
"""


def _port_and_dry_run(repo: Path, op: str, out: Path):
    target = Target(repo, op)
    plan, _facts, co = make_plan(target, out / "plan")
    assert not plan.missing, (op, plan.missing)
    files = apply.formatted(generate.generate(target, plan, co), repo)
    soundness.check_files(files, repo)
    apply.apply(files, repo)
    out.mkdir(parents=True, exist_ok=True)
    tests = read_test_files(repo, discover(target).test_sites)
    found = dry.dry_run(target, plan, read_kernel(target.kernel_rs), torch_python(), tests, out)
    return plan, found


def test_the_wheel_references_carried_over_launch_as_the_references_do(tmp_path, tilegym_wheel):
    torch_python()  # skips (or fails under CI) before the checkout is built
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, CARRIED_OPS, CARRIED_OPS).repo
    for op in CARRIED_OPS:
        plan, found = _port_and_dry_run(repo, op, tmp_path / "out" / op)
        assert plan.carry is not None, op
        assert found.status == "compared", (op, found.why)
        assert found.identical, (op, [dry_result.describe_row(r) for r in found.differences])
        assert dry.CASES <= len(found.cases) <= 8, op
        launched = {r.param.removesuffix(" grid") for r in found.rows if r.what == "grid"}
        if op == "bmm":  # the cover reaches the case the first three do not: static_persistent=False
            assert launched == {e.name for e in read_kernel(Target(repo, op).kernel_rs).entries}, launched
        wrapper = (repo / "src/tilegym/ops/cutile_rs" / f"{op}.py").read_text(encoding="utf-8")
        assert "cuda.tile" not in wrapper and "ops.cutile." not in wrapper, op


def test_a_re_spelled_reference_is_carried_and_launches_as_it_does(tmp_path, tilegym_wheel):
    torch_python()
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["matmul"], ["matmul"]).repo
    reference = repo / "src/tilegym/ops/cutile/matmul.py"
    text = reference.read_text(encoding="utf-8")
    for old, new in RESPELLED:
        assert old in text
        text = text.replace(old, new, 1)
    reference.write_text(text, encoding="utf-8")
    plan, found = _port_and_dry_run(repo, "matmul", tmp_path / "out")
    assert plan.carry is not None and plan.contract_lines == 0
    assert found.status == "compared" and found.identical, [
        dry_result.describe_row(r) for r in found.differences
    ]
    assert len(found.cases) >= dry.CASES


def test_a_kernel_rs_count_the_reference_unpacks_from_a_launched_tensor_launches_as_that_count(
    tmp_path, tilegym_wheel
):
    """rope's kernel with one more scalar, the reference's `head_dim` (`q.shape[-1]` in the registered
    function, unpacked from `q.shape` in the launching one; the search's trial launches have no such
    local): carried as that dimension of `q`, the kernel's own parameter, and the dry run finds it
    equal to the reference's quantity in each case."""
    from checkout_support import checkout_with_kernels
    from variant_corpus import original, variants_of

    torch_python()
    kernels = Path(__file__).parent / "fixtures" / "tilegym_ops"
    repo = checkout_with_kernels(tmp_path / "tg", tilegym_wheel, kernels, ["rope"])
    (repo / "tests" / "ops" / "test_rope.py").write_text(ROPE_TEST)
    (variant,) = [v for v in variants_of(repo, "rope", original(repo, "rope")) if v.kind == "extra_scalar"]
    assert variant.extra == "head_dim"
    Target(repo, "rope").kernel_rs.write_text(variant.kernel_rs)
    plan, found = _port_and_dry_run(repo, "rope", tmp_path / "out")
    values = {a.c_param: a.expr for k in plan.carry.kernels for a in k.args}
    assert values["head_dim"] == "int(q.shape[3])"
    assert found.status == "compared" and found.identical, [
        found.why,
        *[dry_result.describe_row(r) for r in found.differences],
    ]
    rows = [r for r in found.rows if r.param == "head_dim"]
    # q and k have the same head_dim: either is the reference's quantity the value matches
    assert rows and all(r.same and ".shape[" in r.reference for r in rows), rows


def test_a_kernel_rs_count_the_launched_tensor_was_shaped_with_launches_as_that_count(
    tmp_path, tilegym_wheel
):
    """attention_sink's kernel with one more scalar, the reference's `bs`: unpacked from `query`,
    which is not launched; the launch passes `query.view(bs, ...)` transposed. Carried as the view's
    first dimension over the kernel's own parameter, equal to the reference's `bs` in each case."""
    from variant_corpus import original, variants_of

    torch_python()
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["attention_sink"], ["attention_sink"]).repo
    orig = original(repo, "attention_sink")
    (variant,) = [v for v in variants_of(repo, "attention_sink", orig) if v.kind == "extra_scalar"]
    assert variant.extra == "bs"
    Target(repo, "attention_sink").kernel_rs.write_text(variant.kernel_rs)
    plan, found = _port_and_dry_run(repo, "attention_sink", tmp_path / "out")
    values = {a.c_param: a.expr for k in plan.carry.kernels for a in k.args}
    assert values["bs"] == "int(Q.shape[0])"  # the cuTile kernel's parameter Q
    assert found.status == "compared" and found.identical, [
        found.why,
        *[dry_result.describe_row(r) for r in found.differences],
    ]
    rows = [r for r in found.rows if r.param == "bs"]
    assert rows and all(r.same for r in rows), rows
