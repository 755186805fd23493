"""Hostile kernels get a verdict: refused before the build, or stopped by the build time limit."""

from __future__ import annotations

import shutil
import time

import pytest

from bot import build
from bot.errors import Failed
from bot.kernel_rules import refusals
from bot.pipeline import generate_only, read_signature
from bot.toolchain import Toolchain
from bot.types import Target

LEAK = 'compile_error!(include_str!("/home/runner/.credentials"));'


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (LEAK, "`include_str!` reads a file"),
        ('const B: &[u8] = include_bytes!("/etc/shadow");', "`include_bytes!`"),
        ('include!("/tmp/x.rs");', "`include!`"),
        ('const T: &str = env!("GH_PAT");', "`env!` reads the machine's environment"),
        ('const T: Option<&str> = option_env ! ("X");', "`option_env!`"),
        ('#[path = "/etc/passwd"] mod p;', "`#[path]`"),
        ("extern crate std as s;", "`extern crate`"),
        ('macro_rules! m { ($n:ident) => { $n!("/x") } }', "`macro_rules!`"),
        ('std::include_str!("/x");', "`include_str!`"),
        ("my_helper!(1);", "`my_helper!` is not a cutile macro"),
    ],
)
def test_kernel_rules_refuse_what_reaches_the_machine(line, expected):
    found = refusals(f"use cutile::core::*;\n{line}\n")
    assert any(expected in why for why in found) and all(why.startswith("line 2:") for why in found)


def test_kernel_rules_leave_real_kernels_alone(tilegym_wheel):
    kernels = sorted((tilegym_wheel / "tilegym/ops/cutile_rs").glob("*_kernel/kernel.rs"))
    assert kernels
    for path in kernels:
        assert refusals(path.read_text()) == [], path
    quiet = '// include_str!("x")\nlet s = "env!(X)"; let c = \'(\'; if a != b { return !(x); }\n'
    assert refusals(quiet + "let t = const_shape![4, 8];\n") == []


def test_a_leaking_kernel_is_a_kernel_failure_before_anything_reads_it(tmp_path):
    target = Target(tmp_path, "leaky")
    target.kernel_dir.mkdir(parents=True)
    target.kernel_rs.write_text(f"#[cutile::module]\npub mod leaky_module {{\n    {LEAK}\n}}\n")
    with pytest.raises(Failed) as stop:
        read_signature(target)
    assert stop.value.klass == "kernel" and "line 3: `include_str!`" in stop.value.reason
    assert "/home/runner" not in stop.value.reason  # the path it names is not repeated
    # finalize's regeneration generates nothing for it either, so both sides agree
    assert generate_only(tmp_path, "leaky") != ""
    assert not target.ffi_rs.exists()


def test_the_build_time_limit_stops_cargo_and_gives_a_kernel_verdict(tmp_path):
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.fail("cargo is part of the test environment")
    target = Target(tmp_path, "slow")
    crate = target.crate_dir
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "cutile-kernels"\nversion = "0.0.0"\nedition = "2021"\n\n[lib]\npath = "src/lib.rs"\n'
    )
    (crate / "src/lib.rs").write_text("")
    # stands in for a const-eval loop: compile-time work that does not end
    (crate / "build.rs").write_text(
        "fn main() { std::thread::sleep(std::time::Duration::from_secs(600)); }\n"
    )
    log = tmp_path / "out" / "build_cargo.txt"
    start = time.monotonic()
    with pytest.raises(Failed) as stop:
        build.build(target, Toolchain(cargo, tmp_path, None), log_path=log, timeout=15)
    assert time.monotonic() - start < 120
    assert stop.value.klass == "kernel" and "within 15 s" in stop.value.reason
    assert "AGENT_D_BUILD_TIMEOUT" in stop.value.reason
    assert log.read_text().rstrip().endswith("stopped after 15 s")


def test_the_build_time_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("AGENT_D_BUILD_TIMEOUT", "42")
    assert build.build_timeout() == 42.0
    monkeypatch.delenv("AGENT_D_BUILD_TIMEOUT")
    assert build.build_timeout() == build.DEFAULT_BUILD_TIMEOUT_S


def test_compiler_lines_quoting_files_outside_the_checkout_stay_out_of_the_log_and_verdict(tmp_path):
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.fail("cargo is part of the test environment")
    outside = tmp_path / "runner" / "secret.rs"  # stands in for any file of the runner
    outside.parent.mkdir()
    outside.write_text('pub fn leak() -> i32 { "RUNNER-SECRET-LINE" }\n')
    target = Target(tmp_path / "checkout", "quoted")
    target.kernel_dir.mkdir(parents=True)
    target.kernel_rs.write_text('pub fn kernel() -> i32 { "KERNEL-LINE" }\n')
    crate = target.crate_dir
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "cutile-kernels"\nversion = "0.0.0"\nedition = "2021"\n\n[lib]\npath = "src/lib.rs"\n'
    )
    (crate / "src/lib.rs").write_text(
        f'#[path = "{outside}"]\nmod leak;\nmod quoted {{ include!("../../quoted_kernel/kernel.rs"); }}\n'
    )
    log = tmp_path / "out" / "build_cargo.txt"
    with pytest.raises(Failed) as stop:
        build.build(target, Toolchain(cargo, tmp_path, None), log_path=log)
    text = log.read_text()
    assert "RUNNER-SECRET-LINE" not in text and str(outside.parent) not in text
    assert "--> <a file outside the checkout>:1:" in text  # the error is still there, placed
    assert "KERNEL-LINE" in text  # the checkout's own lines stay, for the kernel's author
    assert stop.value.klass == "kernel" and str(outside.parent) not in stop.value.reason
    assert "<a file outside the checkout>: mismatched types" in stop.value.reason


def test_a_build_scripts_clang_lines_quoting_a_header_outside_the_checkout_are_dropped(tmp_path):
    from bot.compiler_output import redact_outside

    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "wrap.h").write_text("#include <cuda.h>\n")
    stderr = (
        "  /usr/local/cuda/include/cuda.h:12:10: fatal error: 'x.h' file not found\n"
        '  12 | #include "SECRET-HEADER-LINE"\n'
        "     |          ^~~~~~~~~~~~~~~~~~~~\n"
        "  wrap.h:1:10: note: included from here\n"
        "   1 | #include <cuda.h>\n"
        "error: failed to run custom build command for `cutile-sys v0.2.0`\n"
    )
    out = redact_outside(stderr, tmp_path / "checkout", tmp_path / "checkout")
    assert "SECRET-HEADER-LINE" not in out and "/usr/local/cuda" not in out
    assert "  <a file outside the checkout>:12:10: fatal error: 'x.h' file not found" in out
    assert "   1 | #include <cuda.h>" in out  # the checkout's own header, quoted as before
    assert out.endswith("error: failed to run custom build command for `cutile-sys v0.2.0`")
