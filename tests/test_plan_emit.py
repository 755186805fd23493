"""From a real kernel.rs to a plan and rendered host files, without building."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bot import checkout, generate
from bot.discover import discover
from bot.draft import render_draft
from bot.emit import cdef, ffi_rs
from bot.errors import Blocked, Failed
from bot.infer.facts import Facts
from bot.pipeline import make_plan
from bot.plan import build_plan
from bot.reader import read_kernel
from bot.types import Target

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture()
def silu(tmp_path, tilegym_wheel):
    from bot.demo import assemble_checkout

    co = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"])
    return Target(co.repo, "silu_and_mul")


def _plan(target: Target):
    plan, facts, _ = make_plan(target, target.repo / "out" / target.op)
    return plan, facts


def test_silu_plan_sources(silu):
    plan, _ = _plan(silu)
    assert plan.missing == []
    assert [name for name, _ in plan.ffi.c_params()] == [
        "out",
        "inp",
        "block_size",
        "num_cta_in_cga",
        "occupancy",
        "device_id",
        "raw_stream",
    ]
    derived = {d.name: (d.expr, d.source.kind) for d in plan.ffi.derived}
    assert derived["hidden_size"] == ("dim(out,1)", "reference")
    assert derived["in_row_stride"] == ("stride(inp,0)", "naming")
    assert derived["out_row_stride"] == ("stride(out,0)", "naming")
    assert plan.ffi.variants[0].grid == ["n_rows", "1", "1"]
    assert plan.python.register_name == "silu_and_mul"
    assert plan.python.signature == "input, out=None, **kwargs"
    assert plan.python.out_param == "out"
    assert plan.contract_lines == 0


def test_silu_rendered_files_follow_the_abi(silu):
    plan, _ = _plan(silu)
    text = ffi_rs.render(plan)
    assert "#[unsafe(no_mangle)]" in text and 'pub unsafe extern "C" fn cutile_silu_and_mul(' in text
    assert "crate::deref_descs!(out, inp)" in text  # the wheel's ffi_util.rs has the macros
    assert "Device::new(device_id as usize)" in text
    assert "catch_unwind" in text and "rc::LAUNCH_FAILED" in text
    assert "let out_dp: DevicePointer<$E> = unsafe { DevicePointer::from_cu_deviceptr(out_d.ptr) };" in text
    assert not re.search(r"from_raw_parts|mem::forget|transmute", text)
    assert cdef.cross_check(text, cdef.render(plan.ffi)) == []


def test_row_wrapper_uses_the_cheap_torch_calls(silu):
    from bot.emit import wrapper_py
    from bot.plan import rows

    text = wrapper_py.render(_plan(silu)[0])
    assert "input_rows = input.contiguous().view(-1, input.shape[-1])" in text  # view, not reshape
    assert "out_rows = input_rows.new_empty((n_rows, out_cols))" in text  # half the row: its own shape
    assert "result = out_rows.view(*out_shape)" in text  # view(Size) costs ~2.5 µs more per call
    # an output shaped like the first input (swiglu) is allocated like it and viewed back to its shape
    assert rows._allocation("a", "a.shape[-1]") == "torch.empty_like(a_rows)"
    assert rows._allocation("a", "a.shape[-1] // 2") == "a_rows.new_empty((n_rows, out_cols))"


def test_cross_check_catches_drift(silu):
    plan, _ = _plan(silu)
    text = ffi_rs.render(plan)
    swapped = cdef.render(plan.ffi).replace("int32_t block_size", "float block_size")
    assert any("parameter 3 differs" in p for p in cdef.cross_check(text, swapped))
    dropped = text.replace("    occupancy: i32,\n", "")
    assert any("count differs" in p for p in cdef.cross_check(dropped, cdef.render(plan.ffi)))


def test_generation_is_deterministic(silu):
    first = generate.generate(silu, _plan(silu)[0], checkout.inspect(silu, discover(silu)))
    second = generate.generate(silu, _plan(silu)[0], checkout.inspect(silu, discover(silu)))
    assert [(f.path, f.content) for f in first.files] == [(f.path, f.content) for f in second.files]


def test_checkout_without_macros_gets_explicit_style(silu):
    util = silu.ops_dir / "ffi_util.rs"
    text = util.read_text()
    text = re.sub(r"#\[macro_export\]\s*macro_rules!\s*dispatch_by_dtype\s*\{.*?\n\}\n", "", text, flags=re.S)
    util.write_text(text)
    co = checkout.inspect(silu, discover(silu))
    assert co.style == "explicit" and "dispatch_by_dtype" in co.style_source.detail
    plan, _ = _plan(silu)
    rendered = ffi_rs.render(plan, has_rc_module=co.has_rc_module)
    assert not re.search(r"crate::\w+!", rendered)
    assert 'match dty {\n        "f32" => dispatch!(f32),' in rendered
    assert "if out.is_null() || inp.is_null()" in rendered


def test_checkout_without_runtime_is_blocked_host(silu):
    (silu.ops_dir / "ffi_util.rs").unlink()
    with pytest.raises(Blocked) as info:
        checkout.inspect(silu, discover(silu))
    assert info.value.klass == "host" and "ffi_util.rs" in info.value.reason


def test_contract_overrides_inference(silu):
    (silu.kernel_dir / "host_contract.yaml").write_text(
        "contract_version: 1\nffi:\n  scalars:\n    hidden_size: dim(inp,1) / 2\n"
    )
    plan, _ = _plan(silu)
    hidden = next(d for d in plan.ffi.derived if d.name == "hidden_size")
    assert (hidden.expr, hidden.source.kind) == ("dim(inp,1) / 2", "contract")
    assert plan.contract_lines == 3  # ffi:, scalars:, hidden_size: (the version line is free)


def test_unknown_contract_key_is_refused(silu):
    (silu.kernel_dir / "host_contract.yaml").write_text("contract_version: 1\nffi:\n  grdi: [1, 1, 1]\n")
    with pytest.raises(Blocked, match="unknown key"):
        _plan(silu)


def test_missing_reference_leaves_a_precise_question_and_draft(silu):
    (silu.repo / "src/tilegym/ops/cutile/silu_and_mul.py").unlink()
    plan, facts = _plan(silu)
    keys = {m.key for m in plan.missing}
    assert keys == {"ffi.scalars.hidden_size", "python.out_cols"}
    draft = render_draft(plan, facts)
    assert "python.out_cols: null  # MISSING" in draft
    assert "python.signature: input, out=None, **kwargs" in draft  # inferred keys are pre-filled


def test_mut_tensor_output_is_a_kernel_fault(silu):
    shutil.copy(FIXTURES / "kernels" / "axpy_mut_output.rs", silu.kernel_rs)
    with pytest.raises(Failed) as info:
        build_plan(silu, read_kernel(silu.kernel_rs), Facts(), checkout.inspect(silu, discover(silu)))
    assert info.value.klass == "kernel"
    assert "&mut Tensor" in info.value.reason and "partition_full_mut" in info.value.followup


def test_every_missing_key_is_a_contract_key(silu):
    """A filled draft must load as a contract: every MISSING key is one the contract accepts."""
    from bot.infer.contract import _known

    (silu.repo / "src/tilegym/ops/cutile/silu_and_mul.py").unlink()
    (silu.repo / "src/tilegym/ops/ops.py").write_text("")  # no declaration either
    plan, _ = _plan(silu)
    assert plan.missing and all(_known(m.key) for m in plan.missing), [m.key for m in plan.missing]


def test_row_kernel_honours_contract_checks_and_grid(silu):
    """Contract keys shared by every pattern are not ignored by the row planner."""
    (silu.kernel_dir / "host_contract.yaml").write_text(
        "contract_version: 1\n"
        "ffi.checks: [{when: 'dim(inp,1) != 2 * dim(out,1)'}]\n"
        "ffi.grid.silu_and_mul_kernel: ['dim(inp,0)', 1, 1]\n"
    )
    plan, _ = _plan(silu)
    assert plan.ffi.checks == [{"when": "dim(inp,1) != 2 * dim(out,1)", "rc": "INVALID_ARGS"}]
    assert plan.ffi.variants[0].grid == ["dim(inp,0)", "1", "1"]
    assert plan.ffi.variants[0].source.kind == "contract"
    text = ffi_rs.render(plan)
    assert "if in_d.dim(1) != (2 * out_d.dim(1)) {" in text
