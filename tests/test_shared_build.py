"""One build per pull request: the kernels a change adds are generated and applied first, the crate
is built once, then each kernel is smoked and tested with its own verdict. A kernel whose kernel.rs
does not compile is left out of a second build and gets its own FAIL (kernel); the others still
build, export and pass the ABI smoke. Cargo's runs are counted by a wrapper in front of the real one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from checkout_support import OPS_DIR, checkout_with_kernels
from port_support import port_json

from bot.cli import main
from bot.emit import wiring
from bot.github.artifact import read_artifact
from bot.github.regenerate import regenerated_tree
from bot.pipeline import generate_only

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).parent / "fixtures" / "ops"
OPS = ["square_rows", "row_softmax", "tile_copy"]
TYPE_ERROR = ' let _bad: u8 = "not a number";'


@pytest.fixture()
def cargo_runs(tmp_path, monkeypatch):
    """A ``cargo`` first on PATH that notes each ``cargo build`` and hands every call to the real one."""
    real = shutil.which("cargo")
    if real is None:
        pytest.fail("cargo is part of the test environment")
    counted = tmp_path / "cargo-builds.txt"
    counted.write_text("")
    wrapper_dir = tmp_path / "counting-cargo"
    wrapper_dir.mkdir()
    wrapper = wrapper_dir / "cargo"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = build ] && echo "$PWD" >> "{counted}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper_dir}{os.pathsep}{os.environ['PATH']}")
    return lambda: counted.read_text().splitlines()


@pytest.fixture()
def repo(tmp_path, tilegym_wheel):
    return checkout_with_kernels(tmp_path / "tg", tilegym_wheel, FIXTURES, OPS)


def _stages(entry: dict) -> dict[str, dict]:
    return {s["name"]: s for s in entry["stages"]}


def test_three_kernels_of_one_change_are_built_by_one_cargo_run(repo, cargo_target_dir, cargo_runs, capsys):
    code, err, results = port_json(repo, "HEAD~1", cargo_target_dir, capsys)
    assert code == 3, err  # BLOCKED: only because this machine has no GPU
    assert len(cargo_runs()) == 1, cargo_runs()
    assert sorted(results) == sorted(OPS)
    for op, entry in results.items():
        stages = _stages(entry)
        assert stages["build"]["status"] == "ok", stages["build"]
        assert "1 build for 3 kernels" in stages["build"]["detail"], stages["build"]
        assert f"cutile_{op} exported" in stages["build"]["detail"]
        assert stages["abi smoke"]["status"] == "ok" and "returned -5" in stages["abi smoke"]["detail"]
        assert (entry["verdict"], entry["class"]) == ("BLOCKED", "env"), entry
        log = repo / "cutile_kernel_out" / op / "build_cargo.txt"
        assert log.read_text().rstrip().endswith("exit=0")
    lib_rs = (repo / OPS_DIR / "cutile_kernels/src/lib.rs").read_text()
    assert all(f"mod {op} {{" in lib_rs for op in OPS)


def test_a_kernel_that_does_not_compile_is_left_out_and_the_others_still_build(
    repo, tmp_path, cargo_target_dir, cargo_runs, monkeypatch, capsys
):
    kernel = repo / OPS_DIR / "row_softmax_kernel" / "kernel.rs"
    line = "let first_block: i32 = get_tile_block_id().0;"
    assert line in kernel.read_text()
    kernel.write_text(kernel.read_text().replace(line, line + TYPE_ERROR, 1))
    subprocess.run(["git", "commit", "-qam", "row_softmax: a type error"], cwd=repo, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    monkeypatch.setenv("CARGO_TARGET_DIR", str(cargo_target_dir))  # honoured by the build stage
    artifact_dir = tmp_path / "artifact"
    # --no-sandbox: the counting cargo notes each build in a file outside the checkout, which the
    # sandbox of PR code rightly does not let it write (tests/test_sandbox.py)
    # the base already has the three kernels (and their contracts); the change edits one kernel.rs
    base = subprocess.run(
        ["git", "rev-parse", "HEAD~1"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    code = main(["port-job", "--repo", str(repo), "--head-sha", head, "--base-sha", base,
                 "--kernel", " ".join(OPS), "--artifact", str(artifact_dir), "--no-sandbox"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert len(cargo_runs()) == 2, cargo_runs()  # all three, then without row_softmax
    verdicts = read_artifact(artifact_dir).verdicts
    broken = verdicts["row_softmax"]
    assert (broken.kind, broken.klass) == ("FAIL", "kernel"), broken
    assert "cargo error in kernel.rs" in broken.reason and "row_softmax_kernel/kernel.rs" in broken.reason
    broken_log = (repo / "cutile_kernel_out" / "row_softmax" / "build_cargo.txt").read_text()
    assert "mismatched types" in broken_log and broken_log.rstrip().endswith("exit=101")
    for op in ("square_rows", "tile_copy"):
        assert (verdicts[op].kind, verdicts[op].klass) == ("BLOCKED", "env"), verdicts[op]  # no GPU here
        decisions = (repo / "cutile_kernel_out" / op / "reports" / "agent_logs" / "agent_d.md").read_text()
        assert (
            "stage build: ok" in decisions
            and "2 builds for 3 kernels, the last without row_softmax" in decisions
        )
        assert "stage abi smoke: ok" in decisions, decisions
        assert (repo / "cutile_kernel_out" / op / "build_cargo.txt").read_text().rstrip().endswith("exit=0")
    # the rebuild's library has the good kernels only; the wiring taken out is back afterwards
    so = repo / OPS_DIR / "cutile_kernels/target/release/libcutile_kernels.so"
    from bot.report.validator import exported_functions

    symbols = set(exported_functions(so))
    assert {"cutile_square_rows", "cutile_tile_copy"} <= symbols and "cutile_row_softmax" not in symbols
    lib_rs = (repo / OPS_DIR / "cutile_kernels/src/lib.rs").read_text()
    assert all(f"mod {op} {{" in lib_rs for op in OPS)
    init = (repo / OPS_DIR / "__init__.py").read_text()
    assert all(f"from . import {op}" in init for op in OPS)
    # so the tested tree is what finalize regenerates from the head, and it publishes it
    regenerated, notes = regenerated_tree(repo / ".git", head, OPS, generate_only)
    assert notes == [] and regenerated == read_artifact(artifact_dir).tested_tree


def test_wiring_taken_out_for_a_rebuild_is_only_that_kernels():
    lib = wiring.lib_rs(wiring.lib_rs('#[path = "../../ffi_util.rs"]\nmod ffi_util;\n', "a"), "b")
    without_a = wiring.lib_rs_without(lib, "a")
    assert "mod a {" not in without_a and "mod b {" in without_a and "mod ffi_util;" in without_a
    assert wiring.lib_rs_without(lib, "c") == lib
    assert wiring.lib_rs(without_a, "a").count("mod a {") == 1  # wiring it again is the usual edit
    init = wiring.package_init(wiring.package_init(None, "a"), "b")
    assert "import a" not in wiring.package_init_without(init, "a")
    emptied = wiring.package_init_without(wiring.package_init_without(init, "a"), "b")
    compile(emptied, "__init__.py", "exec")  # the guard keeps a body
    assert emptied.rstrip().endswith("pass")
