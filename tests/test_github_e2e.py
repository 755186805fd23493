"""End-to-end: dispatch -> port job -> finalize against the local GitHub (tests/ghfake).

Each test drives agent-d with webhook payloads built from @octokit/webhooks-examples,
lets it talk to the OpenAPI-validated fake over HTTP, pushes through bare git remotes,
and checks what a maintainer would see: commits on the branch, the check on the head,
the review, the sticky comment.  A canary token is in the environment throughout.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from test_github_support import BASE_FILES, KERNEL_RS, fake_generate, fake_port, kernel_path, visible

from bot.github import redact
from bot.github.client import ClientSettings, make_github
from bot.github.dispatch import Dispatcher
from bot.github.events import parse_event
from bot.github.finalize import Finalizer, FinalizeRequest
from bot.github.port_job import run_port_job
from bot.github.publish import STATUS_MARKER
from bot.github.runner import prepare_checkout, run_all

CANARY = "ghs_CanaryE2eTokenValue0123456789abcdefQ"
BOTS = ("agent-d[bot]",)
REPO = "nvidia/tilegym"


@pytest.fixture
def world(github_fake, monkeypatch, tmp_path):  # noqa: F811
    fake = github_fake
    monkeypatch.setenv("GITHUB_TOKEN", CANARY)
    monkeypatch.setenv("GITHUB_API_URL", fake.base_url)
    redact.install()
    fake.set_token(CANARY, "agent-d[bot]")
    fake.create_repo("nvidia", "tilegym", files=dict(BASE_FILES))
    fake.add_collaborator("maint", "maintain", REPO)
    fake.add_user("outsider")
    settings = ClientSettings(
        api_url=fake.base_url,
        backoff_factor=0.01,
        secondary_rate_wait=1,
        max_rate_limit_wait=5,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    gh = make_github(CANARY, settings)
    return World(fake, gh, tmp_path)


class World:
    def __init__(self, fake, gh, tmp: Path):
        self.fake, self.gh, self.tmp, self.n = fake, gh, tmp, 0

    @property
    def repo(self):
        return self.gh.get_repo(REPO)

    def open_kernel_pr(self, branch="add-silu", author="maint", fork_owner=None, files=None, **kw):
        files = files if files is not None else {kernel_path("silu_and_mul"): KERNEL_RS}
        head_repo = None
        where = REPO
        if fork_owner:
            head_repo = self.fake.fork(REPO, fork_owner)
            where = head_repo
        self.fake.commit(where, branch, files, "add kernel", author=author)
        return self.fake.open_pr(REPO, head_repo, branch, "Add kernel", author, **kw)

    def base_sha(self, pr):
        """The pull request's base commit as dispatch reads it (the tip of its base branch)."""
        return self.fake.state.base_sha(pr)

    def event(self, name, action=None, **kw):
        return parse_event(name, self.fake.webhook(name, action, **kw))

    def run(self, event):
        self.n += 1
        return run_all(
            self.gh,
            event,
            fake_port,
            self.tmp / f"run{self.n}",
            BOTS,
            run_ref=f"run-{self.n}",
            token=CANARY,
            generate=fake_generate,
        )

    def reviews(self, number):
        return list(self.repo.get_pull(number).get_reviews())

    def sticky(self, number):
        return [c for c in self.repo.get_pull(number).get_issue_comments() if STATUS_MARKER in c.body]

    def checks(self, sha):
        return list(self.repo.get_commit(sha).get_check_runs(check_name="agent-d"))

    def all_checks(self, sha):
        """Every agent-d run on ``sha``, oldest first (``checks`` is GitHub's default: the newest)."""
        runs = self.repo.get_commit(sha).get_check_runs(check_name="agent-d", filter="all")
        return sorted(runs, key=lambda c: c.id)

    def posts(self, pattern):
        return len(self.fake.calls("POST", pattern))


def _no_canary_anywhere(fake, *texts: str) -> None:
    for ex in fake.exchanges:
        assert CANARY not in json.dumps(ex.request_body), ex.path
        assert CANARY not in json.dumps(ex.response_body), ex.path
    for text in texts:
        assert CANARY not in text


# --------------------------------------------------------------------------- acceptance


