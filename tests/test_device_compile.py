"""The kernel compiled for the GPU on the CPU (issue 35, deliverable 4): each launch the dry run
recorded, lowered to Tile IR and written as bytecode by cutile's KernelCompiler (and compiled by
tileiras where it is installed), before any GPU time. A kernel that rustc builds but the device
compile refuses is FAIL (kernel) with the step, the message and its kernel.rs line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.build import device_compile
from bot.build.device_compile import CompileJob

ROOT = Path(__file__).resolve().parent.parent
SHIFT = Path(__file__).parent / "fixtures" / "device_compile" / "shift_kernel" / "kernel.rs"
OPS = "src/tilegym/ops/cutile_rs"


def test_the_probe_takes_only_identifiers_and_plain_generics(tmp_path):
    text = device_compile.probe_source(SHIFT, "shift_module", [CompileJob("shift_kernel", ("64",))], "sm_90")
    assert (
        'KernelCompiler::new(kernel::shift_module::__module_ast_self, "shift_module", "shift_kernel")' in text
    )
    assert '.generics(vec!["64".to_string()])' in text and '.target("sm_90")' in text
    for bad in (CompileJob("x); std::process::exit(0); (", ("1",)), CompileJob("k", ('1"); panic!("',))):
        with pytest.raises(ValueError, match="does not write into Rust"):
            device_compile.probe_source(SHIFT, "shift_module", [bad], "sm_90")
    with pytest.raises(ValueError, match="not an identifier"):
        device_compile.probe_source(SHIFT, "m; fn x() {}", [], "sm_90")


def test_the_arch_is_sm_90_unless_named(monkeypatch):
    assert device_compile.arch() == "sm_90"
    monkeypatch.setenv(device_compile.ARCH_ENV, "sm_100a")
    assert device_compile.arch() == "sm_100a"
    monkeypatch.setenv(device_compile.ARCH_ENV, "sm_90; rm -rf /")
    assert device_compile.arch() == "sm_90"


@pytest.mark.slow
def test_a_kernel_whose_bytecode_cannot_be_written_fails_at_that_step(
    tmp_path, tilegym_wheel, cargo_target_dir
):
    from bot.build import toolchain
    from bot.demo import assemble_checkout

    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["silu_and_mul"], []).repo
    crate_toml = repo / OPS / "cutile_kernels" / "Cargo.toml"
    silu = repo / OPS / "silu_and_mul_kernel" / "kernel.rs"
    tools = toolchain.resolve()
    good = device_compile.run(
        "silu_and_mul", silu, "silu_and_mul_module",
        [CompileJob("silu_and_mul_kernel", ("f16", "1024")), CompileJob("silu_and_mul_kernel", ("f32", "64"))],
        crate_toml, tools, cargo_target_dir,
    )  # fmt: skip
    assert [o.step for o in good] == ["ok", "ok"], good
    [bad] = device_compile.run(
        "shift",
        SHIFT,
        "shift_module",
        [CompileJob("shift_kernel", ("64",))],
        crate_toml,
        tools,
        cargo_target_dir,
    )
    assert (bad.step, bad.message) == (
        "bytecode",
        "bytecode serialization failed: bytecode write error: missing attribute 'overflow' on op ShLI",
    )


@pytest.mark.slow
def test_a_port_of_such_a_kernel_is_fail_kernel_on_the_cpu_with_its_line(
    tmp_path, tilegym_wheel, cargo_target_dir
):
    """silu_and_mul's kernel.rs with one left shift added: it builds and dry-runs equal, and only
    the device compile finds it, before pytest (which could not run here: no GPU)."""
    from checkout_support import torch_python

    from bot.demo import assemble_checkout

    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    kernel = repo / OPS / "silu_and_mul_kernel" / "kernel.rs"
    mask = "        let mask: Tile<bool, { [BLOCK_SIZE] }> = cmpi(cols, hidden_tile, predicate::LessThan);\n"
    shift = (
        "        let shifted: Tile<i32, { [BLOCK_SIZE] }> = shli(cols, cols, overflow::None);\n"
        "        let _ = cmpi(shifted, hidden_tile, predicate::LessThan);\n"
    )
    kernel.write_text(kernel.read_text().replace(mask, mask + shift))
    subprocess.run(["git", "commit", "-qam", "a shift"], cwd=repo, check=True)
    argv = [sys.executable, "-m", "bot.cli", "port", "--repo", str(repo), "--kernel", "silu_and_mul",
            "--cargo-target-dir", str(cargo_target_dir), "--python", torch_python(), "--no-sandbox", "--json"]  # fmt: skip
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    [result] = json.loads(proc.stdout)
    assert (result["verdict"], result["class"]) == ("FAIL", "kernel"), result["reason"]
    assert "does not compile for sm_90 on the CPU" in result["reason"]
    assert "fails at the bytecode step" in result["reason"] and "op ShLI" in result["reason"]
    entry_line = next(
        i for i, t in enumerate(kernel.read_text().splitlines(), 1) if "fn silu_and_mul_kernel" in t
    )
    assert f"silu_and_mul_kernel/kernel.rs:{entry_line}" in proc.stderr
    names = [s["name"] for s in result["stages"]]
    assert names[-2:] == ["dry run", "device compile"]  # pytest never ran
