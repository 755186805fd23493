"""Assembly of the demo checkout from the real tilegym wheel (downloaded with pip on first use)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import bot.wheel as wheel_mod
from bot.demo import (
    ASSETS_DIR,
    AssembledCheckout,
    AssemblyError,
    assemble_checkout,
    remove_import_line,
    remove_lib_block,
    remove_test_block,
)
from bot.emit.wiring import package_init
from bot.wheel import WheelUnavailable, tilegym_wheel

ALL_OPS = ["matmul", "bmm", "silu_and_mul", "swiglu", "attention_sink"]
CRS = "src/tilegym/ops/cutile_rs"
LIB_RS = f"{CRS}/cutile_kernels/src/lib.rs"
FFI_UTIL_LINE = re.compile(r'^#\[path = "\.\./\.\./ffi_util\.rs"\]\s*mod ffi_util;', re.MULTILINE)
TEST_BLOCK = re.compile(
    r'^([ \t]*)if is_backend_available\("cutile-rs"\):\n\1[ \t]+_backends = _backends \+ \["cutile-rs"\]\n',
    re.MULTILINE,
)


@pytest.fixture(scope="session")
def wheel_root(pytestconfig, tmp_path_factory) -> Path:
    cache = os.environ.get("AGENT_D_CACHE")
    if not cache:
        pcache = getattr(pytestconfig, "cache", None)
        cache = pcache.mkdir("agent-d-cache") if pcache else tmp_path_factory.mktemp("agent-d-cache")
    try:
        return tilegym_wheel(Path(cache))
    except WheelUnavailable as exc:  # no network and no cached wheel
        pytest.skip(f"tilegym wheel unavailable: {exc}")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def show(repo: Path, rev: str, path: str) -> str:
    return git(repo, "show", f"{rev}:{path}")


def tree(repo: Path, rev: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", rev).split())


def wheel_files(wheel_root: Path) -> dict[str, Path]:
    base = wheel_root / "tilegym"
    return {
        "src/tilegym/" + p.relative_to(base).as_posix(): p
        for p in base.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def check_checkout(co: AssembledCheckout, wheel_root: Path, ops: list[str], port: list[str]) -> None:
    repo = co.repo
    # Two commits, head on top of base.
    assert git(repo, "rev-list", "HEAD").split() == [co.head_sha, co.base_sha]
    assert git(repo, "log", "-1", "--format=%an <%ae>", co.base_sha).strip() == (
        "agent-d demo <demo@agent-d.invalid>"
    )
    # Head adds exactly the port ops' kernel.rs, byte-identical to the wheel.
    diff = git(repo, "diff", "--name-status", co.base_sha, co.head_sha).splitlines()
    assert sorted(diff) == sorted(f"A\t{CRS}/{op}_kernel/kernel.rs" for op in port)
    for op in port:
        rel = f"{op}_kernel/kernel.rs"
        assert (
            show(repo, co.head_sha, f"{CRS}/{rel}")
            == (wheel_root / "tilegym/ops/cutile_rs" / rel).read_text()
        )
    # The work tree is clean and at head.
    assert git(repo, "status", "--porcelain") == ""

    base_files = tree(repo, co.base_sha)
    init = show(repo, co.base_sha, f"{CRS}/__init__.py")
    lib = show(repo, co.base_sha, LIB_RS)
    assert FFI_UTIL_LINE.search(lib)
    for op in ALL_OPS:
        present = op in ops and op not in port
        for f in (f"{CRS}/{op}_kernel/kernel.rs", f"{CRS}/{op}_kernel/ffi.rs", f"{CRS}/{op}.py"):
            assert (f in base_files) == present, f
        assert (f"from . import {op}  #" in init) == present
        assert (re.search(rf"^mod {op} \{{", lib, re.MULTILINE) is not None) == present
        assert (f"tests/ops/test_{op}.py" in base_files) == (op in ops)
        if op in ops:
            blocks = TEST_BLOCK.findall(show(repo, co.base_sha, f"tests/ops/test_{op}.py"))
            assert len(blocks) == (0 if op in port else 1)
    assert "pyproject.toml" in base_files and ".gitignore" in base_files
    assert 'pythonpath = ["src"]' in show(repo, co.base_sha, "pyproject.toml")

    # Files we did not edit are byte-identical to the wheel.
    edited = {f"{CRS}/__init__.py", LIB_RS}
    head_files = tree(repo, co.head_sha)
    for rel, src in wheel_files(wheel_root).items():
        if rel in edited or rel not in head_files:
            continue
        assert (repo / rel).read_bytes() == src.read_bytes(), rel
    # Only the cutile-rs files of dropped or port ops are missing from the runtime.
    missing = {rel for rel in wheel_files(wheel_root) if rel not in head_files}
    for rel in missing:
        m = re.fullmatch(rf"{CRS}/(\w+?)(?:_kernel/ffi\.rs|_kernel/kernel\.rs|\.py)", rel)
        assert m and (m.group(1) not in ops or (m.group(1) in port and not rel.endswith("kernel.rs"))), rel

    # Our test files compile.
    for rel in head_files:
        if rel.startswith("tests/") and rel.endswith(".py"):
            compile((repo / rel).read_bytes(), rel, "exec")


def test_single_op_demo(tmp_path, wheel_root):
    co = assemble_checkout(tmp_path / "demo", wheel_root, ops=["silu_and_mul"], port_ops=["silu_and_mul"])
    check_checkout(co, wheel_root, ["silu_and_mul"], ["silu_and_mul"])
    assert git(co.repo, "log", "-1", "--format=%s", co.head_sha).strip() == "port: add silu_and_mul kernel.rs"
    lib = show(co.repo, co.base_sha, LIB_RS)
    assert "include!" not in lib  # the other four ops are gone too

    # Re-assembly replaces the directory and reproduces the SHAs.
    (co.repo / "stray.txt").write_text("x")
    again = assemble_checkout(co.repo, wheel_root, ops=["silu_and_mul"], port_ops=["silu_and_mul"])
    assert (again.base_sha, again.head_sha) == (co.base_sha, co.head_sha)
    assert not (co.repo / "stray.txt").exists()


def test_all_ops_ported(tmp_path, wheel_root):
    co = assemble_checkout(tmp_path / "all", wheel_root, ops=ALL_OPS, port_ops=ALL_OPS)
    check_checkout(co, wheel_root, ALL_OPS, ALL_OPS)
    other = assemble_checkout(tmp_path / "all2", wheel_root, ops=ALL_OPS, port_ops=ALL_OPS)
    assert (other.base_sha, other.head_sha) == (co.base_sha, co.head_sha)


def test_partial_port_keeps_other_ops_wired(tmp_path, wheel_root):
    ops = ["matmul", "swiglu", "attention_sink"]
    co = assemble_checkout(tmp_path / "part", wheel_root, ops=ops, port_ops=["attention_sink"])
    check_checkout(co, wheel_root, ops, ["attention_sink"])


def test_rejects_bad_requests(tmp_path, wheel_root):
    with pytest.raises(AssemblyError):
        assemble_checkout(tmp_path / "x", wheel_root, ops=["softmax"], port_ops=[])
    with pytest.raises(AssemblyError):
        assemble_checkout(tmp_path / "x", wheel_root, ops=["bmm"], port_ops=["matmul"])
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("keep")
    with pytest.raises(AssemblyError):
        assemble_checkout(precious, wheel_root, ops=["bmm"], port_ops=["bmm"])
    assert (precious / "keep.txt").read_text() == "keep"


def test_lib_block_removal_is_exact():
    text = '#[path = "../../ffi_util.rs"]\nmod ffi_util;\n\nmod a {\n    x;\n}\n\nmod ab {\n    y;\n}\n'
    assert (
        remove_lib_block(text, "a") == '#[path = "../../ffi_util.rs"]\nmod ffi_util;\n\nmod ab {\n    y;\n}\n'
    )
    assert (
        remove_lib_block(text, "ab") == '#[path = "../../ffi_util.rs"]\nmod ffi_util;\n\nmod a {\n    x;\n}\n'
    )
    with pytest.raises(AssemblyError):
        remove_lib_block(text, "b")


def test_removing_the_last_import_leaves_an_importable_package_and_wiring_undoes_it():
    head = "from tilegym.backend import is_backend_available\n\n"
    guard = 'if is_backend_available("cutile-rs"):\n'
    two = head + guard + "    from . import a  # noqa: F401\n    from . import b  # noqa: F401\n"
    one = remove_import_line(two, "a")
    assert one == head + guard + "    from . import b  # noqa: F401\n"  # others stay: no pass added
    empty = remove_import_line(one, "b")
    assert empty == head + guard + "    pass\n"
    compile(empty, "__init__.py", "exec")
    assert (
        package_init(empty, "b")
        == head + guard + "    from . import b  # noqa: F401  (register dispatch entry)\n"
    )
    with pytest.raises(AssemblyError):
        remove_import_line(empty, "b")


def test_asset_test_files_hold_one_cutile_rs_block_at_the_right_level():
    levels = {}
    for path in sorted((ASSETS_DIR / "tests" / "ops").glob("test_*.py")):
        text = path.read_text()
        blocks = TEST_BLOCK.findall(text)
        assert len(blocks) == 1, path.name
        levels[path.stem[len("test_") :]] = blocks[0]
        stripped = remove_test_block(text)
        assert 'is_backend_available("cutile-rs")' not in stripped
        assert '["cutile-rs"]' not in stripped
        compile(stripped, str(path), "exec")
    assert levels == {
        "silu_and_mul": "    ",
        "swiglu": "    ",
        "matmul": "    ",
        "bmm": "    ",
        "attention_sink": "",
    }


def test_wheel_is_reused_without_pip(wheel_root, tmp_path, monkeypatch):
    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the wheel is cached")

    monkeypatch.setattr(wheel_mod.subprocess, "run", no_pip)
    assert tilegym_wheel(wheel_root.parent) == wheel_root
    # Unpacking again from the cached .whl (root removed) also needs no pip.
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    whl = next((wheel_root.parent / "wheels").glob("tilegym-1.5.1-*.whl"))
    (cache / "wheels" / whl.name).write_bytes(whl.read_bytes())
    root = tilegym_wheel(cache)
    assert root == cache / "tilegym-1.5.1"
    assert (root / "tilegym" / "ops" / "cutile_rs" / "ffi_util.rs").is_file()


def test_wheel_unavailable_when_pip_fails(tmp_path, monkeypatch):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ERROR: No matching distribution found' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(wheel_mod.sys, "executable", str(fake))
    with pytest.raises(WheelUnavailable, match="No matching distribution"):
        tilegym_wheel(tmp_path / "cache", version="0.0.0")
    monkeypatch.setattr(wheel_mod.sys, "executable", str(tmp_path / "missing-python"))
    with pytest.raises(WheelUnavailable):
        tilegym_wheel(tmp_path / "cache", version="0.0.0")


def test_unexpected_wheel_layout_fails_cleanly(tmp_path, wheel_root):
    broken = tmp_path / "wheel"
    shutil.copytree(wheel_root / "tilegym", broken / "tilegym")
    lib = broken / "tilegym" / "ops" / "cutile_rs" / "cutile_kernels" / "src" / "lib.rs"
    lib.write_text(remove_lib_block(lib.read_text(), "silu_and_mul"))
    dest = tmp_path / "demo"
    with pytest.raises(AssemblyError, match="silu_and_mul"):
        assemble_checkout(dest, broken, ops=["silu_and_mul"], port_ops=["silu_and_mul"])
    assert not dest.exists()


def test_assemble_demo(tmp_path, wheel_root, monkeypatch):
    from bot.demo import assemble_demo

    monkeypatch.setenv("AGENT_D_CACHE", str(wheel_root.parent))
    co = assemble_demo(tmp_path)
    assert co.repo == tmp_path / "tilegym-demo"
    check_checkout(co, wheel_root, ["silu_and_mul"], ["silu_and_mul"])
    assert assemble_demo(tmp_path) == co


def test_demo_rerun_keeps_its_cargo_target(tmp_path, wheel_root, monkeypatch):
    """`agent-d demo` twice: the checkout is replaced, the compiled dependencies are not."""
    from bot import cli
    from bot.demo import demo_cargo_target

    monkeypatch.setenv("AGENT_D_CACHE", str(wheel_root.parent))
    used: list = []
    monkeypatch.setattr(cli, "port", lambda options: used.append(options.cargo_target_dir) or [object()])
    workdir = tmp_path / "demo"
    assert cli.main(["demo", "--workdir", str(workdir), "--quiet"]) == 0
    target = demo_cargo_target(workdir.resolve())
    compiled = target / "release" / "deps" / "libcutile-0.2.0.rlib"
    compiled.parent.mkdir(parents=True)
    compiled.write_bytes(b"compiled once")  # what the first run's cargo build leaves
    assert cli.main(["demo", "--workdir", str(workdir), "--quiet"]) == 0
    assert used == [target, target]
    assert compiled.read_bytes() == b"compiled once"
    assert not target.is_relative_to(workdir / "tilegym-demo")  # outside what every run replaces
