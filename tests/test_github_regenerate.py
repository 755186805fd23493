"""finalize's own generation: the PR head copied out of git, agent-d's generator run on it, a tree."""

from __future__ import annotations

import os

from test_github_support import OPS, fake_generate, git, make_local_repo

from bot.demo import assemble_checkout
from bot.github import gitops
from bot.github.artifact import read_artifact
from bot.github.port_job import run_port_job
from bot.github.regenerate import materialize, regenerated_tree
from bot.pipeline import generate_only


def test_the_real_generator_reproduces_the_tree_the_port_job_tested(tmp_path, tilegym_wheel):
    co = assemble_checkout(tmp_path / "demo", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"])

    def generate_then_stop(repo, op):  # the port's generation; building and testing are not this test's
        assert generate_only(repo, op) == ""
        return "FAIL", "host", "not built here", ""

    art = read_artifact(
        run_port_job(
            co.repo,
            co.head_sha,
            ["silu_and_mul"],
            tmp_path / "art",
            generate_then_stop,
            "o/r",
            base_sha=co.base_sha,
        )
    )
    assert {f"{OPS}/silu_and_mul_kernel/ffi.rs", f"{OPS}/silu_and_mul.py"} <= set(art.changed_paths)
    tree, notes = regenerated_tree(co.repo / ".git", co.head_sha, ["silu_and_mul"], generate_only)
    assert notes == [] and tree == art.tested_tree != art.base_tree


def test_the_copy_holds_regular_files_only_and_ignores_export_attributes(tmp_path):
    repo = tmp_path / "repo"
    make_local_repo(repo)
    (repo / OPS / "evil.py").symlink_to("/etc/hostname")
    (repo / ".gitattributes").write_text("* export-ignore\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "plant a link")
    copy = materialize(repo / ".git", "HEAD", tmp_path / "copy")
    assert not os.path.lexists(copy / OPS / "evil.py")
    assert (copy / "README.md").read_text() == (repo / "README.md").read_text()
    assert (copy / OPS / "cutile_kernels/src/lib.rs").is_file()


def test_ops_that_generate_nothing_say_why_and_leave_the_head_tree(tmp_path):
    repo = tmp_path / "repo"
    head = make_local_repo(repo)
    tree, notes = regenerated_tree(repo / ".git", head, ["silu_and_mul"], lambda r, op: "cannot infer: grid")
    assert tree == gitops.tree_of(repo / ".git", head) and notes == ["silu_and_mul: cannot infer: grid"]
    tree, notes = regenerated_tree(repo / ".git", head, ["silu_and_mul"], fake_generate)
    assert tree != gitops.tree_of(repo / ".git", head) and notes == []
