"""The port's start tree: the base's files plus the ported kernels' inputs, nothing else of the PR."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_github_support import BASE_FILES, KERNEL_RS, OPS, fake_generate, git, kernel_path

from bot.github import gitops
from bot.github.artifact import read_artifact
from bot.github.base_tree import BaseTreeError, reset_worktree, source_tree
from bot.github.path_classes import ClassedPaths, path_class
from bot.github.port_job import run_port_job
from bot.github.pushed_tree import pushed_tree

LIB_RS = f"{OPS}/cutile_kernels/src/lib.rs"
CRATE = f"{OPS}/cutile_kernels"
CONTRACT = f"{OPS}/silu_and_mul_kernel/host_contract.yaml"
TEST_FILE = "tests/ops/test_silu_and_mul.py"
# what the pull request changes besides its kernel, each with the class the review names it by
PR_EDITS = {
    LIB_RS: "mod evil;\n",  # edited
    f"{CRATE}/build.rs": 'fn main() { std::process::Command::new("curl"); }\n',  # added
    f"{CRATE}/Cargo.toml": '[package]\nname = "evil"\n',  # added
    f"{OPS}/ffi_util.rs": "// sibling, edited\n",
    TEST_FILE: "def test_everything():\n    assert True\n",
    "tests/conftest.py": "import os\nos.system('curl evil')\n",
    "src/tilegym/backend/selector.py": "BACKENDS = ['evil']\n",
    "README.md": None,  # deleted
    "docs/new.md": "added\n",
}


def _commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def pr_repo(tmp_path):
    """(repo, base, head): BASE_FILES, then a head adding the kernel and its contract plus PR_EDITS."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = _commit(repo, dict(BASE_FILES), "base")
    kernel = {kernel_path("silu_and_mul"): KERNEL_RS, CONTRACT: "contract_version: 1\n"}
    head = _commit(repo, {**kernel, **PR_EDITS}, "kernel and more")
    return repo, base, head


def _work_tree(repo: Path, start: str) -> str:
    """The tree of the work tree's files (a temporary index: the checkout's own is left alone)."""
    with gitops.temp_index() as env:
        gitops.git(repo, "read-tree", start, env=env)
        gitops.git(repo, "add", "-A", env=env)
        return gitops.git(repo, "write-tree", env=env).strip()


def test_the_start_tree_is_the_base_plus_the_kernels_inputs_and_names_every_other_change(pr_repo):
    repo, base, head = pr_repo
    source = source_tree(repo / ".git", base, head, ["silu_and_mul"])
    files = gitops.tree_entries(repo / ".git", source.tree)
    base_files = gitops.tree_entries(repo / ".git", base)
    assert set(files) == set(base_files) | {kernel_path("silu_and_mul"), CONTRACT}
    assert all(files[p] == base_files[p] for p in base_files)
    assert source.reset == ClassedPaths.of(PR_EDITS)
    assert source.reset.crate == (f"{CRATE}/Cargo.toml", f"{CRATE}/build.rs", LIB_RS, f"{OPS}/ffi_util.rs")
    assert source.reset.tests == ("tests/conftest.py", TEST_FILE)
    assert source.reset.runtime == ("src/tilegym/backend/selector.py",)
    assert source.reset.other == ("README.md", "docs/new.md")
    assert source.reset.guarded() == ["src/tilegym/backend/selector.py", "tests/conftest.py", TEST_FILE]
    # the same in a bare copy (finalize's side) and in the work tree (the port job's side)
    assert source_tree(repo / ".git", base, head, ["silu_and_mul"], bare=True) == source
    assert source_tree(repo, base, head, ["silu_and_mul"], bare=False) == source


