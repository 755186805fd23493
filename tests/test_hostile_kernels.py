"""Hostile kernels get a verdict: refused before the build, or stopped by the build time limit."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from bot.build import build
from bot.build.toolchain import Toolchain
from bot.errors import Failed
from bot.pipeline import generate_only, read_signature
from bot.read.reader import KernelRefused, read_kernel
from bot.targets.types import Target

LEAK = 'compile_error!(include_str!("/home/runner/.credentials"));'
FIXTURES = Path(__file__).parent / "fixtures"


def kernel(body: str = "", *, top: str = "", module: str = "") -> str:
    """A kernel file: ``top`` before the module, ``module`` items in it, ``body`` in an entry's body."""
    return (
        f"use cutile::core::*;\n{top}\n#[cutile::module]\npub mod m_module {{\n    use cutile::core::*;\n"
        f"{module}\n    #[cutile::entry()]\n    pub unsafe fn k(x: &Tensor<f32, {{ [-1] }}>) {{\n{body}\n    }}\n}}\n"
    )


def refused(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "kernel.rs"
    path.write_text(text)
    try:
        read_kernel(path, strict=False)
    except KernelRefused as exc:
        return exc.found
    return []


# Each construct a kernel does not need, and what the refusal says; none is named in a list of its
# own: the reader accepts cutile's uses, one module of functions and constants, cutile's macros.
REFUSED = [
    # the finding: `include_str!` under cutile's macro names, through a renamed import
    (
        kernel(top="pub use core::include_str as assert;"),
        "`use core::..`: a kernel imports only from `cutile`",
    ),
    (kernel(top="use cutile::core::const_shape as include;"), "a renamed import"),
    (kernel(body=LEAK), "`compile_error!` is not a cutile macro"),
    (kernel(body='let t = std::include_str!("/x");'), "`std::include_str!` is not a cutile macro"),
    (kernel(body='let t = env!("GH_PAT");'), "`env!` is not a cutile macro"),
    (kernel(body="assert!(true);"), "`assert!` is not a cutile macro"),
    (kernel(body="let t = cutile::core::env!(X);"), "`cutile::core::env!` is not a cutile macro"),
    (kernel(top="mod sibling;"), "`mod sibling;` (loads a file) outside the `#[cutile::module]` mod"),
    (kernel(module="    mod helpers {}"), "`mod helpers` in the `#[cutile::module]` mod"),
    (kernel(top='#[path = "/etc/passwd"] mod p;'), "`mod p;` (loads a file) outside"),
    (kernel(top="fn host() {}"), "`fn host` outside the `#[cutile::module]` mod"),
    (kernel(top="extern crate std as s;"), "`extern crate std` outside"),
    (kernel(module='    extern "C" { fn f(); }'), "an `extern` block in the `#[cutile::module]` mod"),
    (kernel(module='    pub extern "C" fn f() {}'), "`extern` ABI on `fn f`"),
    (kernel(module="    #[no_mangle]\n    fn f() {}"), "`#[no_mangle]` is not a kernel attribute"),
    (kernel(module='    #[link_section = ".init_array"]\n    fn f() {}'), "`#[link_section]` is not"),
    (kernel(module="    #[used]\n    const S: u8 = 0;"), "`#[used]` is not a kernel attribute"),
    (kernel(module="    static S: u8 = 0;"), "`static S` in the `#[cutile::module]` mod"),
    (kernel(module='    #[export_name = "main"]\n    fn f() {}'), "`#[export_name]` is not"),
    (kernel(module="    macro_rules! m { () => {} }"), "`macro_rules! m` in the `#[cutile::module]` mod"),
    (kernel(module="    struct S;\n    impl S {}"), "`struct S` in the `#[cutile::module]` mod"),
    (kernel(body="fn inner() {}"), "`fn inner` inside a function body"),
    (kernel(body="use std::fs;"), "a `use` inside a function body"),
    ("#![feature(rustc_attrs)]\n" + kernel(), "`#![feature]` is not a kernel attribute"),
    (kernel(body="#[cfg(any())] let a = 1;"), "`#[cfg]` is not a kernel attribute"),
    (kernel(module="    fn f() -> m_type!() {}"), "`m_type!` is not a cutile macro"),
    (kernel(top="use ::cutile_fake::x;"), "`use ::cutile_fake::..`"),
]


@pytest.mark.parametrize(("text", "expected"), REFUSED, ids=[str(i) for i in range(len(REFUSED))])
def test_the_reader_refuses_what_is_not_on_its_list_with_the_line(tmp_path, text, expected):
    found = refused(tmp_path, text)
    assert any(expected in why for why in found), found
    line = next(int(why.split(":")[0].removeprefix("line ")) for why in found if expected in why)
    assert text.splitlines()[line - 1] not in kernel().splitlines(), (line, text)  # the construct's own line


def test_every_kernel_we_have_is_on_the_list(tmp_path, tilegym_wheel):
    kernels = sorted(FIXTURES.rglob("kernel.rs")) + sorted(
        (tilegym_wheel / "tilegym/ops/cutile_rs").glob("*/kernel.rs")
    )
    kernels += [
        p for p in sorted((FIXTURES / "kernels").glob("*.rs")) if p.stem not in ("malformed", "no_module")
    ]
    assert len(kernels) > 20
    for path in kernels:
        assert refused(tmp_path, path.read_text()) == [], path
    # what the list holds, each once: cutile's uses (glob, names, a group, its own module),
    # constants, device helpers, doc comments, lint attributes, cutile's macros under any path
    allowed = kernel(
        body="let s = const_shape![4, 8];\nlet a = cutile::core::const_array![1, 2];\n#[allow(unused)] let b = 1;",
        top="use cutile::{core::*, tile_kernel::TileKernel};\nuse m_module::k;",
        module="    /// a helper\n    #[inline]\n    fn helper() {}\n    const C: i32 = 4;",
    )
    assert refused(tmp_path, "#![allow(unused)]\n" + allowed) == []
    quiet = 'let s = "env!(X)"; // include_str!("x")\n'
    assert refused(tmp_path, kernel(body=quiet)) == []  # text in strings and comments is not code


def test_a_leaking_kernel_is_a_kernel_failure_before_anything_reads_it(tmp_path):
    target = Target(tmp_path, "leaky")
    target.kernel_dir.mkdir(parents=True)
    target.kernel_rs.write_text(f"#[cutile::module]\npub mod leaky_module {{\n    {LEAK}\n}}\n")
    with pytest.raises(Failed) as stop:
        read_signature(target)
    assert stop.value.klass == "kernel" and "line 3: a `compile_error!` item in the" in stop.value.reason
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
    from bot.build.compiler_output import redact_outside

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
