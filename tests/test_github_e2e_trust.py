"""End-to-end against the local GitHub (tests/ghfake): who may make agent-d run what. A fork's PR waits
for a maintainer's approval naming one full sha; an outsider's push to a maintainer's fork waits too;
the check's re-run button, help and copy-pr-bot's mirror push; a planted reply marker; reserved kernel
names refused like the local CLI."""

from __future__ import annotations

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, CANARY, REPO, world  # noqa: F401
from test_github_support import KERNEL_RS, fake_generate, fake_port, kernel_path, visible

from bot.github.dispatch import Dispatcher
from bot.github.finalize import Finalizer, FinalizeRequest
from bot.github.port_job import run_port_job
from bot.github.runner import prepare_checkout


def test_fork_pr_waits_for_a_maintainer_and_approval_covers_one_sha(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    fork = "outsider/tilegym"
    sha1 = world.fake.pr_head_sha(pr)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required"
    assert world.fake.branch_sha(fork, "silu") == sha1

    # the author cannot approve their own PR
    refused = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun", commenter="outsider")
    )
    assert not refused.dispatch.run and "refused" in refused.dispatch.reason
    replies = [c for c in world.repo.get_pull(pr.number).get_issue_comments() if "will not run" in c.body]
    assert len(replies) == 1 and "write, maintain or admin" in replies[0].body
    assert world.fake.branch_sha(fork, "silu") == sha1
    assert _reactions(world, pr.number, "outsider") == {"eyes", "confused"}

    # a maintainer's rerun without the sha runs nothing and is told the exact command
    bare = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun", commenter="maint")
    )
    assert not bare.dispatch.run and "full sha" in bare.dispatch.reason
    told = [
        c.body for c in world.repo.get_pull(pr.number).get_issue_comments() if "Nothing was run" in c.body
    ]
    assert len(told) == 1 and f"/agent-d rerun --sha {sha1}" in told[0]
    short = world.run(
        world.event(
            "issue_comment",
            "created",
            pr=pr.number,
            body=f"/agent-d rerun --sha {sha1[:12]}",
            commenter="maint",
        )
    )
    assert not short.dispatch.run and "full sha" in short.dispatch.reason

    # a maintainer approves sha1 by its full sha; while the GPU job runs, the author pushes sha2
    approve1 = f"/agent-d rerun --sha {sha1}"
    ev = world.event("issue_comment", "created", pr=pr.number, body=approve1, commenter="maint")
    d = Dispatcher(world.gh, ev, BOTS, run_ref="r1").run()
    assert d.run and d.head_sha == sha1
    checkout = prepare_checkout(world.fake.clone_url(fork), "refs/heads/silu", sha1, world.tmp / "co")
    base = d.base_sha
    assert base == world.base_sha(pr)
    art = run_port_job(
        checkout, sha1, ["silu_and_mul"], world.tmp / "art", fake_port, repo_name=REPO, base_sha=base
    )
    sha2 = world.fake.commit(fork, "silu", {"notes.txt": "more\n"}, "more", author="outsider")
    req = FinalizeRequest(REPO, pr.number, sha1, d.check_run_id, [art], commit=True, git_token=lambda: CANARY)
    fin = Finalizer(world.gh, req, BOTS, fake_generate).run()
    assert fin.conclusion == "cancelled" and not fin.pushed
    assert world.reviews(pr.number) == []
    assert world.fake.branch_sha(fork, "silu") == sha2
    # the new push needs a new approval
    s = world.run(world.event("pull_request", "synchronize", pr=pr.number, before=sha1, after=sha2))
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required"

    # an approval naming the old sha is refused
    stale = f"/agent-d rerun --sha {sha1[:12]}"
    s = world.run(world.event("issue_comment", "created", pr=pr.number, body=stale, commenter="maint"))
    assert not s.dispatch.run and "not the head" in s.dispatch.reason
    # the approval comment for sha1 handled after the push: sha2 is not run
    late = world.run(world.event("issue_comment", "created", pr=pr.number, body=approve1, commenter="maint"))
    assert not late.dispatch.run and "not the head" in late.dispatch.reason
    # approved again, naming sha2: runs, and pushes to the fork (maintainer edits allowed)
    s = world.run(
        world.event(
            "issue_comment", "created", pr=pr.number, body=f"/agent-d rerun --sha {sha2}", commenter="maint"
        )
    )
    assert s.dispatch.run and s.finalize.pushed
    assert _reactions(world, pr.number, "maint") >= {"eyes", "rocket"}
    assert world.fake.branch_sha(fork, "silu") == s.finalize.new_head
    assert len(world.reviews(pr.number)) == 1


def _reactions(world, number, login):  # noqa: F811
    """Reactions on the newest comment by ``login`` on PR ``number``."""
    comments = [
        c for c in world.fake.state.comments.values() if c.issue_number == number and c.user.login == login
    ]
    newest = max(comments, key=lambda c: c.id)
    return {r.content for r in newest.reactions}