def test_the_work_tree_is_put_back_to_the_base_bytes(pr_repo):
    repo, base, head = pr_repo
    source = source_tree(repo, base, head, ["silu_and_mul"], bare=False)
    reset_worktree(repo, source)
    assert _work_tree(repo, head) == source.tree
    assert (repo / LIB_RS).read_text() == BASE_FILES[LIB_RS]
    assert (repo / "README.md").read_text() == BASE_FILES["README.md"]
    assert not (repo / "tests/conftest.py").exists() and not (repo / CRATE / "build.rs").exists()
    assert not (repo / "docs").exists()  # a folder the pull request added goes with its files
    assert (repo / CONTRACT).read_text() == "contract_version: 1\n"
    assert git(repo, "diff", "--cached", "--name-only") == ""  # the checkout's index is untouched


def test_a_link_the_pull_request_put_in_place_of_a_folder_is_removed_not_followed(pr_repo, tmp_path):
    repo, base, _ = pr_repo
    outside = tmp_path / "runner-home"
    outside.mkdir()
    (outside / "test_silu_and_mul.py").write_text("the runner's own file\n")
    git(repo, "rm", "-rq", "tests")
    os.symlink(outside, repo / "tests")  # the base has a tests/ folder here
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tests is a link")
    head = git(repo, "rev-parse", "HEAD").strip()
    source = source_tree(repo, base, head, ["silu_and_mul"], bare=False)
    assert "tests" in source.reset.tests
    reset_worktree(repo, source)
    assert not (repo / "tests").is_symlink() and (repo / TEST_FILE).read_text() == BASE_FILES[TEST_FILE]
    assert (outside / "test_silu_and_mul.py").read_text() == "the runner's own file\n"
    assert _work_tree(repo, head) == source.tree


def test_a_kernel_that_is_a_link_or_missing_is_refused(pr_repo):
    repo, base, head = pr_repo
    with pytest.raises(BaseTreeError, match="swiglu_kernel/kernel.rs is not in"):
        source_tree(repo, base, head, ["swiglu"], bare=False)
    (repo / kernel_path("silu_and_mul")).unlink()
    os.symlink("/etc/hostname", repo / kernel_path("silu_and_mul"))
    link_head = _commit(repo, {}, "kernel.rs is a link")
    with pytest.raises(BaseTreeError, match="is not a regular file"):
        source_tree(repo, base, link_head, ["silu_and_mul"], bare=False)


