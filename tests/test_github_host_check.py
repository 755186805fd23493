"""A pull request that changes a port's own host code and adds no kernel.rs (issue 35, deliverable
2), against the local GitHub: dispatch checks the port as it is at the head, concludes the check
with an annotation on each finding's line, posts one review, pushes nothing and queues no GPU job."""

from __future__ import annotations

from pathlib import Path

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, REPO, world  # noqa: F401

from bot.github.dispatch import Dispatcher

OPS = "src/tilegym/ops/cutile_rs"


def _hand_written_bmm(tilegym_wheel: Path) -> dict[str, str]:
    """TileGym's hand-written bmm port from the tilegym 1.5.1 wheel, as the base branch holds it."""
    ops = tilegym_wheel / "tilegym" / "ops" / "cutile_rs"
    names = ["bmm_kernel/kernel.rs", "bmm_kernel/ffi.rs", "bmm.py", "ffi_util.rs"]
    return {f"{OPS}/{name}": (ops / name).read_text() for name in names}


def _open_pr(world, files: dict[str, str], branch: str):  # noqa: F811
    world.fake.commit(REPO, branch, files, "edit bmm's host code", author="maint")
    return world.fake.open_pr(REPO, None, branch, "Edit bmm's host code", "maint")


def test_an_edit_that_drops_check_rc_gets_a_failing_check_with_the_line_and_a_review(world, tilegym_wheel):  # noqa: F811
    base = _hand_written_bmm(tilegym_wheel)
    world.fake.commit(REPO, "main", base, "TileGym's hand-written bmm")
    wrapper = f"{OPS}/bmm.py"
    edited = base[wrapper].replace("    check_rc(rc, _FFI_NAME)\n", "")
    pr = _open_pr(world, {wrapper: edited}, "drop-check")
    head = world.fake.pr_head_sha(pr)
    decision = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS).run()
    assert not decision.run and decision.conclusion == "failure"  # no GPU job, the check concluded
    [check] = world.checks(head)
    assert (check.status, check.conclusion, check.output.title) == (
        "completed",
        "failure",
        "host code findings",
    )
    call_line = next(i for i, t in enumerate(edited.splitlines(), 1) if "rc = lib.cutile_bmm(" in t)
    [note] = list(check.get_annotations())
    assert (note.path, note.start_line, note.annotation_level) == (wrapper, call_line, "failure")
    assert "is not passed to check_rc" in note.message
    [review] = world.reviews(pr.number)
    assert review.state == "COMMENTED" and f"`{wrapper}:{call_line}`" in review.body
    assert world.fake.branch_sha(REPO, "drop-check") == head  # nothing pushed


def test_an_edit_that_keeps_the_rules_gets_a_passing_check(world, tilegym_wheel):  # noqa: F811
    base = _hand_written_bmm(tilegym_wheel)
    world.fake.commit(REPO, "main", base, "TileGym's hand-written bmm")
    wrapper = f"{OPS}/bmm.py"
    pr = _open_pr(world, {wrapper: base[wrapper] + "\n# a comment\n"}, "comment-only")
    decision = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS).run()
    assert not decision.run and decision.conclusion == "success"
    [check] = world.checks(world.fake.pr_head_sha(pr))
    assert check.output.title == "host code holds" and list(check.get_annotations()) == []
    assert "| `bmm` | holds |" in world.reviews(pr.number)[0].body
    # the same delivery again: nothing new
    Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS).run()
    assert len(world.reviews(pr.number)) == 1
