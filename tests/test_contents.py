"""Generated files hold only what their kind may (bot/emit/contents.py): each thing planted is found
with its line, real generated files have none, and a port whose wrapper holds one is BLOCKED (host)
with nothing applied (issue 33, deliverable 2)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot import pipeline
from bot.demo import assemble_checkout
from bot.emit import contents, generate
from bot.emit.stage_generate import make_plan
from bot.pipeline import PortOptions
from bot.targets.types import Target

OP = "silu_and_mul"


@pytest.fixture()
def demo(tmp_path, tilegym_wheel):
    return assemble_checkout(tmp_path / "tilegym", tilegym_wheel, [OP], [OP]).repo


def _generated(repo: Path, tmp_path: Path) -> dict[str, str]:
    from bot.apply import apply

    target = Target(repo, OP)
    plan, _, co = make_plan(target, tmp_path / "plan")
    files = apply.formatted(generate.generate(target, plan, co), repo)
    return {f.path: f.content for f in files.files if f.kind == "new"}


@pytest.mark.parametrize(
    ("planted", "found"),
    [
        ('    std::process::Command::new("sh").spawn().ok();', "names std::process::Command::new"),
        ('    eprintln!("{}", compile_error!(include_str!("/etc/passwd")));', "invokes compile_error!"),
        ('    eprintln!("{}", include_str!("/etc/passwd"));', "invokes include_str!"),
        ('    let _b = include_bytes!("/root/.cargo/credentials.toml");', "invokes include_bytes!"),
        ('    let _h = std::fs::read_to_string("/etc/hostname");', "names std::fs::read_to_string"),
        ('    let _v = env!("HOME");', "invokes env!"),
    ],
)
def test_each_thing_planted_in_ffi_rs_is_found_with_its_line(demo, tmp_path, planted, found):
    (path, text), *_ = [(p, t) for p, t in _generated(demo, tmp_path).items() if p.endswith("ffi.rs")]
    assert contents.rust_outside(path, text, {f"{OP}_module"}) == []
    # inside a macro's body, where syn's visitors do not look
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "macro_rules!" in line or "fn cutile_" in line) + 2
    planted_text = "\n".join([*lines[:at], planted, *lines[at:]])
    outside = contents.rust_outside(path, planted_text, {f"{OP}_module"})
    assert found in [o.what for o in outside] and {(o.path, o.line) for o in outside} == {(path, at + 1)}


@pytest.mark.parametrize(
    ("item", "found"),
    [
        ("mod stolen;", "has an item that reaches outside it: mod from another file"),
        ("extern crate libc;", "has an item that reaches outside it: extern crate"),
        (
            'unsafe extern "C" { fn system(c: *const u8) -> i32; }',
            "has an item that reaches outside it: extern block",
        ),
        ('#[link(name = "evil")]\nfn nothing() {}', "has the attribute #[link]"),
        ('#[path = "/etc/passwd"]\nmod p {}', "has the attribute #[path]"),
    ],
)
def test_an_item_that_reaches_another_file_or_crate_is_found(item, found):
    outside = contents.rust_outside("ffi.rs", f"use cutile::prelude::*;\n{item}\n", set())
    assert [o.what for o in outside] == [found]


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("import os", "imports os"),
        ("from subprocess import run", "imports subprocess"),
        ("x = __import__('os')", "calls __import__()"),
        ("x = eval('1')", "calls eval()"),
        ("x = ().__class__.__base__", "reads .__class__"),
        ("x = torch.load('/tmp/p')", "reads torch.load"),
        ("x = torch.utils.cpp_extension.load", "reads torch.utils.cpp_extension"),
        ("x = __builtins__", "reads __builtins__"),
    ],
)
def test_each_thing_planted_in_the_wrapper_is_found_with_its_line(demo, tmp_path, line, found):
    (path, text), *_ = [(p, t) for p, t in _generated(demo, tmp_path).items() if p.endswith(f"{OP}.py")]
    assert contents.python_outside(path, text) == []
    planted = text + f"\n\ndef _planted():\n    {line}\n"
    outside = contents.python_outside(path, planted)
    assert found in [o.what for o in outside]
    assert {o.line for o in outside if o.what == found} == {len(planted.splitlines())}


def test_a_port_whose_wrapper_imports_os_is_blocked_and_nothing_is_applied(demo, tmp_path, monkeypatch):
    original = generate._wrapper
    monkeypatch.setattr(
        generate,
        "_wrapper",
        lambda target, plan: (
            original(target, plan).rstrip("\n")
            + "\n\n\ndef _planted():\n    import os\n\n    return os.environ\n"
        ),
    )
    options = PortOptions(repo=demo, kernel=OP, out_root=tmp_path / "out", echo=lambda _: None)
    (result,) = pipeline.port(options)
    verdict = result.verdict
    assert (verdict.kind.value, verdict.klass) == ("BLOCKED", "host"), verdict
    assert "a generated file holds what agent-d's files never do" in verdict.reason
    assert f"src/tilegym/ops/cutile_rs/{OP}.py:" in verdict.reason and "imports os" in verdict.reason
    assert [s.name for s in result.stages][-1] == "check contents"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=demo, capture_output=True, text=True).stdout
    assert status == "" and result.changed_files == []


def test_a_file_that_is_not_rust_tokens_is_named():
    (outside,) = contents.rust_outside("ffi.rs", 'fn f() { let s = "unterminated; }', set())
    assert outside.what.startswith("not read as Rust tokens")
