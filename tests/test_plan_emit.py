"""From a real kernel.rs to a plan and rendered host files, without building."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bot.emit import cdef, ffi_imports, ffi_rs, generate
from bot.emit.draft import render_draft
from bot.errors import Blocked, Failed
from bot.infer.facts import Facts
from bot.pipeline import make_plan
from bot.plan import build_plan
from bot.read.reader import read_kernel
from bot.targets import checkout
from bot.targets.discover import discover
from bot.targets.types import Target

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture()
def silu(tmp_path, tilegym_wheel):
    from bot.demo import assemble_checkout

    co = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"])
    return Target(co.repo, "silu_and_mul")


def _plan(target: Target):
    plan, facts, _ = make_plan(target, target.repo / "out" / target.op)
    return plan, facts


def test_silu_plan_sources(silu, carrying_gives_way):
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
    assert "Device::new(device_id.max(0) as usize)" in text
    assert "catch_unwind" in text and "rc::LAUNCH_FAILED" in text
    assert "let out_dp: DevicePointer<$E> = unsafe { DevicePointer::from_cu_deviceptr(out_d.ptr) };" in text
    assert not re.search(r"from_raw_parts|mem::forget|transmute", text)
    assert cdef.cross_check(text, cdef.render(plan.ffi)) == []


def test_row_wrapper_uses_the_cheap_torch_calls(silu, carrying_gives_way):
    from bot.emit import wrapper_py
    from bot.plan import row_wrapper as rows

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
    index, name = next((i, n) for i, (n, c) in enumerate(plan.ffi.c_params()) if c == "int32_t")
    swapped = cdef.render(plan.ffi).replace(f"int32_t {name}", f"float {name}")
    assert any(f"parameter {index + 1} differs" in p for p in cdef.cross_check(text, swapped))
    dropped = text.replace("    occupancy: i32,\n", "")
    assert any("count differs" in p for p in cdef.cross_check(dropped, cdef.render(plan.ffi)))


def test_generation_is_deterministic(silu):
    first = generate.generate(silu, _plan(silu)[0], checkout.inspect(silu, discover(silu)))
    second = generate.generate(silu, _plan(silu)[0], checkout.inspect(silu, discover(silu)))
    assert [(f.path, f.content) for f in first.files] == [(f.path, f.content) for f in second.files]


def test_backward_tests_of_a_wired_file_skip_their_cutile_rs_case(silu):
    """Discovery names the backward tests, generation wires their forward-only skip; applied, a second
    generation leaves the test file as it is."""
    from bot.apply import apply
    from bot.emit import testfile_wiring

    test_file = silu.repo / "tests/ops/test_silu_and_mul.py"
    test_file.write_text(
        test_file.read_text()
        + "\n"
        + '    @pytest.mark.parametrize("backend", _backends)\n'
        + "    def test_op_backward(self, backend, arch):\n"
        + "        self.setUp()\n"
        + "        assert backend\n"
    )
    (site,) = discover(silu).test_sites
    assert site.backward == ("test_op_backward",) and "test_op_backward" not in site.functional
    files = generate.generate(silu, _plan(silu)[0], checkout.inspect(silu, discover(silu)))
    wired = next(f.content for f in files.files if f.path == "tests/ops/test_silu_and_mul.py")
    skip = f'        if backend == "cutile-rs":\n            pytest.skip("{testfile_wiring.FORWARD_ONLY_SKIP}")\n'
    assert wired.count(skip) == 1
    assert wired.endswith(
        "    def test_op_backward(self, backend, arch):\n"
        + skip
        + "        self.setUp()\n        assert backend\n"
    )
    apply.apply(files, silu.repo)
    again = generate.generate(silu, _plan(silu)[0], checkout.inspect(silu, discover(silu)))
    assert next(f.content for f in again.files if f.path == "tests/ops/test_silu_and_mul.py") == wired


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


def test_device_comes_from_the_argument_clamped_in_both_styles(silu):
    """TileGym coding rule 32: `Device::new(device_id.max(0) as usize)`; a negative id is device 0, not -4."""
    from bot.report import validator

    device = (
        "    let device = match Device::new(device_id.max(0) as usize) {\n"
        "        Ok(d) => d,\n"
        "        Err(e) => {\n"
        '            eprintln!("cutile_silu_and_mul: Device::new({device_id}) failed: {e:?}");\n'
        "            return rc::DEVICE_INIT_FAILED;\n"
        "        }\n"
        "    };\n"
        "    let stream = unsafe { Stream::borrow_raw(raw_stream as *mut c_void, &device) };\n"
    )
    macros = ffi_rs.render(_plan(silu)[0])
    util = silu.ops_dir / "ffi_util.rs"
    util.write_text(
        util.read_text().replace("macro_rules! dispatch_by_dtype", "macro_rules! dispatch_by_dtype_gone")
    )
    co = checkout.inspect(silu, discover(silu))
    explicit = ffi_rs.render(_plan(silu)[0], has_rc_module=co.has_rc_module)
    assert (
        co.style == "explicit" and "crate::deref_descs!" in macros and "crate::deref_descs!" not in explicit
    )
    for text in (macros, explicit):
        assert device in text
        assert "device_id < 0" not in text and "setup_device_stream!" not in text
        assert validator.device_from_argument(text)  # the upstream script's `Device::new(device_id` grep too


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
    # hidden_size is no descriptor field: a runtime C argument; either answer settles it
    assert keys == {"python.args.hidden_size", "python.out_cols"}
    (hidden,) = [m for m in plan.missing if m.key == "python.args.hidden_size"]
    assert "or ffi.scalars.hidden_size: an expression over the descriptors" in hidden.question
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
    from bot.infer.contract.host_contract import _known

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


# --------------------------------------------------------------------------- partitions, fixed types, imports


def _fixture_op(silu: Target, op: str, kernel: str | None = None) -> Target:
    """Our fixture op ``op`` (tests/fixtures/ops) copied into the silu checkout; ``kernel`` replaces its kernel.rs."""
    target = Target(silu.repo, op)
    shutil.copytree(FIXTURES / "ops" / f"{op}_kernel", target.kernel_dir)
    if kernel is not None:
        target.kernel_rs.write_text(kernel)
    return target


def _use_names(rust: str) -> list[str]:
    """Names the ``use`` lines of a Rust file bind (explicit ones; globs and ``as _`` bind none)."""
    names = []
    for m in re.finditer(r"^use\s+([^;]+);", rust, re.M):
        tree = m.group(1)
        prefix, _, group = tree.partition("{")
        leaves = [x.strip() for x in group.rstrip("}").split(",")] if group else [tree.rsplit("::", 1)[-1]]
        for leaf in filter(None, leaves):
            bound = leaf.split(" as ")[-1].strip().rsplit("::", 1)[-1]
            if bound not in ("*", "_"):
                names.append(bound)
    return names


def test_mapped_partition_output_is_a_kernel_fault(silu):
    shutil.copy(FIXTURES / "kernels" / "mapped_partition_output.rs", silu.kernel_rs)
    with pytest.raises(Failed) as info:
        _plan(silu)
    reason, followup = info.value.reason, info.value.followup
    assert info.value.klass == "kernel"
    assert reason.startswith(
        "mapped_copy_kernel: output parameter dst: MappedPartitionMut<E, {[BM, BN]}, MAP_SHAPE>"
    )
    assert "Specified launch grid does not match inferred tensor partition grid" in reason
    assert "no output found" not in reason and "scalar" not in reason
    assert "\n" not in followup and "dst" in followup and "partition_full_mut" in followup


def test_partition_param_without_a_launcher_argument_is_a_kernel_fault(silu):
    shutil.copy(FIXTURES / "kernels" / "partition_params.rs", silu.kernel_rs)
    with pytest.raises(Failed) as info:
        _plan(silu)
    assert info.value.klass == "kernel"
    assert info.value.reason.startswith(
        "by_value_partitions: parameter src: Partition<'a, E, {[B]}> is a partition type"
    )
    assert "\n" not in info.value.followup and "src" in info.value.followup


def test_no_type_generic_row_kernel_launches_its_declared_generics(silu):
    target = _fixture_op(silu, "square_rows")
    (entry,) = read_kernel(target.kernel_rs).entries
    assert [(g.name, g.kind) for g in entry.generics] == [("BLOCK_SIZE", "const")]
    plan, _ = _plan(target)
    assert plan.missing == []
    (variant,) = plan.ffi.variants
    assert variant.generics == ["block_size"]  # one C argument per declared generic, nothing invented
    assert (plan.ffi.dtype_generic, plan.ffi.dtypes) == ("", ["f32"])
    text = ffi_rs.render(plan)
    assert ".generics(vec![block_size.to_string()])" in text
    assert not re.search(r"\bdty\b", text) and "macro_rules!" not in text and "dispatch" not in text
    assert "    if in_d.dtype != 0 {\n        return rc::UNSUPPORTED_DTYPE;\n    }" in text  # code 0 = f32
    assert "    if out_d.dtype != 0 {\n        return rc::INVALID_ARGS;\n    }" in text
    assert "DevicePointer<f32>" in text and "$E" not in text
    assert "cutile::half" not in text  # nothing to dispatch over: no half types to name
    assert cdef.cross_check(text, cdef.render(plan.ffi)) == []
    from bot.emit import wrapper_py

    assert "_DTYPES = (torch.float32,)" in wrapper_py.render(plan)


def test_contract_tensors_without_the_output_is_a_question_not_a_crash(silu):
    """A porter's ``python.tensors`` that binds no value to the output (a kernel renamed under its
    contract) leaves the descriptor unpacked: a question for the contract, not a KeyError."""
    target = _fixture_op(silu, "gather_rows")
    contract = target.kernel_dir / "host_contract.yaml"
    text = contract.read_text()
    assert "tensors: {out: out, table: table, idx: idx}" in text
    contract.write_text(text.replace("tensors: {out: out, ", "tensors: {"))
    plan, _ = _plan(target)
    (question,) = [m for m in plan.missing if m.key == "python.tensors"]
    assert "descriptor `out` (kernel output `out`)" in question.question
    assert "allocated (python.alloc) and packed" in question.question


def test_no_type_generic_tiled_kernel_launches_its_declared_generics(silu):
    """The general planner too: a concrete element type and only const generics, in declared order."""
    kernel = (FIXTURES / "ops" / "tile_copy_kernel" / "kernel.rs").read_text()
    kernel = kernel.replace("<E: ElementType, const BLOCK: i32>", "<const BLOCK: i32, const UNROLL: i32>")
    kernel = re.sub(r"\bE\b", "f32", kernel)
    target = _fixture_op(silu, "tile_copy", kernel)
    plan, _ = _plan(target)
    assert [v.generics for v in plan.ffi.variants] == [["block", "unroll"]]
    assert plan.ffi.dtypes == ["f32"]
    text = ffi_rs.render(plan)
    assert ".generics(vec![block.to_string(), unroll.to_string()])" in text
    assert "borrow_tensor::<f32>(x_d)" in text and not re.search(r"\bdty\b", text)
    assert "    if x_d.dtype != 0 {\n        return rc::UNSUPPORTED_DTYPE;\n    }" in text


def test_a_fixed_integer_element_type_is_the_dtype_the_wrapper_accepts(silu):
    """An entry over int64 ids and int32 counts (moe_align_block's shape): the wrapper accepts the
    driving tensor's integer dtype, not nothing (an empty ``_DTYPES`` refuses every call)."""
    kernel = (FIXTURES / "ops" / "tile_copy_kernel" / "kernel.rs").read_text()
    kernel = kernel.replace("<E: ElementType, const BLOCK: i32>", "<const BLOCK: i32>")
    kernel = re.sub(r"\bE\b", "i64", kernel)
    target = _fixture_op(silu, "tile_copy", kernel)
    plan, _ = _plan(target)
    assert plan.ffi.dtypes == ["i64"]
    from bot.emit import wrapper_py

    assert "_DTYPES = (torch.int64,)" in wrapper_py.render(plan)
    i64_check = "    if x_d.dtype != 4 {\n        return rc::UNSUPPORTED_DTYPE;\n    }"  # code 4 = i64
    assert i64_check in ffi_rs.render(plan)


def test_kernel_file_imports_are_not_imported_twice(silu):
    target = _fixture_op(silu, "tile_copy")
    plan, _ = _plan(target)
    kernel_names = [u.name for u in read_kernel(target.kernel_rs).file_uses if not u.glob]
    assert [u.name for u in plan.ffi.file_uses if not u.glob] == kernel_names
    text = ffi_rs.render(plan)
    ours = _use_names(text)
    assert len(ours) == len(set(ours))
    assert not set(ours) & set(kernel_names), set(ours) & set(kernel_names)
    # Same path as kernel.rs's import (cutile's or its own module's, all a kernel may import): left
    # out. Names from other paths are the next test's.
    assert "use tile_copy_module" not in text and "use cutile::tile_kernel::TileKernel;" not in text
    assert "crate::dispatch_by_dtype!(dty, dispatch, f32, f16, bf16)" in text
    assert "unsafe { tile_copy_kernel(&*out_t, &*x_t) }" in text
    assert cdef.cross_check(text, cdef.render(plan.ffi)) == []


def test_colliding_names_are_spelled_in_full_outside_strings(silu):
    """Every name ffi.rs imports, imported by kernel.rs from elsewhere: no second import, full paths in code."""
    from bot.read.types import FileUse

    target = _fixture_op(silu, "tile_copy")
    plan, _ = _plan(target)
    names = ["c_void", "Device", "Stream", "bf16", "f16", "CompileOptions", "TileKernel", "TensorDesc", "rc"]
    names += ["borrow_tensor", "tile_copy_kernel"]
    plan.ffi.file_uses = [FileUse(n, f"elsewhere::{n}") for n in names]
    text = ffi_rs.render(plan)
    assert not set(_use_names(text)) & set(names)
    assert "use cutile::tile_kernel::TileKernel as _;" in text  # a trait: in scope for its methods only
    assert "    out: *const crate::ffi_util::TensorDesc," in text
    assert "fn agent_d_desc_ok(d: &crate::ffi_util::TensorDesc, rank: i32, exact: bool)" in text
    assert "return crate::ffi_util::rc::INVALID_ARGS;" in text and " rc::" not in text
    assert "cuda_core::Device::new(device_id.max(0) as usize)" in text
    assert "cuda_core::Stream::borrow_raw(raw_stream as *mut core::ffi::c_void, &device)" in text
    assert "crate::ffi_util::borrow_tensor::<$E>(out_d)" in text
    assert "unsafe { tile_copy_module::tile_copy_kernel(&*out_t, &*x_t) }" in text
    # dispatch_by_dtype! matches stringify!(type), so a full-path type needs the plain match
    assert '"f16" => dispatch!(cutile::half::f16),' in text and "dispatch_by_dtype" not in text
    # strings and comments keep the plain names
    assert 'eprintln!("cutile_tile_copy: tile_copy_kernel launch failed: {e:?}");' in text
    assert "// tile_copy_kernel: generics <dtype, block>" in text
    assert "Device::new({device_id}) failed" in text
    assert cdef.cross_check(text, cdef.render(plan.ffi)) == []


def test_gemm_letters_need_a_gemm_pair():
    """`n` beside x [m,n] and a rank-1 weight is no GEMM letter (layer norm): no dim(w,1)."""
    from bot.infer import naming
    from bot.plan.types import CTensor
    from bot.read.types import BlockUse, Entry, Param
    from bot.targets.types import Source

    src = Source("kernel", "test")
    entry = Entry(
        "k",
        True,
        True,
        {},
        (),
        (Param("x", "tensor", "E", 2), Param("w", "tensor", "E", 1)),
        (),
        {},
        BlockUse(1, False),
    )
    pair = [
        CTensor("x", "x_d", "x", "tensor", "E", "input", 2, src),
        CTensor("w", "w_d", "w", "tensor", "E", "input", 1, src),
    ]
    assert naming.gemm_dim("n", entry, pair) is None
    pair[1].rank = 2
    assert naming.gemm_dim("n", entry, pair)[0] == "dim(w,1)"


def test_byte_element_types_of_fixed_type_tensors_are_imported():
    """nvfp4-style outputs (f8e4m3fn scales, f4e2m1fnx2 packed values) need their Rust types in scope."""
    from bot.plan.types import CTensor, FfiPlan
    from bot.targets.types import Source

    src = Source("kernel", "test")
    ffi = FfiPlan(
        "cutile_q", "q_module", "macros",
        [CTensor("scales", "scales_d", "scales", "tensor", "f8e4m3fn", "output", 1, src),
         CTensor("packed", "packed_d", "packed", "tensor", "f4e2m1fnx2", "output", 2, src),
         CTensor("x", "x_d", "x", "tensor", "E", "input", 2, src)],
        "x", "E", ["f32"], [], [], [],
    )  # fmt: skip
    lines, _spelled = ffi_imports.imports(ffi, True)
    assert "use cuda_core::{Device, Stream, f4e2m1fnx2, f8e4m3fn};" in lines


# --------------------------------------------------------------------------- a second type generic (rule 31)


def test_second_type_generic_is_an_f32_accumulator_slot(silu):
    """TileGym coding rule 31: `E2` beside the data generic `E` gets "f32"; `E` follows the tensors."""
    target = _fixture_op(silu, "acc_matmul")
    (entry,) = read_kernel(target.kernel_rs).entries
    assert [(g.name, g.kind) for g in entry.generics][:2] == [("E", "type"), ("E2", "type")]
    plan, _ = _plan(target)
    assert plan.missing == []
    (variant,) = plan.ffi.variants
    assert variant.generics == ["dtype", '"f32"', "bm", "bn", "bk"]
    assert (plan.ffi.dtype_generic, plan.ffi.dtypes) == ("E", ["f32", "f16", "bf16"])
    (slot,) = plan.ffi.type_slots
    assert (slot.generic, slot.dtype, slot.source.kind) == ("E2", "f32", "policy")
    assert "rule 31" in slot.source.detail
    from bot.plan.show import render_plan

    assert f'  type generic E2 = "f32" (not the element generic)  [{slot.source}]' in render_plan(plan)
    text = ffi_rs.render(plan)
    generics = (
        '.generics(vec![dty.to_string(), "f32".to_string(), bm.to_string(), bn.to_string(), bk.to_string()])'
    )
    assert generics in text
    assert f'//   E2: "f32"  [{slot.source}]' in text
    assert "crate::dispatch_by_dtype!(dty, dispatch, f32, f16, bf16)" in text  # E is still dispatched
    assert cdef.cross_check(text, cdef.render(plan.ffi)) == []


def test_contract_names_the_dtype_of_a_type_slot(silu):
    target = _fixture_op(silu, "acc_matmul")
    contract = target.kernel_dir / "host_contract.yaml"
    contract.write_text(contract.read_text() + "ffi.type_generics.E2: dtype\n")
    plan, _ = _plan(target)
    assert plan.ffi.variants[0].generics[:2] == ["dtype", "dtype"]
    assert plan.ffi.type_slots[0].source.kind == "contract"
    contract.write_text(contract.read_text().replace("E2: dtype", "E2: f16"))
    plan, _ = _plan(target)
    assert plan.ffi.variants[0].generics[:2] == ["dtype", '"f16"']
    assert '"f16".to_string()' in ffi_rs.render(plan)


def test_type_slot_typing_a_tensor_is_asked_for_and_a_scalar_crosses_as_f32(silu):
    """Rule 31 covers accumulators only: a tensor typed `E2` needs a source for its dtype. A scalar typed
    `E2` (an accumulator's zero, as in TileGym's transpose example) is an f32 C argument."""
    kernel = (FIXTURES / "ops" / "acc_matmul_kernel" / "kernel.rs").read_text()
    kernel = kernel.replace(
        "b: &Tensor<E, { [-1, -1] }>,\n", "b: &Tensor<E, { [-1, -1] }>,\n        acc_zero: E2,\n"
    )
    target = _fixture_op(silu, "acc_matmul", kernel)
    contract = target.kernel_dir / "host_contract.yaml"
    contract.write_text(contract.read_text() + "    acc_zero: 0.0\n")
    plan, _ = _plan(target)
    assert plan.missing == []
    assert {s.name: s.ctype for s in plan.ffi.scalars}["acc_zero"] == "f32"
    assert "    acc_zero: f32," in ffi_rs.render(plan)

    typed = kernel.replace("c: &Tensor<E, {", "c: &Tensor<E2, {").replace(
        "a: &Tensor<E, {", "a: &Tensor<E2, {"
    )
    target.kernel_rs.write_text(typed)
    plan, _ = _plan(target)
    assert [m.key for m in plan.missing] == ["ffi.type_generics.E2"]  # asked once for both tensors
    assert "types tensor `c`" in plan.missing[0].question
    contract.write_text(contract.read_text() + "ffi.type_generics.E2: f32\n")
    plan, _ = _plan(target)
    assert plan.missing == []
    text = ffi_rs.render(plan)
    assert "borrow_tensor::<f32>(c_d)" in text and "    if c_d.dtype != 0 {" in text
    assert "borrow_tensor::<f32>(a_d)" in text and plan.ffi.dtype_from == "b"  # E: b's dtype