def test_same_repo_pr_gets_one_commit_check_review_and_is_idempotent(world, caplog):
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
    _no_canary_anywhere(world.fake, caplog.text)


def s2_comment_id(world, number):
    return max(
        c.id
        for c in world.fake.state.comments.values()
        if c.issue_number == number and c.body.startswith("/agent-d")
    )


def test_pr_without_kernel_gets_a_neutral_check(world):
    pr = world.open_kernel_pr(branch="docs", files={"README.md": "better docs\n"})
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert not s.dispatch.run and s.dispatch.conclusion == "neutral"
    head = world.fake.pr_head_sha(pr)
    assert [(c.status, c.conclusion) for c in world.checks(head)] == [("completed", "neutral")]
    assert world.reviews(pr.number) == [] and world.sticky(pr.number) == []
    world.run(world.event("pull_request", "opened", pr=pr.number))
    assert len(world.checks(head)) == 1


def test_fork_pr_waits_for_a_maintainer_and_approval_covers_one_sha(world):
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
    req = FinalizeRequest(REPO, pr.number, sha1, d.check_run_id, [art], commit=True, push_token=CANARY)
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


def test_push_while_running_cancels_the_old_run(world):
    pr = world.open_kernel_pr()
    sha1 = world.fake.pr_head_sha(pr)
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="a").run()
    art = run_port_job(
        prepare_checkout(world.fake.clone_url(REPO), "refs/heads/add-silu", sha1, world.tmp / "co"),
        sha1,
        ["silu_and_mul"],
        world.tmp / "art",
        fake_port,
        repo_name=REPO,
        base_sha=d.base_sha,
    )
    sha2 = world.fake.commit(REPO, "add-silu", {"README.md": "edited\n"}, "edit", author="maint")
    d2 = Dispatcher(
        world.gh, world.event("pull_request", "synchronize", pr=pr.number, before=sha1, after=sha2), BOTS
    ).run()
    assert d2.run and d2.head_sha == sha2
    old = world.repo.get_check_run(d.check_run_id)
    assert (old.status, old.conclusion) == ("completed", "cancelled")
    fin = Finalizer(
        world.gh, FinalizeRequest(REPO, pr.number, sha1, d.check_run_id, [art]), BOTS, fake_generate
    ).run()
    assert fin.conclusion == "cancelled" and not fin.pushed
    assert world.reviews(pr.number) == []
    assert world.repo.get_check_run(d.check_run_id).conclusion == "cancelled"
    assert world.fake.branch_sha(REPO, "add-silu") == sha2


def test_fork_without_maintainer_edits_gets_the_patch_in_the_review(world):
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


def test_auto_commit_off_needs_apply(world):
    world.fake.commit(REPO, "main", {".github/agent-d.yml": "auto_commit: false\n"}, "config", author="maint")
    pr = world.open_kernel_pr()
    sha = world.fake.pr_head_sha(pr)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert s.dispatch.run and not s.finalize.pushed and "/agent-d apply" in world.reviews(pr.number)[0].body
    s = world.run(
        world.event("issue_comment", "created", pr=pr.number, body="/agent-d apply", commenter="maint")
    )
    assert s.finalize.pushed and world.fake.branch_sha(REPO, "add-silu") != sha


def test_github_errors_on_reads_and_creates(world, caplog):
    pr = world.open_kernel_pr()
    fake = world.fake
    fake.inject("GET", rf"/pulls/{pr.number}$", 502, times=2)
    fake.inject_secondary_rate_limit("GET", r"/pulls/\d+/files", retry_after=1)
    fake.inject_primary_rate_limit("GET", r"/contents/", reset_in=1)
    fake.inject("POST", r"/pulls/\d+/reviews$", 502, after_effect=True)
    fake.inject("POST", r"/issues/\d+/comments$", 502, after_effect=True)
    fake.inject_secondary_rate_limit("POST", r"/check-runs$", retry_after=1)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert s.finalize.pushed and s.finalize.conclusion == "success"
    assert len(world.reviews(pr.number)) == 1
    assert len(world.sticky(pr.number)) == 1
    new = s.finalize.new_head
    assert [c.conclusion for c in world.checks(new)] == ["success"]
    assert all(i.hits == i.times for i in fake.injections)
    _no_canary_anywhere(fake, caplog.text)