def test_an_outsiders_push_to_a_maintainers_fork_waits_for_approval(world):  # noqa: F811
    # trust follows who pushed the head, not who opened the pull request
    pr = world.open_kernel_pr(branch="silu", author="maint", fork_owner="maint")
    first = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert first.dispatch.run and first.finalize.pushed
    pushed = world.fake.commit("maint/tilegym", "silu", {"README.md": "x\n"}, "more", author="outsider")
    sync = world.event(
        "pull_request",
        "synchronize",
        pr=pr.number,
        before=first.finalize.new_head,
        after=pushed,
        sender="outsider",
    )
    s = world.run(sync)
    assert not s.dispatch.run and s.dispatch.conclusion == "action_required"
    [check] = world.checks(pushed)
    assert "@outsider" in check.output.summary and f"/agent-d rerun --sha {pushed}" in check.output.summary
    # the maintainer who authored the PR must still name the commit
    bare = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun", commenter="maint")
    )
    assert not bare.dispatch.run
    ok = world.run(
        world.event(
            "issue_comment", "created", pr=pr.number, body=f"/agent-d rerun --sha {pushed}", commenter="maint"
        )
    )
    assert ok.dispatch.run and ok.dispatch.head_sha == pushed


def test_check_rerun_button_and_help_and_copy_pr_bot_push(world):  # noqa: F811
    from ghfake import gitops as fake_git

    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    world.run(world.event("pull_request", "opened", pr=pr.number))
    run_id = world.checks(world.fake.pr_head_sha(pr))[0].id
    refused = world.run(world.event("check_run", "rerequested", check_run_id=run_id, sender="outsider"))
    assert not refused.dispatch.run and "refused" in refused.dispatch.reason
    helped = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d help", commenter="outsider")
    )
    assert not helped.dispatch.run
    assert any("Who may run them" in c.body for c in world.repo.get_pull(pr.number).get_issue_comments())
    # copy-pr-bot mirrors the vetted head into pull-request/<N> of the upstream repo
    base = world.fake.state.repo("nvidia", "tilegym").git_dir
    fork = world.fake.state.repo("outsider", "tilegym").git_dir
    fake_git.copy_branch(fork, base, "refs/heads/silu", f"refs/heads/pull-request/{pr.number}")
    s = world.run(world.event("push", None, branch=f"pull-request/{pr.number}", sender="copy-pr-bot"))
    assert s.dispatch.run and s.finalize.pushed
    # Re-run of the check on the old head: nothing runs, and the reply says why
    stale = world.run(world.event("check_run", "rerequested", check_run_id=run_id, sender="maint"))
    assert not stale.dispatch.run and "not the head" in stale.dispatch.reason
    why = [
        c.body
        for c in world.repo.get_pull(pr.number).get_issue_comments()
        if f"r{run_id}-maint -->" in c.body
    ]
    assert len(why) == 1 and "nothing was run" in why[0] and s.finalize.new_head in why[0]
    # Re-run of the check on the head: that commit runs
    head_check = world.checks(s.finalize.new_head)[0].id
    ok = world.run(world.event("check_run", "rerequested", check_run_id=head_check, sender="maint"))
    assert ok.dispatch.run and ok.dispatch.head_sha == s.finalize.new_head
    assert not ok.finalize.pushed and ok.finalize.review == "unchanged"


def test_a_users_comment_carrying_the_reply_marker_does_not_suppress_the_reply(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="outsider", fork_owner="outsider")
    ask = world.event("issue_comment", "created", pr=pr.number, body="/agent-d help", commenter="outsider")
    # the user plants the marker of the bot's reply to that comment in a comment of their own
    marker = f"<!-- agent-d:reply c{ask.comment_id} -->"
    world.fake.webhook("issue_comment", "created", pr=pr.number, body=f"hi\n{marker}", commenter="outsider")
    Dispatcher(world.gh, ask, BOTS, run_ref="help").run()
    comments = list(world.repo.get_pull(pr.number).get_issue_comments())
    replies = [c for c in comments if marker in c.body and c.user.login == "agent-d[bot]"]
    assert len(replies) == 1 and "Who may run them" in replies[0].body
    # delivered again: the bot's own reply is found, nothing new is posted
    posts = world.posts(r"/issues/\d+/comments$")
    Dispatcher(world.gh, ask, BOTS, run_ref="help2").run()
    assert world.posts(r"/issues/\d+/comments$") == posts


def test_a_reserved_kernel_name_is_refused_like_the_local_cli(world):  # noqa: F811
    files = {kernel_path("lib"): KERNEL_RS, kernel_path("silu_and_mul"): KERNEL_RS}
    pr = world.open_kernel_pr(branch="reserved", files=files)
    head = world.fake.pr_head_sha(pr)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert not s.dispatch.run and s.dispatch.conclusion == "failure"
    assert s.dispatch.reason == "kernel name not allowed"
    [check] = world.checks(head)
    assert (check.status, check.conclusion) == ("completed", "failure")
    assert "lib_kernel/kernel.rs" in visible(check.output.summary)
    assert "'lib' is not a plain identifier" in check.output.summary
    # naming it in a command is refused too, before any lookup of the PR's files
    s = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun lib", commenter="maint")
    )
    assert not s.dispatch.run and "not a plain identifier" in s.dispatch.reason
    s = world.run(
        world.event("workflow_dispatch", inputs={"pr": str(pr.number), "kernels": "mod"}, sender="maint")
    )
    assert not s.dispatch.run and s.dispatch.reason.startswith("invalid kernel name")
    assert world.reviews(pr.number) == []
