"""Issue 21 end to end against the local GitHub: the verdict is agent-d's, and approval comes only
from the commit.

* A pull request's edits of the crate (``lib.rs``, ``build.rs``, ``Cargo.toml``), a test file and a
  ``conftest.py`` never reach the build or the tests: the port job runs on the base's files plus
  the kernel's ``kernel.rs``, and the review names each edit it did not use. An edit of the tests
  makes the run need a maintainer's approval of that exact commit although a maintainer pushed it.
* A maintainer's "Update branch" on an outsider's fork pull request (a merge commit the
  maintainer pushes) does not run until a maintainer approves that merge commit by its sha; a
  maintainer's own commit on top of an approved commit runs, a commit they did not write does not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, CANARY, REPO, fake_client, world  # noqa: F401
from test_github_support import BASE_FILES, KERNEL_RS, OPS, VALIDATOR, fake_generate, kernel_path, visible

from bot.github.credentials import TokenCredentials
from bot.github.runner import run_all

OP = "silu_and_mul"
CRATE = f"{OPS}/cutile_kernels"
LIB_RS, BUILD_RS, CARGO = f"{CRATE}/src/lib.rs", f"{CRATE}/build.rs", f"{CRATE}/Cargo.toml"
TEST_FILE, CONFTEST = f"tests/ops/test_{OP}.py", "tests/conftest.py"
BASE_CARGO = '[package]\nname = "cutile_kernels"\n'
PR_EDITS = {
    LIB_RS: "mod evil;\n",
    BUILD_RS: 'fn main() { println!("cargo:warning=the pull request build.rs ran"); }\n',
    CARGO: BASE_CARGO + 'build = "build.rs"\n',
    TEST_FILE: "def test_from_the_pull_request():\n    print('PR-TEST-RAN')\n",
    CONFTEST: "print('PR-CONFTEST-RAN')\n",
}
MAINT_TOKEN = "ghp_MaintainerClicksUpdateBranch0123456789"


def _what_runs(seen: dict[str, str]):
    """A port function that shows what the port runs on: the crate files it builds from, and
    pytest's own output on the checkout's tests (the pull request's print when they are its)."""

    def port(repo: Path, op: str):
        fake_generate(repo, op)
        for name in (LIB_RS, CARGO, BUILD_RS):
            seen[Path(name).name] = (repo / name).read_text() if (repo / name).exists() else "absent"
        pytest = [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", "tests"]
        proc = subprocess.run(pytest, cwd=repo, capture_output=True, text=True, timeout=120)
        seen["pytest"] = proc.stdout + proc.stderr
        return "ALL_PASS", "", "built and tested", VALIDATOR.format(op=op)

    return port


def _run(world, event, port, generate=fake_generate):  # noqa: F811
    world.n += 1
    return run_all(
        world.gh,
        event,
        port,
        world.tmp / f"run{world.n}",
        BOTS,
        f"run-{world.n}",
        TokenCredentials(CANARY),
        generate,
    )


def _comment(world, pr, body):  # noqa: F811
    return world.event("issue_comment", "created", pr=pr.number, body=body, commenter="maint")


def _replies(world, pr, needle):  # noqa: F811
    return [c.body for c in world.repo.get_pull(pr.number).get_issue_comments() if needle in c.body]


def test_a_pr_editing_the_crate_is_built_from_the_base_files_and_told_so(world):  # noqa: F811
    world.fake.commit(REPO, "main", {CARGO: BASE_CARGO}, "the crate's manifest", author="maint")
    crate_edits = {p: PR_EDITS[p] for p in (LIB_RS, BUILD_RS, CARGO)}
    pr = world.open_kernel_pr(files={kernel_path(OP): KERNEL_RS, **crate_edits})
    head = world.fake.pr_head_sha(pr)
    seen: dict[str, str] = {}
    s = _run(world, world.event("pull_request", "opened", pr=pr.number), _what_runs(seen))
    assert s.dispatch.run and s.finalize.conclusion == "success", s.finalize.notes
    # what was built: the base's crate files plus agent-d's wiring, none of the pull request's
    assert seen["lib.rs"].startswith(BASE_FILES[LIB_RS]) and "mod evil" not in seen["lib.rs"]
    assert (seen["Cargo.toml"], seen["build.rs"]) == (BASE_CARGO, "absent")
    assert s.dispatch.base_sha == world.base_sha(pr)
    [review] = world.reviews(pr.number)
    body = visible(review.body)
    assert "Edits of this pull request that agent-d did not use" in body
    [crate] = [line for line in body.splitlines() if "the crate is built from the base's files" in line]
    assert all(p in crate for p in (LIB_RS, BUILD_RS, CARGO))
    # lib.rs is a file agent-d writes: the pull request's own edit of it is not pushed over
    assert not s.finalize.pushed and world.fake.branch_sha(REPO, "add-silu") == head
    assert "does not push over the pull request's edits" in body
    assert f"git checkout FETCH_HEAD -- {LIB_RS}" in body


def test_a_pr_editing_a_test_and_a_conftest_waits_for_an_approval_and_runs_the_base_tests(world):  # noqa: F811
    test_edits = {p: PR_EDITS[p] for p in (TEST_FILE, CONFTEST)}
    pr = world.open_kernel_pr(files={kernel_path(OP): KERNEL_RS, **test_edits})  # a maintainer's own branch
    head = world.fake.pr_head_sha(pr)
    seen: dict[str, str] = {}
    opened = _run(world, world.event("pull_request", "opened", pr=pr.number), _what_runs(seen))
    # a maintainer pushed it, and still: an edit of the tests needs an approval of the commit
    assert not opened.dispatch.run and opened.dispatch.conclusion == "action_required", opened.dispatch
    [check] = world.checks(head)
    waiting = visible(check.output.summary)
    assert TEST_FILE in waiting and CONFTEST in waiting and f"/agent-d rerun --sha {head}" in waiting
    bare = _run(world, _comment(world, pr, "/agent-d rerun"), _what_runs(seen))
    assert not bare.dispatch.run and bare.dispatch.reason == "approval needs the full sha of the head"
    [told] = _replies(world, pr, "Nothing was run")
    assert "edits the tests" in told and f"/agent-d rerun --sha {head}" in told
    assert seen == {}

    ok = _run(world, _comment(world, pr, f"/agent-d rerun --sha {head}"), _what_runs(seen))
    assert ok.dispatch.run and ok.finalize.conclusion == "success", ok.finalize.notes
    # what ran: the base's tests, and neither the pull request's test nor its conftest.py
    assert "no tests ran" in seen["pytest"]
    assert "PR-TEST-RAN" not in seen["pytest"] and "PR-CONFTEST-RAN" not in seen["pytest"]
    body = visible(world.reviews(pr.number)[0].body)
    [tests] = [
        line for line in body.splitlines() if "pytest's configuration come from the base branch" in line
    ]
    assert TEST_FILE in tests and CONFTEST in tests
    assert (
        ok.finalize.pushed
    )  # agent-d's own files (ffi.rs, lib.rs) on the head; the PR's edits stay as they are
    after = {f.filename for f in world.repo.get_commit(ok.finalize.new_head).files}
    assert after == {LIB_RS, f"{OPS}/{OP}_kernel/ffi.rs"}


def _as_maintainer(world):  # noqa: F811
    world.fake.set_token(MAINT_TOKEN, "maint")
    return fake_client(world.fake, MAINT_TOKEN)


def test_update_branch_on_an_outsiders_fork_pr_runs_only_after_that_merge_is_approved(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    opened = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert not opened.dispatch.run and opened.dispatch.conclusion == "action_required"
    world.fake.commit(REPO, "main", {"README.md": "news on main\n"}, "news", author="maint")
    before = world.fake.pr_head_sha(pr)
    # the maintainer clicks "Update branch": GitHub merges main into the outsider's branch as them
    assert _as_maintainer(world).get_repo(REPO).get_pull(pr.number).update_branch(before)
    merge = world.fake.pr_head_sha(pr)
    commit = world.repo.get_commit(merge)
    assert [p.sha for p in commit.parents][0] == before and commit.author.login == "maint"
    sync = world.event(
        "pull_request", "synchronize", pr=pr.number, before=before, after=merge, sender="maint"
    )
    s = world.run(sync)
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required", s.dispatch
    [check] = world.checks(merge)
    summary = visible(check.output.summary)
    assert "merge commit" in summary and "@outsider" in summary and f"/agent-d rerun --sha {merge}" in summary
    # a bare rerun is no approval of the merge; naming it is
    bare = world.run(_comment(world, pr, "/agent-d rerun"))
    assert not bare.dispatch.run and bare.dispatch.reason == "approval needs the full sha of the head"
    ok = world.run(_comment(world, pr, f"/agent-d rerun --sha {merge}"))
    assert ok.dispatch.run and ok.dispatch.head_sha == merge
    assert ok.finalize.pushed and ok.finalize.conclusion == "success"


def test_a_maintainers_own_commit_on_an_approved_head_runs_and_a_commit_they_did_not_write_waits(world):  # noqa: F811
    fork = "outsider/tilegym"
    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    world.run(world.event("pull_request", "opened", pr=pr.number))
    approved = world.run(_comment(world, pr, f"/agent-d rerun --sha {world.fake.pr_head_sha(pr)}"))
    assert approved.finalize.pushed  # agent-d's commit is the head now
    ours = approved.finalize.new_head
    own = world.fake.commit(fork, "silu", {"README.md": "a typo fixed\n"}, "typo", author="maint")
    s = world.run(
        world.event("pull_request", "synchronize", pr=pr.number, before=ours, after=own, sender="maint")
    )
    assert s.dispatch.run and s.dispatch.head_sha == own, s.dispatch
    # the maintainer pushes a commit the outsider wrote (a rebase, a cherry-pick): it waits
    theirs = world.fake.commit(fork, "silu", {"notes.txt": "more\n"}, "more", author="outsider")
    s = world.run(
        world.event("pull_request", "synchronize", pr=pr.number, before=own, after=theirs, sender="maint")
    )
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required", s.dispatch
    [check] = world.checks(theirs)
    assert "written by @outsider, not by @maint" in visible(check.output.summary)


def _wiring_generate(repo: Path, op: str) -> str:
    """fake_generate plus one line of wiring in the op's test file, as the real generator wires it."""
    fake_generate(repo, op)
    test = repo / f"tests/ops/test_{op}.py"
    if "# wired by agent-d" not in test.read_text():
        test.write_text(test.read_text() + f"# wired by agent-d: {op}\n")
    return ""


def _wiring_port(repo: Path, op: str):
    _wiring_generate(repo, op)
    return "ALL_PASS", "", "built and tested", VALIDATOR.format(op=op)


def test_agent_ds_own_wiring_of_a_test_file_needs_no_approval_and_an_edit_of_it_does(world):  # noqa: F811
    pr = world.open_kernel_pr()
    first = _run(world, world.event("pull_request", "opened", pr=pr.number), _wiring_port, _wiring_generate)
    assert first.dispatch.run and first.finalize.pushed
    ours = first.finalize.new_head
    assert TEST_FILE in {f.filename for f in world.repo.get_commit(ours).files}
    readme = world.fake.commit(REPO, "add-silu", {"README.md": "docs\n"}, "docs", author="maint")
    sync = world.event("pull_request", "synchronize", pr=pr.number, before=ours, after=readme, sender="maint")
    s = _run(world, sync, _wiring_port, _wiring_generate)
    assert s.dispatch.run and not s.finalize.pushed, s.dispatch  # nothing new to generate
    # the review names the pull request's README, not agent-d's own wiring of the test file
    [unused] = [line for line in world.reviews(pr.number)[-1].body.splitlines() if line.startswith("- ")]
    assert "README.md" in unused and TEST_FILE not in unused
    wired = world.fake.pr_head_sha(pr)
    edited = world.fake.commit(
        REPO,
        "add-silu",
        {TEST_FILE: BASE_FILES[TEST_FILE] + "def test_x():\n    pass\n"},
        "a test",
        author="maint",
    )
    sync = world.event(
        "pull_request", "synchronize", pr=pr.number, before=wired, after=edited, sender="maint"
    )
    s = _run(world, sync, _wiring_port, _wiring_generate)
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required"
    assert TEST_FILE in visible(world.checks(edited)[0].output.summary)


CONTRACT = f"{OPS}/{OP}_kernel/host_contract.yaml"


def test_a_contract_from_an_author_without_write_access_waits_for_an_approval_of_its_commit(world):  # noqa: F811
    """Issue 33, deliverable 5: an outsider listed under allowed_users (read access) runs agent-d
    on their own pushes, but a host contract they add runs only for a maintainer's approval of
    that exact commit."""
    config = {".github/agent-d.yml": "allowed_users: [outsider]\n"}
    world.fake.commit(REPO, "main", config, "config", author="maint")
    plain = world.open_kernel_pr(branch="plain", author="outsider", fork_owner="outsider")
    assert world.run(world.event("pull_request", "opened", pr=plain.number)).dispatch.run  # allowed

    contract = "contract_version: 1\nffi:\n  scalars: {hidden_size: 'dim(out,1)'}  # @maint ```\n"
    files = {kernel_path(OP): KERNEL_RS, CONTRACT: contract}
    pr = world.open_kernel_pr(branch="with-contract", author="outsider", fork_owner="outsider", files=files)
    head = world.fake.pr_head_sha(pr)
    opened = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert not opened.dispatch.run and opened.dispatch.conclusion == "action_required", opened.dispatch
    [check] = world.checks(head)
    waiting = visible(check.output.summary)
    assert (
        CONTRACT in waiting
        and "without write access" in waiting
        and f"/agent-d rerun --sha {head}" in waiting
    )
    bare = world.run(_comment(world, pr, "/agent-d rerun"))
    assert not bare.dispatch.run and bare.dispatch.reason == "approval needs the full sha of the head"
    ok = world.run(_comment(world, pr, f"/agent-d rerun --sha {head}"))
    assert ok.dispatch.run, ok.dispatch
    # the review shows the contract that steered the generated files, inert in a code block
    body = world.reviews(pr.number)[-1].body
    assert "**Host contract of this pull request**" in body and f"` {CONTRACT} `" in body
    assert "````yaml\n" + contract.rstrip() + "\n````" in body  # a fence longer than its ```
    plain_body = world.reviews(plain.number)[-1].body
    assert "Host contract" not in plain_body
