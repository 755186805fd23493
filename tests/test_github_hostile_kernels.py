"""Hostile kernels end to end against the local GitHub: dispatch, the real port, finalize.

The pull request is a TileGym checkout (assembled from the tilegym wheel) whose kernel.rs is
hostile. The port job runs agent-d's real pipeline (``runner.pipeline_port_fn``) and finalize
regenerates with agent-d's real generator, as ``agent-d run`` does. Each kernel must end in a
posted FAIL kernel verdict with its reason; nothing is pushed, and nothing of the runner's
files reaches a review, a comment, a check or the artifact.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, CANARY, REPO, world  # noqa: F401
from test_github_support import BASE_FILES, kernel_path, visible

from bot.demo import assemble_checkout
from bot.github.credentials import TokenCredentials
from bot.github.runner import pipeline_port_fn, run_all

OP = "silu_and_mul"
SECRET = "RUNNER-SECRET-4c1d9e"


def _tilegym_main(world, wheel: Path, tmp: Path) -> str:  # noqa: F811
    """The fake repository's main becomes the demo's base commit; returns the real kernel.rs."""
    co = assemble_checkout(tmp / "demo", wheel, [OP], [OP]).repo
    kernel = co / kernel_path(OP)
    files: dict[str, str | bytes | None] = {
        p.relative_to(co).as_posix(): p.read_bytes()
        for p in co.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(co).parts and p != kernel
    }
    files.update({name: None for name in BASE_FILES if name not in files})
    world.fake.commit(REPO, "main", files, "tilegym base", author="maint")
    return kernel.read_text()


def _run_real_port(world, kernel_rs: str, tmp: Path):  # noqa: F811
    pr = world.open_kernel_pr(files={kernel_path(OP): kernel_rs})
    head = world.fake.pr_head_sha(pr)
    event = world.event("pull_request", "opened", pr=pr.number)
    summary = run_all(
        world.gh, event, pipeline_port_fn(), tmp / "run", BOTS, "hostile", TokenCredentials(CANARY)
    )
    assert summary.dispatch.run and summary.dispatch.head_sha == head
    return pr, head, summary


def _everything_posted(world) -> str:  # noqa: F811
    return "\n".join(
        json.dumps(ex.request_body) + json.dumps(ex.response_body) for ex in world.fake.exchanges
    )


def _verdict_posted_nothing_pushed(world, pr, head, summary) -> str:  # noqa: F811
    """The check concluded failure, one review on the head, nothing pushed; returns what they show."""
    fin = summary.finalize
    assert fin is not None and not fin.pushed and fin.conclusion == "failure"
    assert world.fake.branch_sha(REPO, "add-silu") == head
    [check] = world.checks(head)
    assert (check.status, check.conclusion) == ("completed", "failure")
    [review] = world.reviews(pr.number)
    assert review.commit_id == head
    return visible(review.body + "\n" + check.output.summary)


VERDICT = "FAIL (fail_class: kernel)"


# `include_str!` by its name, and under cutile's `assert` through a renamed import (evaluated in a
# const, its panic would print the file): each is refused by the reader's allow-list at its line
LEAKS = {
    "named": ('compile_error!(include_str!("{path}"));', "a `compile_error!` item outside the"),
    "renamed": (
        "pub use core::include_str as assert;",
        "`use core::..`: a kernel imports only from `cutile`",
    ),
}


@pytest.mark.parametrize("leak", sorted(LEAKS))
def test_a_kernel_that_includes_a_runner_file_fails_with_the_reason_and_leaks_nothing(
    world,  # noqa: F811
    tilegym_wheel,
    tmp_path,
    caplog,
    capsys,
    leak,
):
    caplog.set_level(logging.DEBUG)
    runner_file = tmp_path / "runner" / "credentials.rs"
    runner_file.parent.mkdir()
    runner_file.write_text(f'"{SECRET}"\n')
    kernel = _tilegym_main(world, tilegym_wheel, tmp_path)
    line_text, refusal = LEAKS[leak]
    line_text = line_text.format(path=runner_file)
    hostile = kernel.replace("#[cutile::module]", f"{line_text}\n#[cutile::module]", 1)
    if leak == "renamed":
        hostile = hostile.replace(
            "use cutile::core::*;", f'use cutile::core::*;\n    const _L: () = assert!("{runner_file}");', 1
        )
    assert hostile != kernel
    pr, head, summary = _run_real_port(world, hostile, tmp_path)
    # the runner file's content is nowhere: GitHub's traffic, the artifact, the logs, the output
    texts = [_everything_posted(world), caplog.text, *capsys.readouterr()]
    texts += [p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert not [t for t in texts if SECRET in t]
    shown = _verdict_posted_nothing_pushed(world, pr, head, summary)
    line = hostile.splitlines().index(line_text) + 1
    assert "kernel.rs holds what a kernel may not: " in shown
    assert f"line {line}: {refusal}" in shown
    assert shown.count(VERDICT) >= 2  # the review's heading and the check's table
    # the refused line is annotated on the check, in the pull request's kernel.rs
    [check] = world.checks(head)
    places = [(a.path, a.start_line, a.annotation_level) for a in check.get_annotations()]
    assert (kernel_path(OP), line, "failure") in places


@pytest.mark.parametrize("opener,closer", [("(", ")"), ("{", "}")])
def test_a_deeply_nested_kernel_gets_a_kernel_verdict_not_blocked_env(
    world,  # noqa: F811
    tilegym_wheel,
    tmp_path,
    opener,
    closer,
):
    kernel = _tilegym_main(world, tilegym_wheel, tmp_path)
    deep = f"\nconst _DEEP: i32 = {opener * 200_000}1{closer * 200_000};\n"
    hostile = kernel.rstrip() + deep
    pr, head, summary = _run_real_port(world, hostile, tmp_path)
    shown = _verdict_posted_nothing_pushed(world, pr, head, summary)
    assert "BLOCKED" not in shown  # the machine is fine: the kernel is not
    assert "kernel.rs does not parse" in shown and "nested deeper than" in shown
    assert shown.count(VERDICT) >= 2
