"""Annotations where the fault is, end to end against the local GitHub (tests/ghfake): the port job's
verdict carries them through the artifact, and finalize puts them on the check run that holds the
results, at most 50 a request (the server refuses more, and checks each annotation it gets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, CANARY, REPO, world  # noqa: F401
from test_github_hostile_kernels import OP, _tilegym_main
from test_github_support import fake_generate, fake_port, kernel_path

from bot.build.types import Annotation
from bot.github.credentials import TokenCredentials
from bot.github.runner import pipeline_port_fn, run_all

KERNEL = kernel_path(OP)


def _run(world, port, tmp: Path, name: str = "run"):  # noqa: F811
    pr = world.open_kernel_pr()
    summary = run_all(world.gh, world.event("pull_request", "opened", pr=pr.number), port, tmp / name, BOTS,
                      name, TokenCredentials(CANARY), generate=fake_generate)  # fmt: skip
    assert summary.dispatch.run and summary.finalize is not None
    return pr, summary


def _annotation_batches(world) -> list[int]:  # noqa: F811
    """How many annotations each request to a check run carried, in order."""
    return [
        len((ex.request_body.get("output") or {}).get("annotations", []))
        for ex in world.fake.exchanges
        if ex.method in ("POST", "PATCH") and "/check-runs" in ex.path and isinstance(ex.request_body, dict)
        if (ex.request_body.get("output") or {}).get("annotations")
    ]


def _many(n: int) -> tuple[Annotation, ...]:
    return tuple(
        Annotation(KERNEL, line, line, "failure", "cargo error in kernel.rs", f"error {line}")
        for line in range(1, n + 1)
    )


def _failing_with(places: tuple[Annotation, ...]):
    def port(repo: Path, op: str):
        _, _, _, block = fake_port(repo, op)
        return "FAIL", "kernel", "cargo error in kernel.rs", block, False, places

    return port


def test_more_than_50_annotations_go_in_requests_of_50_on_the_check_with_the_results(world, tmp_path):  # noqa: F811
    _, summary = _run(world, _failing_with(_many(75)), tmp_path)
    assert summary.finalize.pushed and summary.finalize.conclusion == "failure"
    assert _annotation_batches(world) == [50, 25]  # the conclusion with the first 50, then the rest
    head = world.fake.branch_sha(REPO, "add-silu")
    [check] = world.checks(head)
    shown = list(check.get_annotations())
    assert [(a.path, a.start_line, a.annotation_level) for a in shown] == [
        (KERNEL, n, "failure") for n in range(1, 76)
    ]
    assert shown[0].message == "error 1" and shown[0].title == "cargo error in kernel.rs"
    # the run on the tested commit only points at the new head: no annotations twice
    [tested] = world.checks(summary.dispatch.head_sha)
    assert list(tested.get_annotations()) == []


def test_without_a_push_the_annotations_are_on_the_tested_commit_s_check(world, tmp_path):  # noqa: F811
    world.fake.commit(REPO, "main", {".github/agent-d.yml": "auto_commit: false\n"}, "config", author="maint")
    place = Annotation(KERNEL, 7, 7, "failure", "cargo error[E0308] in kernel.rs", "mismatched types", 9, 14)
    _, summary = _run(world, _failing_with((place,)), tmp_path)
    assert not summary.finalize.pushed
    [check] = world.checks(summary.dispatch.head_sha)
    [shown] = check.get_annotations()
    assert (shown.path, shown.start_line, shown.start_column, shown.end_column) == (KERNEL, 7, 9, 14)
    assert _annotation_batches(world) == [1]


def test_a_passing_port_sends_no_annotations(world, tmp_path):  # noqa: F811
    _, summary = _run(world, fake_port, tmp_path)
    assert summary.finalize.conclusion == "success" and _annotation_batches(world) == []


@pytest.mark.slow
def test_a_kernel_rs_that_does_not_compile_gets_an_annotation_on_its_line(
    world,  # noqa: F811
    tilegym_wheel,
    cargo_target_dir,
    tmp_path,
):
    """The acceptance case: the real port (generation, a real cargo build), the real finalize."""
    kernel = _tilegym_main(world, tilegym_wheel, tmp_path)
    anchor = "let pid: i32 = get_tile_block_id().0;"
    bad = '        let _bad: u8 = "not a number";'
    broken = kernel.replace(anchor, f"{anchor}\n{bad}", 1)
    assert broken != kernel
    line = broken.splitlines().index(bad) + 1
    pr = world.open_kernel_pr(files={KERNEL: broken})
    event = world.event("pull_request", "opened", pr=pr.number)
    port = pipeline_port_fn(cargo_target_dir=cargo_target_dir)
    summary = run_all(world.gh, event, port, tmp_path / "run", BOTS, "annotations", TokenCredentials(CANARY))
    assert summary.finalize is not None and summary.finalize.conclusion == "failure"
    head = world.fake.branch_sha(REPO, "add-silu")
    [check] = world.checks(head)
    assert check.output.title == "VERDICT: FAIL (fail_class: kernel)"
    [shown] = check.get_annotations()
    assert (shown.path, shown.start_line, shown.end_line, shown.annotation_level) == (
        KERNEL,
        line,
        line,
        "failure",
    )
    assert shown.start_column == bad.index('"not a number"') + 1
    assert shown.title == "cargo error[E0308] in kernel.rs" and shown.message.startswith("mismatched types")
    assert shown.blob_href.endswith(f"/blob/{head}/{KERNEL}")
