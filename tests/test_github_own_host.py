"""A pull request that adds kernel.rs with its own host files (issue 35, deliverable 2), against the
local GitHub: the port runs as ever, its own files are checked as they are and not pushed over,
each finding is an annotation on its line, and agent-d's files are offered as suggested changes
that GitHub takes (the local GitHub refuses a comment off the pull request's diff, as GitHub does)."""

from __future__ import annotations

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github import GithubException
from github_world import BOTS, CANARY, REPO, world  # noqa: F401
from test_github_support import FFI_TEXT, KERNEL_RS, OPS, VALIDATOR, fake_generate, kernel_path, visible

from bot.github import own_host
from bot.github.credentials import TokenCredentials
from bot.github.runner import run_all

OP = "silu_and_mul"
FFI = f"{OPS}/{OP}_kernel/ffi.rs"
WRAPPER = f"{OPS}/{OP}.py"
OWN_FFI = (
    "// the author's own launcher\n"
    "#[no_mangle]\n"
    'pub unsafe extern "C" fn cutile_silu_and_mul() -> i32 { 0 }\n'
)
OWN_WRAPPER = """from tilegym.backend import register_impl

_FFI_CDEF = "int32_t cutile_silu_and_mul(void);"


@register_impl("silu_and_mul", backend="cutile-rs")
def silu_and_mul(x):
    rc = lib.cutile_silu_and_mul()
    return rc
"""


def _port(repo, op):
    fake_generate(repo, op)
    return "ALL_PASS", "", "built and tested", VALIDATOR.format(op=op)


def test_own_host_files_are_checked_not_overwritten_and_agent_ds_are_suggested(world):  # noqa: F811
    files = {kernel_path(OP): KERNEL_RS, FFI: OWN_FFI, WRAPPER: OWN_WRAPPER}
    pr = world.open_kernel_pr(files=files)
    head = world.fake.pr_head_sha(pr)
    opened = world.event("pull_request", "opened", pr=pr.number)
    waiting = run_all(world.gh, opened, _port, world.tmp / "run0", BOTS, "run-0", TokenCredentials(CANARY))
    assert not waiting.dispatch.run  # the wrapper is under the runtime: a maintainer approves the commit
    approve = world.event(
        "issue_comment", "created", pr=pr.number, body=f"/agent-d rerun --sha {head}", commenter="maint"
    )
    s = run_all(
        world.gh, approve, _port, world.tmp / "run", BOTS, "run-1", TokenCredentials(CANARY), fake_generate
    )
    assert s.dispatch.run  # the kernel is ported and tested as ever
    assert not s.finalize.pushed and world.fake.branch_sha(REPO, "add-silu") == head  # not pushed over
    assert s.finalize.conclusion == "failure"  # the pull request's own ffi.rs breaks a host rule
    [check] = world.checks(head)
    assert check.output.title.endswith("own host code: findings")
    notes = {(n.path, n.start_line, n.message) for n in check.get_annotations()}
    assert (
        FFI,
        3,
        "`cutile_silu_and_mul` uses `#[no_mangle]`: edition 2024 needs `#[unsafe(no_mangle)]`",
    ) in notes
    assert any(n[:2] == (WRAPPER, 8) and "not passed to check_rc" in n[2] for n in notes)
    [review] = world.reviews(pr.number)
    body = visible(review.body)
    assert "The pull request's own host code" in body and "did not overwrite them" in body
    assert f"`{FFI}:3`" in body and f"`{WRAPPER}:8`" in body
    # agent-d's ffi.rs as a suggestion on the two lines it replaces, taken by the local GitHub
    [stored] = [r for r in world.fake.state.reviews.values() if r.number == pr.number]
    [comment] = stored.comments
    assert (comment["path"], comment["start_line"], comment["line"]) == (FFI, 1, 2)
    ours = FFI_TEXT.format(op=OP).splitlines()
    assert f"```suggestion\n{ours[0]}\n{ours[1]}\n```" in comment["body"]


def test_suggestions_cover_replacements_insertions_and_deletions_inside_the_diff_only():
    pr_text = "a\nb\nc\nd\ne\n"
    ours = "a\nB\nc\nnew\nd\n"  # b replaced, a line inserted after c, e deleted
    everything = [range(1, 6)]
    found = own_host.suggestions(pr_text, ours, "x.rs", everything)
    spans = [
        (c.get("start_line", c["line"]), c["line"], c["body"].split("```suggestion\n")[1])
        for c in found.comments
    ]
    assert spans == [(2, 2, "B\n```"), (3, 3, "c\nnew\n```"), (5, 5, "\n```")]
    assert found.left_out == 0
    # only lines 1-2 are in the pull request's diff: the other two differences cannot be anchored
    partial = own_host.suggestions(pr_text, ours, "x.rs", [range(1, 3)])
    assert len(partial.comments) == 1 and partial.left_out == 2


def test_a_suggestion_holding_a_fence_gets_a_longer_one():
    found = own_host.suggestions("x\n", "```\n", "doc.md", [range(1, 2)])
    [comment] = found.comments
    assert "````suggestion\n```\n````" in comment["body"]


def test_commentable_lines_are_each_hunks_right_side():
    patch = "@@ -1,3 +1,4 @@\n a\n+b\n c\n d\n@@ -10,2 +11,2 @@\n-x\n+y\n z\n"
    assert own_host.commentable_lines(patch, "f.py") == [range(1, 5), range(11, 13)]
    assert own_host.commentable_lines(None, "f.py") == []


def test_the_local_github_refuses_a_suggestion_off_the_pull_requests_diff(world):  # noqa: F811
    pr = world.open_kernel_pr(files={kernel_path(OP): KERNEL_RS, FFI: OWN_FFI})
    pull = world.repo.get_pull(pr.number)
    commit = world.repo.get_commit(world.fake.pr_head_sha(pr))
    off = {"path": FFI, "line": 9, "side": "RIGHT", "body": "```suggestion\nx\n```"}
    with pytest.raises(GithubException) as refused:
        pull.create_review(commit=commit, body="r", event="COMMENT", comments=[off])
    assert refused.value.status == 422 and "must be part of the diff" in str(refused.value.data)
    assert "must be part of the diff" in world.fake.violations[-1]  # refused as a client's mistake
    world.fake.violations.clear()
    on = {**off, "line": 3, "start_line": 2, "start_side": "RIGHT"}
    pull.create_review(commit=commit, body="r", event="COMMENT", comments=[on])