def test_cli_three_zones_keep_the_canary_out(world, monkeypatch, capsys, caplog, tmp_path):
    from bot.cli import main
    from bot.github import finalize

    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(finalize, "_pipeline_generator", lambda: fake_generate)
    pr = world.open_kernel_pr()
    sha = world.fake.pr_head_sha(pr)
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_WRITES", "0")
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_REQUESTS", "0")
    event = world.fake.write_webhook(tmp_path / "event.json", "pull_request", "opened", pr=pr.number)
    out = tmp_path / "gh_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    assert main(["dispatch", "--event-name", "pull_request", "--event-path", str(event)]) == 0
    outputs = _read_outputs(out)
    assert outputs["run"] == "true" and outputs["concurrency_group"] == f"agent-d-pr-{pr.number}"
    matrix = json.loads(outputs["matrix"])["include"]
    assert [(m["kernel"], m["head_sha"]) for m in matrix] == [("silu_and_mul", sha)]
    checkout = prepare_checkout(world.fake.clone_url(REPO), "refs/heads/add-silu", sha, tmp_path / "co")
    base = matrix[0]["base_sha"]
    assert base == outputs["base_sha"] == world.base_sha(pr)
    art = run_port_job(
        checkout, sha, ["silu_and_mul"], tmp_path / "art", fake_port, repo_name=REPO, base_sha=base
    )
    out.unlink()
    argv = [
        "finalize",
        "--repo",
        REPO,
        "--pr",
        str(pr.number),
        "--head-sha",
        sha,
        "--base-sha",
        base,
        "--check-run-id",
        outputs["check_run_id"],
        "--artifacts",
        str(art),
    ]
    assert main(argv) == 0
    fin = _read_outputs(out)
    assert fin["conclusion"] == "success" and fin["pushed"] == "True"
    captured = capsys.readouterr()
    texts = [captured.out, captured.err, caplog.text]
    texts += [p.read_text() for p in art.rglob("*") if p.is_file()]
    _no_canary_anywhere(world.fake, *texts)
    assert os.environ["GITHUB_TOKEN"] == CANARY


def _read_outputs(path: Path) -> dict[str, str]:
    out, lines = {}, path.read_text().splitlines()
    i = 0
    while i < len(lines):
        key = lines[i].split("<<", 1)[0]
        j = lines.index("AGENT_D_EOF", i + 1)
        out[key] = "\n".join(lines[i + 1 : j])
        i = j + 1
    return out


def test_duplicate_delivery_queues_once(world):
    pr = world.open_kernel_pr()
    ev = world.event("pull_request", "opened", pr=pr.number)
    first = Dispatcher(world.gh, ev, BOTS, run_ref="1").run()
    second = Dispatcher(world.gh, ev, BOTS, run_ref="2").run()
    assert first.run and not second.run and second.reason == "already handled"
    assert len(world.checks(world.fake.pr_head_sha(pr))) == 1
    assert len(world.sticky(pr.number)) == 1
    # the redelivery is a no-op: the run the first delivery queued is still queued, not cancelled
    [check] = world.all_checks(world.fake.pr_head_sha(pr))
    assert check.id == first.check_run_id == second.check_run_id
    assert (check.status, check.conclusion) == ("queued", None)


def test_redelivery_after_a_newer_run_on_the_head_is_still_a_no_op(world):
    # GitHub lists only the newest run of each name unless asked for all: the lookup must ask
    pr = world.open_kernel_pr()
    head = world.fake.pr_head_sha(pr)
    opened = world.event("pull_request", "opened", pr=pr.number)
    first = Dispatcher(world.gh, opened, BOTS, run_ref="1").run()
    comment = world.event("issue_comment", "created", pr=pr.number, body="/agent-d rerun", commenter="maint")
    rerun = Dispatcher(world.gh, comment, BOTS, run_ref="2").run()
    assert first.run and rerun.run and rerun.check_run_id != first.check_run_id
    again = Dispatcher(world.gh, opened, BOTS, run_ref="3").run()
    assert not again.run and again.reason == "already handled" and again.check_run_id == first.check_run_id
    # the maintainer's rerun superseded the first run; the redelivery cancelled nothing, queued nothing
    runs = {c.id: (c.status, c.conclusion) for c in world.all_checks(head)}
    assert runs == {first.check_run_id: ("completed", "cancelled"), rerun.check_run_id: ("queued", None)}


