"""`agent-d port-job` (the untrusted GPU job) with the real pipeline: generation, a real cargo build,
the artifact that finalize will read, and no token anywhere in the job's environment."""

from __future__ import annotations

import subprocess

import pytest

from bot.cli import main
from bot.demo import assemble_checkout
from bot.github.artifact import read_artifact
from bot.github.regenerate import regenerated_tree
from bot.pipeline import generate_only

pytestmark = pytest.mark.slow
OP = "silu_and_mul"


def test_port_job_writes_a_checked_artifact_from_the_real_pipeline(tmp_path, tilegym_wheel, cargo_target_dir,
                                                                   monkeypatch, capsys):  # fmt: skip
    checkout = assemble_checkout(tmp_path / "tg", tilegym_wheel, [OP], [OP])
    monkeypatch.setenv("CARGO_TARGET_DIR", str(cargo_target_dir))  # honoured by the build stage
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_canaryTOKENthatMustNeverLeak0123456789")
    artifact_dir = tmp_path / "artifact"
    code = main(["port-job", "--repo", str(checkout.repo), "--head-sha", checkout.head_sha,
                 "--base-sha", checkout.base_sha, "--kernel", OP, "--artifact", str(artifact_dir)])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    artifact = read_artifact(artifact_dir)
    verdict = artifact.verdicts[OP]
    assert (verdict.kind, verdict.klass) == ("BLOCKED", "env")  # this machine has no GPU
    assert "<VALIDATOR_OUTPUT>" in verdict.validator_block
    assert artifact.head_sha == checkout.head_sha
    assert "src/tilegym/ops/cutile_rs/silu_and_mul_kernel/ffi.rs" in artifact.changed_paths
    assert "src/tilegym/ops/cutile_rs/silu_and_mul.py" in artifact.changed_paths
    # The patch applied to the tested commit gives exactly the tree the job tested.
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=checkout.repo, check=True)
    subprocess.run(["git", "clean", "-qfdx"], cwd=checkout.repo, check=True)
    subprocess.run(
        ["git", "apply", "--index", str(artifact_dir / "patch.diff")], cwd=checkout.repo, check=True
    )
    tree = subprocess.run(
        ["git", "write-tree"], cwd=checkout.repo, capture_output=True, text=True, check=True
    )
    assert tree.stdout.strip() == artifact.tested_tree
    # finalize's own generation from the head gives that same tree (after a real build and test run)
    regenerated, notes = regenerated_tree(checkout.repo / ".git", checkout.head_sha, [OP], generate_only)
    assert notes == [] and regenerated == artifact.tested_tree
    leaked = [p for p in artifact_dir.rglob("*") if p.is_file() and b"ghs_canaryTOKEN" in p.read_bytes()]
    assert leaked == [] and "ghs_canaryTOKEN" not in out.out + out.err
