"""End-to-end against the local GitHub (tests/ghfake): what a maintainer sees on a pull request after
dispatch -> port job -> finalize: agent-d's commit on the branch, the check on the head, one review and
the sticky comment; idempotent on redelivery; the patch in the review where no push can be made (fork
without maintainer edits, auto_commit off, the bot-commit cap, a refused push); two kernels in a PR."""

from __future__ import annotations

import logging

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import REPO, no_canary_anywhere, world  # noqa: F401
from test_github_support import KERNEL_RS, kernel_path


def test_same_repo_pr_gets_one_commit_check_review_and_is_idempotent(world, caplog):  # noqa: F811
    caplog.set_level(logging.DEBUG)
    pr = world.open_kernel_pr()
    old = world.fake.pr_head_sha(pr)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert s.dispatch.run and s.finalize.pushed and s.finalize.conclusion == "success"
    new = world.fake.branch_sha(REPO, "add-silu")
    assert new == s.finalize.new_head != old
    commit = world.repo.get_commit(new)
    assert [p.sha for p in commit.parents] == [old]
    assert "Agent-D-Tested-Tree:" in commit.commit.message
    names = {f.filename for f in commit.files}
    assert "src/tilegym/ops/cutile_rs/silu_and_mul_kernel/ffi.rs" in names
    # the check is concluded on the new head; the queued one on the old head too
    assert [(c.status, c.conclusion) for c in world.checks(new)] == [("completed", "success")]
    assert all(c.status == "completed" for c in world.checks(old))
    reviews = world.reviews(pr.number)
    assert len(reviews) == 1 and reviews[0].state == "COMMENTED" and reviews[0].commit_id == new
    assert "<VALIDATOR_OUTPUT>" in reviews[0].body and "VERDICT: ALL_PASS" in reviews[0].body
    assert len(world.sticky(pr.number)) == 1

    before = (world.posts(r"/reviews$"), world.posts(r"/issues/\d+/comments$"), world.posts(r"/check-runs$"))
    # the same delivery again: the PR head is now agent-d's commit, so the event is stale
    world.run(world.event("pull_request", "opened", pr=pr.number, pull_request={"head": {"sha": old}}))
    # GitHub's synchronize for agent-d's own push: nothing to do
    sync = world.event("pull_request", "synchronize", pr=pr.number, before=old, after=new)
    assert not world.run(sync).dispatch.run
    # a maintainer's rerun with nothing changed: runs, pushes nothing, posts nothing new
    s2 = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun", commenter="maint")
    )
    assert s2.dispatch.run and not s2.finalize.pushed and s2.finalize.review == "unchanged"
    assert world.fake.branch_sha(REPO, "add-silu") == new
    assert before[:2] == (world.posts(r"/reviews$"), world.posts(r"/issues/\d+/comments$"))
    assert len(world.reviews(pr.number)) == 1 and len(world.sticky(pr.number)) == 1
    # the same comment delivered twice: nothing new at all
    again = world.event("issue_comment", "created", pr=pr.number, comment_id=s2_comment_id(world, pr.number))
    checks_before = world.posts(r"/check-runs$")
    assert not world.run(again).dispatch.run
    assert world.posts(r"/check-runs$") == checks_before
    no_canary_anywhere(world.fake, caplog.text)


def s2_comment_id(world, number):  # noqa: F811
    return max(
        c.id
        for c in world.fake.state.comments.values()
        if c.issue_number == number and c.body.startswith("/agent-d")
    )


def test_pr_without_kernel_gets_a_neutral_check(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="docs", files={"README.md": "better docs\n"})
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert not s.dispatch.run and s.dispatch.conclusion == "neutral"
    head = world.fake.pr_head_sha(pr)
    assert [(c.status, c.conclusion) for c in world.checks(head)] == [("completed", "neutral")]
    assert world.reviews(pr.number) == [] and world.sticky(pr.number) == []
    world.run(world.event("pull_request", "opened", pr=pr.number))
    assert len(world.checks(head)) == 1


def test_fork_without_maintainer_edits_gets_the_patch_in_the_review(world):  # noqa: F811
    pr = world.open_kernel_pr(branch="silu", author="maint", fork_owner="maint", maintainer_can_modify=False)
    sha = world.fake.pr_head_sha(pr)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert s.dispatch.run and not s.finalize.pushed
    assert world.fake.branch_sha("maint/tilegym", "silu") == sha
    body = world.reviews(pr.number)[0].body
    assert (
        "git apply --index <<'AGENT_D_PATCH'" in body
        and "+++ b/src/tilegym/ops/cutile_rs/silu_and_mul_kernel/ffi.rs" in body
    )
    assert [c.conclusion for c in world.checks(sha)] == ["success"]


