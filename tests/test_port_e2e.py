"""`agent-d port` end to end on checkouts assembled from the real wheel, with real cargo builds.

The first build compiles the cutile 0.2.0 crates (minutes on a cold cache); the compiled
dependencies are shared through one cargo target folder, so later builds take seconds.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from bot.cli import main
from bot.demo import assemble_checkout

pytestmark = pytest.mark.slow
OP = "silu_and_mul"


@pytest.fixture()
def demo(tmp_path, tilegym_wheel):
    return assemble_checkout(tmp_path / "tilegym", tilegym_wheel, [OP], [OP]).repo


def _port(repo: Path, cargo_target_dir: Path, capsys, *extra: str) -> tuple[int, str]:
    """The exit status and stdout (the validator block, the verdict line) then stderr (progress)."""
    code = main(["port", "--repo", str(repo), "--cargo-target-dir", str(cargo_target_dir), *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def _tree_digest(repo: Path) -> dict[str, str]:
    skip = ("/target/", "/cutile_kernel_out/", "/.git/", "__pycache__")
    return {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and not any(s in f"/{p.relative_to(repo)}" for s in skip)
    }


def _commit_all(repo: Path, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", message], cwd=repo, check=True)


def test_demo_port_builds_exports_smokes_and_is_blocked_without_gpu(demo, cargo_target_dir, capsys):
    code, out = _port(demo, cargo_target_dir, capsys)
    assert code == 3, out  # BLOCKED
    assert re.search(r"\[agent-d\] build\s+ok .*cutile_silu_and_mul exported", out)
    assert re.search(r"\[agent-d\] abi smoke\s+ok .*returned -5", out)
    assert "<VALIDATOR_OUTPUT>" in out and "</VALIDATOR_OUTPUT>" in out
    stdout = out.split("</VALIDATOR_OUTPUT>\n", 1)[1]
    assert stdout.splitlines()[0] == "VERDICT: BLOCKED"  # right after the block
    assert "BLOCKED (block_class: env): no CUDA GPU" in out
    # one verdict everywhere: nothing in the block or the stage lines reads as a failure
    block = out.split("<VALIDATOR_OUTPUT>")[1].split("</VALIDATOR_OUTPUT>")[0]
    assert not re.search(r"^FAIL", block, re.M), block
    tail = block.rstrip().splitlines()[-2]  # the validator's last line, above its exit=
    assert tail == "PASS" or tail.startswith("NOT RUN: "), block
    assert not re.search(r"^\[agent-d\] [a-z ]+ +FAILED ", out, re.M), out
    reports = demo / "cutile_kernel_out" / OP
    assert (reports / "reports" / "correctness.md").read_text().startswith("VERDICT: FAIL\n")
    assert "block_class: env" in (reports / "reports" / "correctness.md").read_text()
    assert (reports / "reports" / "agent_logs" / "agent_d.md").stat().st_size > 0
    assert (reports / "ffi.rs").read_bytes() == (
        demo / "src/tilegym/ops/cutile_rs/silu_and_mul_kernel/ffi.rs"
    ).read_bytes()
    so = demo / "src/tilegym/ops/cutile_rs/cutile_kernels/target/release/libcutile_kernels.so"
    assert so.is_file()

    # Re-running on the same checkout changes no file.
    before = _tree_digest(demo)
    code2, out2 = _port(demo, cargo_target_dir, capsys)
    assert code2 == 3
    assert re.search(r"\[agent-d\] apply\s+ok .* 0 changed", out2)
    assert _tree_digest(demo) == before


def test_malformed_kernel_is_a_kernel_fault_with_reports(demo, cargo_target_dir, capsys):
    kernel = demo / "src/tilegym/ops/cutile_rs/silu_and_mul_kernel/kernel.rs"
    kernel.write_text(
        kernel.read_text().replace(
            "pub unsafe fn silu_and_mul_kernel<", "pub unsafe fn silu_and_mul_kernel<<", 1
        )
    )
    _commit_all(demo, "break the kernel")
    code, out = _port(demo, cargo_target_dir, capsys, "--kernel", OP)
    assert code == 1, out  # FAIL
    assert "FAIL (fail_class: kernel): kernel.rs does not parse:" in out
    assert re.search(r"kernel\.rs:\d+:\d+", out)
    assert "Traceback" not in out
    correctness = (demo / "cutile_kernel_out" / OP / "reports" / "correctness.md").read_text()
    assert correctness.startswith("VERDICT: FAIL\n") and "fail_class: kernel" in correctness
    assert "agent_b_followup:" in correctness


def test_checkout_without_ffi_util_is_blocked_host_with_reports(demo, cargo_target_dir, capsys):
    (demo / "src/tilegym/ops/cutile_rs/ffi_util.rs").unlink()
    code, out = _port(demo, cargo_target_dir, capsys)
    assert code == 3, out
    assert "BLOCKED (block_class: host): checkout lacks the cutile-rs runtime: missing" in out
    assert "ffi_util.rs" in out and "Traceback" not in out
    assert (demo / "cutile_kernel_out" / OP / "reports" / "correctness.md").is_file()
    assert "VERDICT: BLOCKED" in out


def test_explicit_style_checkout_builds_for_real(demo, cargo_target_dir, capsys):
    util = demo / "src/tilegym/ops/cutile_rs/ffi_util.rs"
    # An older runtime: the helper macros are gone, so agent-d must spell everything out.
    text = re.sub(r"#\[macro_export\]\s*macro_rules!\s*\w+\s*\{.*?\n\}\n", "", util.read_text(), flags=re.S)
    assert "macro_rules!" not in text
    util.write_text(text)
    code, out = _port(demo, cargo_target_dir, capsys)
    assert code == 3, out
    ffi = (demo / "src/tilegym/ops/cutile_rs/silu_and_mul_kernel/ffi.rs").read_text()
    assert "crate::deref_descs!" not in ffi and "if out.is_null() || inp.is_null()" in ffi
    assert re.search(r"\[agent-d\] build\s+ok .*cutile_silu_and_mul exported", out)
    assert re.search(r"\[agent-d\] abi smoke\s+ok", out)


def test_rust_error_inside_kernel_is_a_kernel_fault(demo, cargo_target_dir, capsys):
    kernel = demo / "src/tilegym/ops/cutile_rs/silu_and_mul_kernel/kernel.rs"
    # Parses (syn is happy) but does not type-check: the fault is the kernel author's.
    line = "let pid: i32 = get_tile_block_id().0;"
    kernel.write_text(kernel.read_text().replace(line, line + ' let _bad: u8 = "not a number";', 1))
    code, out = _port(demo, cargo_target_dir, capsys)
    assert code == 1, out
    assert "FAIL (fail_class: kernel): cargo error in kernel.rs" in out