def test_a_draft_pr_is_ported_when_it_is_ready_for_review(world):
    pr = world.open_kernel_pr(branch="draft-silu", draft=True)
    head = world.fake.pr_head_sha(pr)
    draft = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="1").run()
    assert not draft.run and draft.conclusion == "neutral" and draft.reason == "draft pull request"
    assert [(c.status, c.conclusion) for c in world.checks(head)] == [("completed", "neutral")]
    # the same draft delivery again: nothing new
    again = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="2").run()
    assert not again.run and again.reason == "already handled"
    assert len(world.checks(head)) == 1 and len(world.all_checks(head)) == 1

    with world.fake.state.lock:
        pr.draft = False  # marked ready for review; the head does not move
    ready = world.event("pull_request", "ready_for_review", pr=pr.number)
    queued = Dispatcher(world.gh, ready, BOTS, run_ref="3").run()
    assert queued.run and queued.head_sha == head and queued.kernels == ["silu_and_mul"]
    runs = [(c.id, c.status, c.conclusion) for c in world.all_checks(head)]
    assert runs == [(draft.check_run_id, "completed", "neutral"), (queued.check_run_id, "queued", None)]
    # ready_for_review delivered twice: no second run, the queued one stays queued
    twice = Dispatcher(world.gh, ready, BOTS, run_ref="4").run()
    assert not twice.run and twice.reason == "already handled" and twice.check_run_id == queued.check_run_id
    assert [(c.id, c.status, c.conclusion) for c in world.all_checks(head)] == runs
    assert len(world.sticky(pr.number)) == 1


def test_check_rerun_button_and_help_and_copy_pr_bot_push(world):
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


def test_bot_commit_cap_and_refused_push_fall_back_to_the_patch(world):
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


def test_finalize_rejects_tampered_or_missing_artifacts_and_concludes(world):
    pr = world.open_kernel_pr()
    sha = world.fake.pr_head_sha(pr)
    checkout = prepare_checkout(world.fake.clone_url(REPO), "refs/heads/add-silu", sha, world.tmp / "co")

    def dispatch_and_port(tag):
        ev = world.event("workflow_dispatch", inputs={"pr": str(pr.number)}, sender="maint")
        d = Dispatcher(world.gh, ev, BOTS, run_ref=tag).run()
        assert d.run
        art = run_port_job(
            checkout,
            sha,
            ["silu_and_mul"],
            world.tmp / f"art-{tag}",
            fake_port,
            repo_name=REPO,
            base_sha=d.base_sha,
        )
        return d, art

    d, art = dispatch_and_port("tamper")
    patch = (art / "patch.diff").read_text()
    (art / "patch.diff").write_text(patch.replace("pub unsafe extern", "pub unsafe  extern"))
    fin = Finalizer(
        world.gh, FinalizeRequest(REPO, pr.number, sha, d.check_run_id, [art]), BOTS, fake_generate
    ).run()
    assert fin.conclusion == "failure" and "not the tested" in fin.notes[0]
    assert world.fake.branch_sha(REPO, "add-silu") == sha and world.reviews(pr.number) == []

    d, _ = dispatch_and_port("missing")
    req = FinalizeRequest(REPO, pr.number, sha, d.check_run_id, [world.tmp / "nope"], port_result="failure")
    assert Finalizer(world.gh, req, BOTS, fake_generate).run().conclusion == "failure"

    d, art = dispatch_and_port("cancel")
    req = FinalizeRequest(REPO, pr.number, sha, d.check_run_id, [art], port_result="cancelled")
    assert Finalizer(world.gh, req, BOTS, fake_generate).run().conclusion == "cancelled"
    assert all(c.status == "completed" for c in world.checks(sha))
    assert world.reviews(pr.number) == []


def _reactions(world, number, login):
    """Reactions on the newest comment by ``login`` on PR ``number``."""
    comments = [
        c for c in world.fake.state.comments.values() if c.issue_number == number and c.user.login == login
    ]
    newest = max(comments, key=lambda c: c.id)
    return {r.content for r in newest.reactions}


