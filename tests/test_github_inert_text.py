"""PR-derived text is inert wherever agent-d posts it: check summaries, the sticky comment,
replies and reviews (against the local GitHub).

Each scenario puts the same payload where a pull request's author or a commenter controls
the text: a command line, a kernel directory name, a path in a forged artifact, a push hook's
message.  What GitHub would render as an image, a link, a mention or a table break must come
out escaped, or inside a code span where nothing is markup.
"""

from __future__ import annotations

import re

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, REPO, world  # noqa: F401
from test_github_forged import _dispatch_and_port, _finalize, _forge
from test_github_support import KERNEL_RS, OPS

from bot.github.dispatch import Dispatcher
from bot.github.publish import STATUS_MARKER

PAYLOAD = "<img src=x onerror=alert(1)> [click](javascript:alert(1)) @everyone **bold** | cell"


def _outside_code(markdown: str) -> str:
    """``markdown`` without fenced blocks and inline code spans (where nothing is markup)."""
    markdown = re.sub(r"(?ms)^(`{3,}|~{3,}).*?^\1`*\s*$", "", markdown)
    return re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


def assert_inert(markdown: str) -> None:
    text = _outside_code(markdown)
    assert "<img" not in text, text
    assert "[click](" not in text, text
    assert "@everyone" not in text, text  # a mention pings; escaped it reads @\u200beveryone
    assert "**bold**" not in text, text
    assert "&lt;img" in text or "<img" in markdown  # the payload is there, shown, not dropped


def _comments(world, number):  # noqa: F811
    return [c.body for c in world.repo.get_pull(number).get_issue_comments()]


def test_an_invalid_command_is_quoted_inert_in_the_reply(world):  # noqa: F811
    pr = world.open_kernel_pr()
    body = f"/agent-d rerun --sha `{PAYLOAD}"
    event = world.event("issue_comment", "created", pr=pr.number, body=body, commenter="maint")
    assert not Dispatcher(world.gh, event, BOTS, run_ref="1").run().run
    [reply] = [b for b in _comments(world, pr.number) if "did not understand" in b]
    assert_inert(reply)
    assert "onerror" in reply  # quoted, not dropped


def test_a_refused_kernel_directory_name_is_inert_in_the_check_summary(world):  # noqa: F811
    name = "Bad <img src=x onerror=alert(1)> [click](javascript:alert(1)) @everyone **bold** | cell"
    pr = world.open_kernel_pr(files={f"{OPS}/{name}_kernel/kernel.rs": KERNEL_RS})
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS, run_ref="1").run()
    assert d.conclusion == "failure"
    check = world.repo.get_check_run(d.check_run_id)
    assert_inert(check.output.summary)


def test_a_workflow_dispatch_with_a_bad_kernel_name_gets_an_inert_reply(world):  # noqa: F811
    pr = world.open_kernel_pr()
    event = world.event("workflow_dispatch", inputs={"pr": str(pr.number), "kernels": PAYLOAD})
    assert not Dispatcher(world.gh, event, BOTS, run_ref="1").run().run
    [reply] = [b for b in _comments(world, pr.number) if "Nothing was run" in b]
    assert_inert(reply)


def test_a_hostile_path_in_a_forged_artifact_is_inert_in_the_check_and_the_sticky(world):  # noqa: F811
    pr, sha, d, checkout, art = _dispatch_and_port(world)
    path = f"{OPS}/{PAYLOAD}.rs"
    _forge(
        checkout,
        sha,
        art,
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n",
    )
    fin = _finalize(world, pr, sha, d, art)
    assert fin.conclusion == "failure"
    assert_inert(world.repo.get_check_run(d.check_run_id).output.summary)
    [sticky] = [b for b in _comments(world, pr.number) if STATUS_MARKER in b]
    assert_inert(sticky)


def test_a_push_hooks_message_is_inert_in_the_review(world):  # noqa: F811
    pr = world.open_kernel_pr()
    world.fake.push_rejection_hook(REPO, PAYLOAD)
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert not s.finalize.pushed
    [review] = world.reviews(pr.number)
    assert "the push was refused" in review.body
    assert_inert(review.body)