def test_a_contract_the_head_removed_is_not_taken_from_the_base(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = _commit(repo, {**BASE_FILES, CONTRACT: "contract_version: 1\n"}, "base with a contract")
    head = _commit(repo, {kernel_path("silu_and_mul"): KERNEL_RS, CONTRACT: None}, "kernel, no contract")
    source = source_tree(repo, base, head, ["silu_and_mul"], bare=False)
    assert CONTRACT not in gitops.tree_entries(repo, source.tree, bare=False) and not source.reset


@pytest.mark.parametrize(
    ("path", "klass"),
    [
        ("src/tilegym/ops/cutile_rs/cutile_kernels/src/lib.rs", "crate"),
        ("src/tilegym/ops/cutile_rs/cutile_kernels/Cargo.lock", "crate"),
        ("src/tilegym/ops/cutile_rs/cutile_kernels/.cargo/config.toml", "crate"),
        ("src/tilegym/ops/cutile_rs/swiglu_kernel/kernel.rs", "crate"),  # another kernel's
        ("rust-toolchain.toml", "crate"),
        ("tests/ops/helpers.py", "tests"),
        ("src/tilegym/conftest.py", "tests"),
        ("pyproject.toml", "tests"),
        ("docs/pyproject.toml", "other"),
        ("src/tilegym/ops/cutile_rs/silu_and_mul.py", "runtime"),
        ("src/tilegym/ops/cutile_rs/silu_and_mul_kernel/host_contract.draft.yaml", "runtime"),
        (".github/workflows/ci.yml", "other"),
    ],
)
def test_each_path_has_the_class_the_review_names_it_by(path, klass):
    assert path_class(path) == klass


def test_the_port_job_builds_the_base_files_and_its_artifact_names_what_it_put_back(pr_repo, tmp_path):
    repo, base, head = pr_repo
    seen: dict[str, str] = {}

    def port(checkout: Path, op: str):
        for name in (LIB_RS, TEST_FILE, "src/tilegym/backend/selector.py"):
            seen[name] = (checkout / name).read_text()
        seen["conftest"] = str((checkout / "tests/conftest.py").exists())
        fake_generate(checkout, op)
        return "ALL_PASS", "", "built", ""

    art = read_artifact(
        run_port_job(repo, head, ["silu_and_mul"], tmp_path / "art", port, repo_name="o/r", base_sha=base)
    )
    assert seen == {
        LIB_RS: BASE_FILES[LIB_RS],
        TEST_FILE: BASE_FILES[TEST_FILE],
        "src/tilegym/backend/selector.py": BASE_FILES["src/tilegym/backend/selector.py"],
        "conftest": "False",
    }
    source = source_tree(repo, base, head, ["silu_and_mul"], bare=False)
    assert (art.base_sha, art.base_tree, art.reset, art.reset_count) == (base, source.tree, source.reset, 9)
    assert gitops.apply_patch_to_tree(repo / ".git", source.tree, art.patch) == art.tested_tree
    assert art.changed_paths == [LIB_RS, f"{OPS}/silu_and_mul_kernel/ffi.rs"]
    assert "tests/conftest.py" in art.logs["reset-paths.txt"]


def test_the_pushed_tree_is_the_head_with_agent_ds_files_unless_the_pr_edited_them(pr_repo, tmp_path):
    repo, base, head = pr_repo
    art = read_artifact(
        run_port_job(
            repo, head, ["silu_and_mul"], tmp_path / "art", _generating, repo_name="o/r", base_sha=base
        )
    )
    source = source_tree(repo / ".git", base, head, ["silu_and_mul"])
    pushed = pushed_tree(repo / ".git", source, art.tested_tree)
    assert pushed.overwritten == (LIB_RS,)  # the pull request's own lib.rs edit would be thrown away
    assert pushed.unused == source.reset
    # without that edit, the push is the head plus ffi.rs and agent-d's lib.rs, and nothing else changes
    git(repo, "checkout", "-q", "-f", head)
    git(repo, "clean", "-qfdx")  # the first port's generated files
    fixed = _commit(repo, {LIB_RS: BASE_FILES[LIB_RS]}, "take lib.rs back")
    art = read_artifact(
        run_port_job(
            repo, fixed, ["silu_and_mul"], tmp_path / "art2", _generating, repo_name="o/r", base_sha=base
        )
    )
    source = source_tree(repo / ".git", base, fixed, ["silu_and_mul"])
    pushed = pushed_tree(repo / ".git", source, art.tested_tree)
    assert pushed.overwritten == () and LIB_RS not in pushed.unused.all()
    changes = {
        c.path: c.status
        for c in gitops.tree_changes(repo / ".git", gitops.tree_of(repo / ".git", fixed), pushed.tree)
    }
    assert changes == {LIB_RS: "M", f"{OPS}/silu_and_mul_kernel/ffi.rs": "A"}
    # agent-d's commit of that tree: on the next run its files are the tested ones, named nowhere
    ours = gitops.git(repo, "commit-tree", pushed.tree, "-p", fixed, "-m", "agent-d").strip()
    git(repo, "checkout", "-q", "-f", ours)
    art = read_artifact(
        run_port_job(
            repo, ours, ["silu_and_mul"], tmp_path / "art4", _generating, repo_name="o/r", base_sha=base
        )
    )
    source = source_tree(repo / ".git", base, ours, ["silu_and_mul"])
    again = pushed_tree(repo / ".git", source, art.tested_tree)
    assert again.tree == gitops.tree_of(repo / ".git", ours) and again.overwritten == ()
    assert {LIB_RS, f"{OPS}/silu_and_mul_kernel/ffi.rs"} <= set(source.reset.all())
    assert not {LIB_RS, f"{OPS}/silu_and_mul_kernel/ffi.rs"} & set(again.unused.all())


def _generating(checkout: Path, op: str):
    fake_generate(checkout, op)
    return "ALL_PASS", "", "built", ""