def test_cli_run_does_all_three_in_one_process(world, monkeypatch, tmp_path, capsys):
    from bot.cli import main
    from bot.github import finalize, runner

    monkeypatch.setattr(runner, "pipeline_port_fn", lambda **_: fake_port)
    monkeypatch.setattr(finalize, "_pipeline_generator", lambda: fake_generate)
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_WRITES", "0")
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_REQUESTS", "0")
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    pr = world.open_kernel_pr()
    event = world.fake.write_webhook(tmp_path / "event.json", "pull_request", "opened", pr=pr.number)
    argv = [
        "run",
        "--event-name",
        "pull_request",
        "--event-path",
        str(event),
        "--workdir",
        str(tmp_path / "w"),
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["run"] == "true" and out["finalize_pushed"] == "True" and out["finalize_conclusion"] == "success"
    )
    assert len(world.reviews(pr.number)) == 1


def _two_kernels():
    return {
        kernel_path("silu_and_mul"): KERNEL_RS,
        kernel_path("swiglu"): KERNEL_RS.replace("silu_and_mul", "swiglu"),
    }


def test_two_kernels_in_one_tree_by_default(world):
    pr = world.open_kernel_pr(files=_two_kernels())
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert [m.kernel for m in s.dispatch.matrix] == ["silu_and_mul swiglu"]
    assert s.finalize.pushed and s.finalize.conclusion == "success"
    body = world.reviews(pr.number)[0].body
    assert "`silu_and_mul`" in body and "`swiglu`" in body


def test_two_kernels_per_kernel_jobs_that_conflict_fail_loudly(world):
    world.fake.commit(REPO, "main", {".github/agent-d.yml": "matrix: per_kernel\n"}, "config", author="maint")
    pr = world.open_kernel_pr(files=_two_kernels())
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert [m.kernel for m in s.dispatch.matrix] == ["silu_and_mul", "swiglu"]
    # both test port functions append to lib.rs at the same place: the patches cannot be combined
    assert not s.finalize.pushed and s.finalize.conclusion == "failure"
    assert "matrix: single" in s.finalize.notes[0]
    head = world.fake.pr_head_sha(pr)
    assert [c.conclusion for c in world.checks(head)] == ["failure"]


def test_a_users_comment_carrying_the_reply_marker_does_not_suppress_the_reply(world):
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


def test_a_reserved_kernel_name_is_refused_like_the_local_cli(world):
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


def test_an_outsiders_push_to_a_maintainers_fork_waits_for_approval(world):
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


def test_a_github_error_echoing_the_token_ends_in_one_redacted_line(
    world, monkeypatch, capsys, caplog, tmp_path
):
    from bot.cli import INTERNAL_EXIT, main

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_WRITES", "0")
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_REQUESTS", "0")
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    pr = world.open_kernel_pr()
    sha = world.fake.pr_head_sha(pr)
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="x").run()
    art = run_port_job(
        prepare_checkout(world.fake.clone_url(REPO), "refs/heads/add-silu", sha, tmp_path / "co"),
        sha,
        ["silu_and_mul"],
        tmp_path / "art",
        fake_port,
        repo_name=REPO,
        base_sha=d.base_sha,
    )
    echo = {"message": f"Bad credentials: token {CANARY} is not valid here", "documentation_url": "x"}
    world.fake.inject("GET", rf"/pulls/{pr.number}$", 404, body=echo)
    argv = ["finalize", "--repo", REPO, "--pr", str(pr.number), "--head-sha", sha]
    argv += ["--check-run-id", str(d.check_run_id), "--artifacts", str(art)]
    assert main(argv) == INTERNAL_EXIT
    err = capsys.readouterr().err
    assert "Traceback" not in err and CANARY not in err and CANARY not in caplog.text
    assert [line for line in err.splitlines() if "internal error" in line] == [err.strip().splitlines()[-1]]
    assert "Bad credentials: token *** is not valid" in err
    check = world.repo.get_check_run(d.check_run_id)
    assert (check.status, check.conclusion) == ("completed", "failure") and CANARY not in check.output.summary


def test_the_check_on_agent_ds_commit_is_created_concluded_in_one_write(world):
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
    # check (concluded), the tested head's check concluded, the review, the status comment, unlock
    assert len(writes) == 10, writes
