"""Where a fault is, for the check run's annotations (bot/build/annotations.py), from real evidence: cargo's
JSON diagnostics of real builds, the kernel reader's refusals and parse errors, and the cutile JIT's
own error on a kernel rustc accepts (the JIT run on the host through cutile's compile-only API)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bot.build import annotations, build, compiler_output
from bot.build.toolchain import Toolchain, resolve
from bot.classify.types import Verdict, VerdictKind
from bot.emit.stage_generate import read_signature
from bot.errors import Failed, OwnBug
from bot.targets.types import Target
from bot.testing.stage_tests import with_jit_places
from bot.testing.types import TestResult
from bot.testresults.log import parse_log
from bot.wheel import default_cache_dir

FIXTURES = Path(__file__).parent / "fixtures"
CARGO_TOML = (
    '[package]\nname = "cutile-kernels"\nversion = "0.0.0"\nedition = "2021"\n\n[lib]\npath = "src/lib.rs"\n'
)
# kernel "bad": a type error on its own (line 3), and one inside a macro its line 7 calls
BAD_KERNEL = """pub fn entry() -> u8 {
    let width: u8 = 4;
    let wrong: u8 = "not a number";
    width + wrong
}
macro_rules! twice { () => { let _t: u8 = 1u16; }; }
pub fn called() { twice!(); }
"""
GOOD_KERNEL = "pub fn entry() -> u8 { 4 }\n"
BAD_FFI = 'pub fn cutile_gen() -> i32 {\n    let n: i32 = "generated";\n    n\n}\n'
CONSEQUENCE_FFI = 'pub fn cutile_bad() -> i32 { let n: i32 = "after the kernel"; n }\n'
OUTSIDE = 'pub fn leak() -> i32 { "RUNNER-LINE" }\n'


def _cargo() -> str:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.fail("cargo is part of the test environment")
    return cargo


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """A checkout whose crate holds kernel "bad" (its kernel.rs does not compile, nor its ffi.rs),
    kernel "gen" (only its generated ffi.rs does not) and a module outside the checkout that does
    not; built once, for real."""
    root = tmp_path_factory.mktemp("broken")
    repo = root / "checkout"
    outside = root / "runner" / "secret.rs"
    outside.parent.mkdir()
    outside.write_text(OUTSIDE)
    bad, gen = Target(repo, "bad"), Target(repo, "gen")
    for target, kernel, ffi in ((bad, BAD_KERNEL, CONSEQUENCE_FFI), (gen, GOOD_KERNEL, BAD_FFI)):
        target.kernel_dir.mkdir(parents=True)
        target.kernel_rs.write_text(kernel)
        target.ffi_rs.write_text(ffi)
    (bad.crate_dir / "src").mkdir(parents=True)
    (bad.crate_dir / "Cargo.toml").write_text(CARGO_TOML)
    (bad.crate_dir / "src/lib.rs").write_text(
        f'#[path = "{outside}"]\nmod leak;\n'
        + "".join(
            f'mod {op} {{ include!("../../{op}_kernel/kernel.rs"); include!("../../{op}_kernel/ffi.rs"); }}\n'
            for op in ("bad", "gen")
        )
    )
    crate_build = build.compile_crate(bad.crate_dir, Toolchain(_cargo(), root, None))
    assert crate_build.code not in (0, None), crate_build.log
    return bad, gen, crate_build


def _line_of(text: str, needle: str) -> tuple[int, int]:
    """(line, column) of ``needle`` in ``text``, both from 1."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(needle)


def test_a_cargo_error_in_kernel_rs_is_annotated_at_its_primary_span(broken):
    bad, _, crate_build = broken
    places = annotations.kernel_errors(bad, crate_build.errors)
    line, column = _line_of(BAD_KERNEL, '"not a number"')
    call = _line_of(BAD_KERNEL, "twice!()")[0]  # out of the macro, at the line that calls it
    assert [(p.path, p.start_line, p.end_line, p.level) for p in places] == [
        ("src/tilegym/ops/cutile_rs/bad_kernel/kernel.rs", line, line, "failure"),
        ("src/tilegym/ops/cutile_rs/bad_kernel/kernel.rs", call, call, "failure"),
    ]
    first = places[0]
    assert (first.start_column, first.end_column) == (column, column + len('"not a number"') - 1)
    assert first.title == "cargo error[E0308] in kernel.rs"
    assert first.message.startswith("mismatched types: expected `u8`")


def test_the_build_stop_for_a_kernel_carries_its_annotations(broken):
    bad, gen, crate_build = broken
    with pytest.raises(Failed) as stop:
        build.judge(bad, crate_build)
    assert stop.value.klass == "kernel"
    assert stop.value.annotations == annotations.kernel_errors(bad, crate_build.errors)
    # its ffi.rs does not compile either, most likely because of its kernel.rs: not called agent-d's bug
    assert annotations.generated_errors(bad, crate_build.errors) != ()
    assert {p.path for p in stop.value.annotations} == {"src/tilegym/ops/cutile_rs/bad_kernel/kernel.rs"}


def test_a_generated_ffi_rs_that_does_not_compile_is_annotated_as_agent_d_s_own_bug(broken):
    _, gen, crate_build = broken
    with pytest.raises(OwnBug) as stop:
        build.judge(gen, crate_build)
    [place] = stop.value.annotations
    line, column = _line_of(BAD_FFI, '"generated"')
    assert (place.path, place.start_line, place.start_column) == (
        "src/tilegym/ops/cutile_rs/gen_kernel/ffi.rs",
        line,
        column,
    )
    assert place.level == "warning" and place.title.startswith("agent-d's own bug: cargo error[E0308]")
    assert "agent-d's own bug, not the kernel's" in place.message


