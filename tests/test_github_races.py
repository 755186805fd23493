"""Races against the local GitHub: concurrent deliveries and concurrent finalizes stay single.

Each racer is a separate client (as separate workflow runs are) started together behind a
barrier, so every one of them looks before any of them writes.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, REPO, fake_client, world  # noqa: F401
from test_github_forged import _dispatch_and_port
from test_github_support import fake_generate

from bot.github import pr_lock
from bot.github.dispatch import Dispatcher
from bot.github.finalize import Finalizer, FinalizeRequest

ROOT = Path(__file__).resolve().parent.parent


def _race(n, fn):
    """Run ``fn(i)`` in ``n`` threads released together; return the results (raise the first error)."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def one(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    return results


def test_four_concurrent_deliveries_of_one_event_give_one_check_run_and_one_sticky(world):  # noqa: F811
    pr = world.open_kernel_pr()
    head = world.fake.pr_head_sha(pr)
    event = world.event("pull_request", "opened", pr=pr.number)
    world.fake.add_latency("GET", r"/check-runs$|/issues/\d+/comments$", 0.5)
    clients = [fake_client(world.fake) for _ in range(4)]
    results = _race(4, lambda i: Dispatcher(clients[i], event, BOTS, run_ref=f"d{i}").run())
    assert sum(r.run for r in results) == 1, [r.reason for r in results]
    assert len(world.all_checks(head)) == 1
    assert len(world.sticky(pr.number)) == 1
    _no_lock_left(world, pr.number)


def _no_lock_left(world, number):  # noqa: F811
    with world.fake.state.lock:
        assert world.fake.state.pull(world.fake.state.repo("nvidia", "tilegym"), number).reactions == []


def test_two_concurrent_finalizes_for_one_check_give_one_commit_one_check_and_one_review(world):  # noqa: F811
    pr, sha, d, _, art = _dispatch_and_port(world)
    req = FinalizeRequest(REPO, pr.number, sha, d.check_run_id, [art], kernels=("silu_and_mul",))
    world.fake.add_latency("GET", r"/check-runs|/reviews$|/issues/\d+/comments$", 0.5)
    clients = [fake_client(world.fake) for _ in range(2)]
    results = _race(2, lambda i: Finalizer(clients[i], req, BOTS, fake_generate).run())
    assert sorted(r.pushed for r in results) == [False, True]
    assert {r.conclusion for r in results} == {"success"}
    new = world.fake.branch_sha(REPO, "add-silu")
    assert world.repo.get_commit(new).parents[0].sha == sha  # one agent-d commit on the tested head
    assert [(c.status, c.conclusion) for c in world.all_checks(new)] == [("completed", "success")]
    check = world.repo.get_check_run(d.check_run_id)
    assert (check.status, check.conclusion) == ("completed", "success")
    [review] = world.reviews(pr.number)
    assert review.commit_id == new
    assert len(world.sticky(pr.number)) == 1
    _no_lock_left(world, pr.number)


def _plant_lock(world, number, login, age_s):  # noqa: F811
    """A 👀 reaction on the PR by ``login``, ``age_s`` seconds old."""
    import time

    from ghfake.state import Reaction

    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age_s))
    with world.fake.state.lock:
        state = world.fake.state
        pr = state.pull(state.repo("nvidia", "tilegym"), number)
        pr.reactions.append(Reaction(state.next_id(), state.user(login), "eyes", stamp))


def test_a_lock_left_by_a_dead_run_is_removed_and_a_users_reaction_is_no_lock(world):  # noqa: F811
    pr = world.open_kernel_pr()
    _plant_lock(world, pr.number, "maint", 0)  # a person's 👀 is theirs, not agent-d's lock
    _plant_lock(world, pr.number, "agent-d[bot]", pr_lock.STALE_S + 60)
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="1").run()
    assert d.run
    with world.fake.state.lock:
        left = world.fake.state.pull(world.fake.state.repo("nvidia", "tilegym"), pr.number).reactions
        assert [r.user.login for r in left] == ["maint"]


def test_a_held_lock_is_waited_for_and_then_given_up_with_a_reason(world, monkeypatch):  # noqa: F811
    pr = world.open_kernel_pr()
    _plant_lock(world, pr.number, "agent-d[bot]", 10)
    monkeypatch.setattr(pr_lock, "WAIT_S", 1.0)
    event = world.event("pull_request", "opened", pr=pr.number)
    with pytest.raises(pr_lock.LockTimeout, match="another agent-d run has been writing"):
        Dispatcher(world.gh, event, BOTS, run_ref="1").run()
    assert world.all_checks(world.fake.pr_head_sha(pr)) == []


def test_the_workflow_serializes_runs_of_one_event_and_finalizes_of_one_check():
    import yaml

    jobs = yaml.safe_load((ROOT / ".github/workflows/agent-d.yml").read_text())["jobs"]
    dispatch, finalize = jobs["dispatch"]["concurrency"], jobs["finalize"]["concurrency"]
    assert dispatch["cancel-in-progress"] is False and finalize["cancel-in-progress"] is False
    for key in ("github.event_name", "pull_request.head.sha", "comment.id", "check_run.id"):
        assert key in dispatch["group"]
    assert "needs.dispatch.outputs.check_run_id" in finalize["group"]
