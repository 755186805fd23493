"""Which kernels a change adds, and which names are acceptable."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.errors import UsageError
from bot.targets.targets import added_kernels, check_name, find_targets


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.invalid")
    _git(repo, "config", "user.name", "t")
    (repo / "README").write_text("x\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    return repo


def _add_kernel(repo: Path, op: str, message: str) -> None:
    path = repo / "src/tilegym/ops/cutile_rs" / f"{op}_kernel" / "kernel.rs"
    path.parent.mkdir(parents=True)
    path.write_text("#[cutile::module]\npub mod m {}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)


def test_newest_commit_adding_a_kernel(tmp_path):
    repo = _repo(tmp_path)
    _add_kernel(repo, "relu", "add relu")
    assert [t.op for t in find_targets(repo)] == ["relu"]


def test_base_ref_covers_several_commits(tmp_path):
    repo = _repo(tmp_path)
    _add_kernel(repo, "relu", "add relu")
    _add_kernel(repo, "gelu", "add gelu")
    assert sorted(t.op for t in find_targets(repo, base="HEAD~2")) == ["gelu", "relu"]
    assert [t.op for t in find_targets(repo)] == ["gelu"]


def test_several_named_kernels_in_the_order_named_each_once(tmp_path):
    repo = _repo(tmp_path)
    _add_kernel(repo, "relu", "add relu")
    _add_kernel(repo, "gelu", "add gelu")
    assert [t.op for t in find_targets(repo, ["gelu", "relu", "gelu"])] == ["gelu", "relu"]
    assert [t.op for t in find_targets(repo, "relu")] == ["relu"]
    with pytest.raises(UsageError, match="silu"):  # one unknown name refuses them all, naming it
        find_targets(repo, ["relu", "silu"])


def test_modified_kernel_is_not_a_target(tmp_path):
    repo = _repo(tmp_path)
    _add_kernel(repo, "relu", "add relu")
    (repo / "src/tilegym/ops/cutile_rs/relu_kernel/kernel.rs").write_text("// changed\n")
    _git(repo, "commit", "-qam", "edit")
    with pytest.raises(UsageError, match="no kernel.rs added"):
        find_targets(repo)


def test_other_files_are_ignored():
    diff = (
        "diff --git a/src/tilegym/ops/cutile_rs/x_kernel/notes.md b/src/tilegym/ops/cutile_rs/x_kernel/notes.md\n"
        "new file mode 100644\n--- /dev/null\n+++ b/src/tilegym/ops/cutile_rs/x_kernel/notes.md\n@@ -0,0 +1 @@\n+hi\n"
    )
    assert added_kernels(diff) == []


@pytest.mark.parametrize("bad", ["../etc", "Relu", "a-b", "1x", "ffi_util", "cutile_kernels", "", "a b"])
def test_names_that_are_not_plain_identifiers_are_rejected(bad):
    with pytest.raises(UsageError, match="not a plain identifier"):
        check_name(bad)


def test_plain_name_is_accepted():
    assert check_name("silu_and_mul") == "silu_and_mul"