def test_an_error_in_a_file_outside_the_checkout_is_never_annotated(broken):
    bad, gen, crate_build = broken
    assert any(e.source is None and e.file == compiler_output.OUTSIDE for e in crate_build.errors)
    shown = [
        place
        for target in (bad, gen)
        for find in (annotations.kernel_errors, annotations.generated_errors)
        for place in find(target, crate_build.errors)
    ]
    assert all("RUNNER-LINE" not in p.message and "runner" not in p.path for p in shown)
    assert {p.path for p in shown} == {
        "src/tilegym/ops/cutile_rs/bad_kernel/kernel.rs",
        "src/tilegym/ops/cutile_rs/bad_kernel/ffi.rs",
        "src/tilegym/ops/cutile_rs/gen_kernel/ffi.rs",
    }


def _kernel(tmp_path: Path, text: str) -> Target:
    target = Target(tmp_path, "probe")
    target.kernel_dir.mkdir(parents=True)
    target.kernel_rs.write_text(text)
    return target


def test_a_refused_construct_is_annotated_at_its_line_and_column(tmp_path):
    text = (
        "use cutile::core::*;\n#[cutile::module]\npub mod probe_module {\n    use cutile::core::*;\n"
        "    #[cutile::entry()]\n    pub unsafe fn k(x: &Tensor<f32, { [-1] }>) {\n"
        '        let t = env!("GH_PAT");\n    }\n}\n'
    )
    with pytest.raises(Failed) as stop:
        read_signature(_kernel(tmp_path, text))
    [place] = stop.value.annotations
    line, column = _line_of(text, "env!")
    assert (place.path, place.start_line, place.start_column, place.level) == (
        "src/tilegym/ops/cutile_rs/probe_kernel/kernel.rs",
        line,
        column,
        "failure",
    )
    assert "`env!` is not a cutile macro" in place.message and "allow-list" in place.title


def test_a_kernel_that_does_not_parse_is_annotated_where_the_parser_stopped(tmp_path):
    text = "#[cutile::module]\npub mod probe_module {\n    pub fn f() { let = ; }\n}\n"
    with pytest.raises(Failed) as stop:
        read_signature(_kernel(tmp_path, text))
    [place] = stop.value.annotations
    assert (place.start_line, place.title) == (3, "kernel.rs does not parse")
    assert f"kernel.rs:3:{place.start_column}: {place.message}" in stop.value.reason


@pytest.fixture(scope="module")
def jit_error(tmp_path_factory, cargo_target_dir) -> tuple[Target, str]:
    """The probe kernel's checkout, and what the JIT said about it, run on the host."""
    repo = tmp_path_factory.mktemp("jit") / "checkout"
    target = Target(repo, "probe")
    target.kernel_dir.mkdir(parents=True)
    shutil.copy2(FIXTURES / "jit_probe" / "kernel.rs", target.kernel_rs)
    (target.crate_dir / "src").mkdir(parents=True)
    shutil.copy2(FIXTURES / "jit_probe" / "Cargo.toml", target.crate_dir / "Cargo.toml")
    shutil.copy2(FIXTURES / "jit_probe" / "main.rs", target.crate_dir / "src" / "main.rs")
    env = {**resolve(default_cache_dir()).env(), "CARGO_TARGET_DIR": str(cargo_target_dir)}
    built = subprocess.run([_cargo(), "build", "--release", "--quiet"], cwd=target.crate_dir, env=env,
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(cargo_target_dir / "release" / "agent-d-jit-probe")], cwd=target.crate_dir,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ran.returncode == 1, ran.stdout + ran.stderr
    return target, ran.stderr


@pytest.mark.slow
def test_the_jit_s_error_under_a_failed_launch_is_annotated_on_kernel_rs(jit_error):
    target, said = jit_error
    located = parse_log(said).located
    assert [(at.path, at.line) for at in located] == [("src/../../probe_kernel/kernel.rs", 12)]
    [place] = annotations.from_jit(target, located)
    line, column = _line_of(target.kernel_rs.read_text(), "col_max * scale")
    assert (place.path, place.start_line, place.start_column) == (
        "src/tilegym/ops/cutile_rs/probe_kernel/kernel.rs",
        line,
        column,
    )
    assert place.message.startswith("binary `Mul` requires operands of the same type")
    assert "launch failed" not in place.message and not place.message.startswith("error:")
    # another kernel's place is not this kernel's annotation
    assert annotations.from_jit(Target(target.repo, "other"), located) == ()


@pytest.mark.slow
def test_the_jit_s_place_is_annotated_only_when_the_verdict_blames_the_kernel(jit_error):
    target, said = jit_error
    tests = TestResult(ran=True, command="pytest", exit_code=1, log_path="x", located=parse_log(said).located)
    kernel = with_jit_places(target, Verdict(VerdictKind.FAIL, "kernel", "launch/JIT failure"), tests)
    assert [p.start_line for p in kernel.annotations] == [12]
    host = Verdict(VerdictKind.FAIL, "host", "the contract launches it otherwise")
    assert with_jit_places(target, host, tests).annotations == ()
