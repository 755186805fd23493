"""``agent-d check`` (issue 35, deliverable 1, first part): a port's own ffi.rs and wrapper checked
as they are. TileGym's five hand-written ports of the tilegym 1.5.1 wheel hold; each host fault
planted into them is found on its line, naming both sides, exit 1; nothing in the checkout changes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bot.cli import main
from bot.demo import assemble_checkout

HAND_PORTED = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]
OPS = Path("src/tilegym/ops/cutile_rs")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, tilegym_wheel) -> Path:
    return assemble_checkout(tmp_path_factory.mktemp("check") / "tg", tilegym_wheel, HAND_PORTED, []).repo


def _check(repo: Path, op: str, capsys) -> tuple[int, dict]:
    code = main(["check", "--repo", str(repo), "--kernel", op, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _status(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout


@pytest.mark.parametrize("op", HAND_PORTED)
def test_tilegyms_hand_written_ports_hold_as_they_are(checkout, op, capsys):
    code, doc = _check(checkout, op, capsys)
    assert (code, doc["findings"]) == (0, []), doc
    assert doc["checked"][0] == f"_FFI_CDEF against ffi.rs's export of cutile_{op}"
    assert _status(checkout) == ""  # nothing written


# (file under the ops folder, text replaced, its replacement, the finding's line text, the words it says)
PLANTED = [
    ("bmm.py", "int32_t bm, int32_t bn, int32_t bk", "int32_t bn, int32_t bm, int32_t bk",
     "int32_t bn, int32_t bm, int32_t bk,", "parameter 4 is `bn` in the cdef, `bm` in ffi.rs (line 37)"),
    ("bmm.py", "int32_t group_size_m, int32_t trans_a", "int32_t group_size_m, float trans_a",
     "int32_t group_size_m, float trans_a,", "parameter 8 `trans_a` is `float` in the cdef, `trans_a: int32_t` in ffi.rs"),
    ("bmm.py", "int32_t bm, int32_t bn, int32_t bk,", "int32_t bm, int32_t bn,",
     "int32_t cutile_bmm(", "`cutile_bmm` takes 14 parameters in the cdef, 15 in ffi.rs"),
    ("bmm_kernel/ffi.rs", "#[unsafe(no_mangle)]", "#[no_mangle]",
     "pub unsafe extern \"C\" fn cutile_bmm(", "uses `#[no_mangle]`: edition 2024 needs `#[unsafe(no_mangle)]`"),
    ("bmm_kernel/ffi.rs", "    crate::setup_device_stream!", "    std::mem::forget(bm);\n    crate::setup_device_stream!",
     "    std::mem::forget(bm);", "op-level `mem::forget`"),
    ("bmm.py", "    check_rc(rc, _FFI_NAME)", "    pass",
     "    rc = lib.cutile_bmm(", "the return code of `lib.cutile_bmm(...)` is not passed to check_rc"),
    ("bmm.py", '@register_impl("bmm", backend="cutile-rs")', '@register_impl("bmm", backend="cutile")',
     None, 'no `register_impl("bmm", backend="cutile-rs")`'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rel", "old", "new", "line_text", "words"), PLANTED, ids=[p[4][:40] for p in PLANTED]
)
def test_each_planted_host_fault_is_found_on_its_line(checkout, capsys, rel, old, new, line_text, words):
    path = checkout / OPS / rel
    original = path.read_text()
    assert original.count(old) == 1, old
    path.write_text(original.replace(old, new))
    try:
        code, doc = _check(checkout, "bmm", capsys)
    finally:
        path.write_text(original)
    assert code == 1, doc
    [finding] = [f for f in doc["findings"] if words in f["message"]] or [doc["findings"]]
    lines = path.read_text().replace(old, new).splitlines()
    expected_line = (
        0
        if line_text is None
        else next(i for i, t in enumerate(lines, 1) if t.strip().startswith(line_text.strip()))
    )
    assert (finding["path"], finding["line"]) == (str(OPS / rel), expected_line), finding


def test_a_missing_host_file_is_a_usage_error(checkout, capsys):
    assert main(["check", "--repo", str(checkout), "--kernel", "no_such_op"]) == 2
    assert "no_such_op has no ffi.rs" in capsys.readouterr().err


# (op, text replaced in its hand-written wrapper, the replacement, the parameter whose value differs, what)
PLANTED_LAUNCH = [
    ("silu_and_mul", "block_size = next_power_of_2(hidden_size)", "block_size = next_power_of_2(hidden_size) // 2",
     "block_size", "tile"),
    ("silu_and_mul", "xd = make_tensor_desc(ffi, x2)", "xd = make_tensor_desc(ffi, x2.t().contiguous().t())",
     "inp", "strides"),
    ("silu_and_mul", "xd = make_tensor_desc(ffi, x2)", "xd = make_tensor_desc(ffi, x2.float())", "inp", "dtype"),
    ("matmul", "num_programs = _non_persistent_grid(m, n, cfg.BM, cfg.BN)",
     "num_programs = _non_persistent_grid(m, n, cfg.BM, cfg.BN) + 1", "num_programs", "grid"),
    ("attention_sink", "float(sm_scale),", "float(sm_scale) * 2,", "qk_scale", "scalar"),
    ("silu_and_mul", "torch.empty((n_rows, hidden_size), device=x.device, dtype=x.dtype)",
     "torch.empty((n_rows, hidden_size), device=x.device, dtype=torch.float32)", "out", "dtype"),
    ("silu_and_mul", "torch.empty((n_rows, hidden_size), device=x.device, dtype=x.dtype)",
     "torch.empty((n_rows, hidden_size + 1), device=x.device, dtype=x.dtype)", "out", "shape"),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("op", HAND_PORTED)
def test_each_hand_written_wrapper_launches_as_the_reference_does(checkout, capsys, cargo_target_dir, op):
    from checkout_support import torch_python

    code = main(["check", "--repo", str(checkout), "--kernel", op, "--python", torch_python(),
                 "--cargo-target-dir", str(cargo_target_dir), "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["findings"]) == (0, []), doc
    assert doc["checked"][-2].startswith("the wrapper's launches against the cuTile reference (")
    assert doc["checked"][-1].startswith("kernel.rs compiled for sm_90 on the CPU (")
    assert _status(checkout) == ""  # agent-d's port was generated into a copy


@pytest.mark.slow
@pytest.mark.parametrize(
    ("op", "old", "new", "param", "what"),
    PLANTED_LAUNCH,
    ids=[f"{p[0]}-{p[3]}-{p[4]}" for p in PLANTED_LAUNCH],
)
def test_each_planted_launch_fault_is_found_with_both_values(
    checkout, capsys, cargo_target_dir, op, old, new, param, what
):
    from checkout_support import torch_python

    path = checkout / OPS / f"{op}.py"
    original = path.read_text()
    assert original.count(old) == 1, old
    path.write_text(original.replace(old, new))
    try:
        code = main(["check", "--repo", str(checkout), "--kernel", op, "--python", torch_python(),
                     "--cargo-target-dir", str(cargo_target_dir), "--json"])  # fmt: skip
        doc = json.loads(capsys.readouterr().out)
    finally:
        path.write_text(original)
    assert code == 1, doc
    planted = [f for f in doc["findings"] if f"`{param}` (" in f["message"]]
    assert planted, doc["findings"]
    declared = next(
        i for i, t in enumerate(original.splitlines(), 1) if f" {param}," in t or f" {param})" in t
    )
    assert planted[0]["line"] == declared
    said = planted[0]["message"]
    assert " from the wrapper; the reference launches " in said
    # a tensor's difference names the field that differs (a raw pointer's: its order and extent)
    fields = {"strides": ("strides", "contiguous"), "shape": ("shape", "numel"), "dtype": ("dtype",)}
    if what in fields:
        assert any(f", {field}) is " in said for field in fields[what]), said


@pytest.mark.slow
def test_a_kernel_the_device_compile_refuses_is_found_on_its_entry_line(checkout, capsys, cargo_target_dir):
    """The same left shift as tests/test_device_compile.py, in the hand-written port's kernel.rs."""
    from checkout_support import torch_python

    kernel = checkout / OPS / "silu_and_mul_kernel" / "kernel.rs"
    original = kernel.read_text()
    mask = "        let mask: Tile<bool, { [BLOCK_SIZE] }> = cmpi(cols, hidden_tile, predicate::LessThan);\n"
    shift = "        let shifted: Tile<i32, { [BLOCK_SIZE] }> = shli(cols, cols, overflow::None);\n"
    kernel.write_text(
        original.replace(
            mask, mask + shift + "        let _ = cmpi(shifted, hidden_tile, predicate::LessThan);\n"
        )
    )
    try:
        code = main(["check", "--repo", str(checkout), "--kernel", "silu_and_mul", "--python", torch_python(),
                     "--cargo-target-dir", str(cargo_target_dir), "--json"])  # fmt: skip
        doc = json.loads(capsys.readouterr().out)
    finally:
        kernel.write_text(original)
    assert code == 1, doc
    entry = next(i for i, t in enumerate(original.splitlines(), 1) if "fn silu_and_mul_kernel" in t)
    assert [(f["path"], f["line"]) for f in doc["findings"]] == [
        (str(OPS / "silu_and_mul_kernel/kernel.rs"), entry)
    ] * len(doc["findings"])
    assert (
        "fails at the bytecode step" in doc["findings"][0]["message"]
        and "op ShLI" in doc["findings"][0]["message"]
    )
