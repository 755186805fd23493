"""End-to-end against the local GitHub (tests/ghfake): each run's check is queued once and concluded
once. A push while running cancels the old run; a duplicate delivery queues nothing new, even after a
newer run; a draft PR runs when it is ready for review; finalize refuses tampered or missing artifacts
and still concludes the check."""

from __future__ import annotations

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, REPO, world  # noqa: F401
from test_github_support import fake_generate, fake_port

from bot.github.dispatch import Dispatcher
from bot.github.finalize import Finalizer, FinalizeRequest
from bot.github.port_job import run_port_job
from bot.github.runner import prepare_checkout


def test_push_while_running_cancels_the_old_run(world):  # noqa: F811
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


def test_duplicate_delivery_queues_once(world):  # noqa: F811
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


def test_redelivery_after_a_newer_run_on_the_head_is_still_a_no_op(world):  # noqa: F811
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


def test_a_draft_pr_is_ported_when_it_is_ready_for_review(world):  # noqa: F811
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


def test_finalize_rejects_tampered_or_missing_artifacts_and_concludes(world):  # noqa: F811
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