def test_auto_commit_off_needs_apply(world):  # noqa: F811
    world.fake.commit(REPO, "main", {".github/agent-d.yml": "auto_commit: false\n"}, "config", author="maint")
    pr = world.open_kernel_pr()
    sha = world.fake.pr_head_sha(pr)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert s.dispatch.run and not s.finalize.pushed and "/agent-d apply" in world.reviews(pr.number)[0].body
    s = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d apply", commenter="maint")
    )
    assert s.finalize.pushed and world.fake.branch_sha(REPO, "add-silu") != sha


def test_bot_commit_cap_and_refused_push_fall_back_to_the_patch(world):  # noqa: F811
    world.fake.commit(REPO, "main", {".github/agent-d.yml": "max_bot_commits: 1\n"}, "config", author="maint")
    pr = world.open_kernel_pr()
    world.fake.commit(
        REPO,
        "add-silu",
        {"README.md": "x\n"},
        "agent-d: x\n\nAgent-D-Tested-Tree: " + "a" * 40,
        author="maint",
    )
    s = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun", commenter="maint")
    )
    assert s.dispatch.run and not s.finalize.pushed
    assert "max_bot_commits=1" in world.reviews(pr.number)[0].body

    pr2 = world.open_kernel_pr(branch="other")
    world.fake.push_rejection_hook(REPO, "protected branch hook declined")
    s = world.run(world.event("pull_request", "opened", pr=pr2.number))
    assert not s.finalize.pushed and s.finalize.conclusion == "success"
    body = world.reviews(pr2.number)[0].body
    assert "protected branch hook declined" in body and "git apply --index" in body


def test_the_check_on_agent_ds_commit_is_created_concluded_in_one_write(world):  # noqa: F811
    """GitHub paces writes (a second apart): the run on the pushed commit is created with its
    conclusion and annotations in one request, never created queued and then edited."""
    pr = world.open_kernel_pr()
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    new = s.finalize.new_head
    [check] = world.checks(new)
    created = [
        e for e in world.fake.calls("POST", r"/check-runs$") if (e.json_body or {}).get("head_sha") == new
    ]
    assert len(created) == 1 and created[0].json_body["status"] == "completed", created
    assert created[0].json_body["conclusion"] == check.conclusion == "success"
    assert world.fake.calls("PATCH", rf"/check-runs/{check.id}$") == []
    writes = [(e.method, e.path) for e in world.fake.log if e.method in ("POST", "PATCH", "PUT", "DELETE")]
    # dispatch: lock, the queued check, the status comment, unlock; finalize: lock, the new head's
    # check (concluded), the review, the status comment, the tested head's check concluded, unlock
    assert len(writes) == 10, writes
    kinds = [_kind(method, path) for method, path in writes[4:]]
    assert kinds == ["lock", "check created", "review", "comment", "check concluded", "unlock"], writes


def _kind(method: str, path: str) -> str:
    if path.endswith("/reactions"):
        return "lock"
    if "/reactions/" in path:
        return "unlock"
    if path.endswith("/check-runs"):
        return "check created"
    if "/check-runs/" in path:
        return "check concluded"
    if path.endswith("/reviews"):
        return "review"
    return "comment" if "/comments" in path else f"{method} {path}"


def _two_kernels():
    return {
        kernel_path("silu_and_mul"): KERNEL_RS,
        kernel_path("swiglu"): KERNEL_RS.replace("silu_and_mul", "swiglu"),
    }


def test_two_kernels_in_one_tree_by_default(world):  # noqa: F811
    pr = world.open_kernel_pr(files=_two_kernels())
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert [m.kernel for m in s.dispatch.matrix] == ["silu_and_mul swiglu"]
    assert s.finalize.pushed and s.finalize.conclusion == "success"
    body = world.reviews(pr.number)[0].body
    assert "`silu_and_mul`" in body and "`swiglu`" in body


def test_two_kernels_per_kernel_jobs_that_conflict_fail_loudly(world):  # noqa: F811
    world.fake.commit(REPO, "main", {".github/agent-d.yml": "matrix: per_kernel\n"}, "config", author="maint")
    pr = world.open_kernel_pr(files=_two_kernels())
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert [m.kernel for m in s.dispatch.matrix] == ["silu_and_mul", "swiglu"]
    # both test port functions append to lib.rs at the same place: the patches cannot be combined
    assert not s.finalize.pushed and s.finalize.conclusion == "failure"
    assert "matrix: single" in s.finalize.notes[0]
    head = world.fake.pr_head_sha(pr)
    assert [c.conclusion for c in world.checks(head)] == ["failure"]
