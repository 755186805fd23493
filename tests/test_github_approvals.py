"""Approvals bound to one commit where the event names who clicked, not who pushed (local GitHub).

A maintainer readying an outsider's draft, reopening it, or opening a pull request from an
outsider's fork approves no commit; a workflow_dispatch names its commit with the `sha` input;
copy-pr-bot's mirror runs only the commit it mirrored.
"""

from __future__ import annotations

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import REPO, world  # noqa: F401
from test_github_support import KERNEL_RS, kernel_path

FILES = {kernel_path("silu_and_mul"): KERNEL_RS}


def _ready(world, pr):  # noqa: F811
    with world.fake.state.lock:
        pr.draft = False  # marked ready for review; the head does not move


def _check(world, sha):  # noqa: F811
    return [(c.status, c.conclusion) for c in world.checks(sha)]


def _replies(world, number, needle):  # noqa: F811
    return [c.body for c in world.repo.get_pull(number).get_issue_comments() if needle in c.body]


def test_a_maintainer_readying_an_outsiders_draft_approves_no_commit(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider", draft=True)
    head = world.fake.pr_head_sha(pr)
    assert not world.run(world.event("pull_request", "opened", pr=pr.number)).dispatch.run
    _ready(world, pr)
    s = world.run(world.event("pull_request", "ready_for_review", pr=pr.number, sender="maint"))
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required"
    assert _check(world, head) == [("completed", "action_required")]
    assert "no known pusher" in world.checks(head)[0].output.summary
    # the maintainer reviews the commit and approves it by its sha: that commit runs
    body = f"/agent-d rerun --sha {head}"
    ok = world.run(world.event("issue_comment", "created", pr=pr.number, body=body, commenter="maint"))
    assert ok.dispatch.run and ok.dispatch.head_sha == head


def test_a_maintainer_reopening_an_outsiders_pr_approves_no_commit(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    head = world.fake.pr_head_sha(pr)
    # no record of the push (its `opened` ran before agent-d was installed, or was missed)
    s = world.run(world.event("pull_request", "reopened", pr=pr.number, sender="maint"))
    assert not s.dispatch.run and _check(world, head) == [("completed", "action_required")]


def test_a_maintainer_opening_a_pr_from_an_outsiders_fork_approves_no_commit(world):  # noqa: F811
    fork = world.fake.fork(REPO, "outsider")
    world.fake.commit(fork, "silu", FILES, "add kernel", author="outsider")
    pr = world.fake.open_pr(REPO, fork, "silu", "Add kernel", "maint")
    s = world.run(world.event("pull_request", "opened", pr=pr.number, sender="maint"))
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required"


def test_a_trusted_fork_owners_draft_runs_when_anyone_readies_it(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="maint", fork_owner="maint", draft=True)
    head = world.fake.pr_head_sha(pr)
    draft = world.run(world.event("pull_request", "opened", pr=pr.number, sender="maint"))
    assert not draft.dispatch.run and draft.dispatch.conclusion == "neutral"
    _ready(world, pr)
    s = world.run(world.event("pull_request", "ready_for_review", pr=pr.number, sender="outsider"))
    assert s.dispatch.run and s.dispatch.head_sha == head  # dispatch's record of the trusted push


def test_workflow_dispatch_runs_only_the_commit_its_sha_input_names(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    old = world.fake.pr_head_sha(pr)
    world.run(world.event("pull_request", "opened", pr=pr.number))

    bare = world.run(world.event("workflow_dispatch", inputs={"pr": str(pr.number)}, sender="maint"))
    assert not bare.dispatch.run and bare.dispatch.reason == "approval needs the full sha of the head"
    [reply] = _replies(world, pr.number, "Nothing was run")
    assert f"input `sha` set to `{old}`" in reply

    # the outsider pushes after the maintainer reviewed `old`: approving `old` runs nothing
    world.fake.commit("outsider/tilegym", "silu", {"README.md": "more\n"}, "more", author="outsider")
    new = world.fake.pr_head_sha(pr)
    late = world.run(
        world.event("workflow_dispatch", inputs={"pr": str(pr.number), "sha": old}, sender="maint")
    )
    assert not late.dispatch.run and late.dispatch.reason == "the approved sha is not the head"

    ok = world.run(
        world.event("workflow_dispatch", inputs={"pr": str(pr.number), "sha": new}, sender="maint")
    )
    assert ok.dispatch.run and ok.dispatch.head_sha == new


def test_a_copy_pr_bot_mirror_of_an_older_commit_runs_nothing(world):  # noqa: F811
    from ghfake import gitops as fake_git

    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    world.run(world.event("pull_request", "opened", pr=pr.number))
    base = world.fake.state.repo("nvidia", "tilegym").git_dir
    fork = world.fake.state.repo("outsider", "tilegym").git_dir
    fake_git.copy_branch(fork, base, "refs/heads/silu", f"refs/heads/pull-request/{pr.number}")
    vetted = world.fake.pr_head_sha(pr)
    world.fake.commit(
        "outsider/tilegym", "silu", {"README.md": "after the vetting\n"}, "more", author="outsider"
    )
    s = world.run(
        world.event("push", None, branch=f"pull-request/{pr.number}", sender="copy-pr-bot", after=vetted)
    )
    assert not s.dispatch.run and "the PR head at" in s.dispatch.reason
    assert world.checks(world.fake.pr_head_sha(pr)) == []


def test_a_base_change_does_not_turn_an_unapproved_head_into_a_trusted_one(world):  # noqa: F811
    # an outsider's head against a base that already has the kernel adds none: its automatic check
    # is concluded `neutral`; that conclusion says nothing about who pushed the commit
    world.fake.commit(REPO, "staging", FILES, "the kernel on staging", author="maint")
    fork = world.fake.fork(REPO, "outsider")
    head = world.fake.commit(
        fork, "silu", {"README.md": "hi\n"}, "nothing new", "outsider", start_point="staging"
    )
    pr = world.fake.open_pr(REPO, fork, "silu", "Tidy", "outsider", base_branch="staging")
    s = world.run(world.event("pull_request", "opened", pr=pr.number, sender="outsider"))
    assert not s.dispatch.run and _check(world, head) == [("completed", "neutral")]
    # the author points the pull request at main: now it adds the kernel, never approved
    with world.fake.state.lock:
        pr.base_ref = "main"
    bare = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun", commenter="maint")
    )
    assert not bare.dispatch.run, bare.dispatch
    assert _replies(world, pr.number, f"After reviewing commit `{head}`"), bare.dispatch
    # approving that exact commit runs it
    body = f"/agent-d rerun --sha {head}"
    ok = world.run(world.event("issue_comment", "created", pr=pr.number, body=body, commenter="maint"))
    assert ok.dispatch.run and ok.dispatch.head_sha == head
