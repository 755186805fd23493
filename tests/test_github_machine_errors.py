"""Robustness end to end against the local GitHub: input too deep for Python is a clear verdict.

The base branch is the TileGym checkout with a test file nested too deeply for Python's parser
(the tests always come from the base: bot/github/base_tree.py), the pull request adds a real
kernel; the port job runs agent-d's real pipeline and finalize its real generator.
The posted verdict names the file; no traceback or "internal error" reaches a review, the
status comment or the check.
"""

from __future__ import annotations

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, CANARY, REPO, world  # noqa: F401
from test_github_hostile_kernels import OP, _tilegym_main
from test_github_support import kernel_path, visible

from bot.github.credentials import TokenCredentials
from bot.github.publish import STATUS_MARKER
from bot.github.runner import pipeline_port_fn, run_all

TEST_FILE = f"tests/ops/test_{OP}.py"


def test_a_test_file_nested_too_deeply_is_a_named_blocked_verdict_without_a_traceback(
    world,  # noqa: F811
    tilegym_wheel,
    tmp_path,
):
    kernel = _tilegym_main(world, tilegym_wheel, tmp_path)
    test_text = (tmp_path / "demo" / TEST_FILE).read_text() + "\n_DEEP = 1" + "+1" * 30000 + "\n"
    world.fake.commit(REPO, "main", {TEST_FILE: test_text}, "a deep test", author="maint")
    pr = world.open_kernel_pr(files={kernel_path(OP): kernel})
    head = world.fake.pr_head_sha(pr)
    event = world.event("pull_request", "opened", pr=pr.number)
    s = run_all(world.gh, event, pipeline_port_fn(), tmp_path / "run", BOTS, "deep", TokenCredentials(CANARY))
    assert s.dispatch.run and s.finalize is not None and not s.finalize.pushed
    assert world.fake.branch_sha(REPO, "add-silu") == head
    [check] = world.checks(head)
    assert check.status == "completed"
    [review] = world.reviews(pr.number)
    sticky = [c.body for c in world.repo.get_pull(pr.number).get_issue_comments() if STATUS_MARKER in c.body]
    shown = visible("\n".join([review.body, check.output.summary, *sticky]))
    for crash in ("Traceback", "internal error", 'File "'):
        assert crash not in shown, crash
    assert f"{TEST_FILE} is nested too deeply for agent-d to read" in shown
    assert "BLOCKED (block_class: host)" in shown
