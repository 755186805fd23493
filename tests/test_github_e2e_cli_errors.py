"""End-to-end against the local GitHub (tests/ghfake): the CLI's three zones (dispatch, port job,
finalize) and ``agent-d run`` in one process, and GitHub's errors (5xx, rate limits, an error echoing the
token) on the way; the canary token never reaches GitHub, a log, an artifact or the error line."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, CANARY, REPO, no_canary_anywhere, world  # noqa: F401
from test_github_support import fake_generate, fake_port

from bot.github.dispatch import Dispatcher
from bot.github.port_job import run_port_job
from bot.github.runner import prepare_checkout


def test_github_errors_on_reads_and_creates(world, caplog):  # noqa: F811
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
    no_canary_anywhere(fake, caplog.text)


def test_cli_three_zones_keep_the_canary_out(world, monkeypatch, capsys, caplog, tmp_path):  # noqa: F811
    from bot.cli import main
    from bot.github import finalize

    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(finalize, "_pipeline_generator", lambda: fake_generate)
    pr, sha, out = _dispatched(world, monkeypatch, tmp_path)
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
    no_canary_anywhere(world.fake, *texts)
    assert os.environ["GITHUB_TOKEN"] == CANARY


def _dispatched(world, monkeypatch, tmp_path: Path):  # noqa: F811
    """A kernel PR opened and `agent-d dispatch` run on its event through the CLI, as the
    workflow's first job does: (the PR, its head, the GITHUB_OUTPUT file dispatch wrote)."""
    from bot.cli import main

    pr = world.open_kernel_pr()
    sha = world.fake.pr_head_sha(pr)
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_WRITES", "0")
    monkeypatch.setenv("AGENT_D_SECONDS_BETWEEN_REQUESTS", "0")
    event = world.fake.write_webhook(tmp_path / "event.json", "pull_request", "opened", pr=pr.number)
    out = tmp_path / "gh_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    assert main(["dispatch", "--event-name", "pull_request", "--event-path", str(event)]) == 0
    return pr, sha, out


def _read_outputs(path: Path) -> dict[str, str]:
    out, lines = {}, path.read_text().splitlines()
    i = 0
    while i < len(lines):
        key = lines[i].split("<<", 1)[0]
        j = lines.index("AGENT_D_EOF", i + 1)
        out[key] = "\n".join(lines[i + 1 : j])
        i = j + 1
    return out


def test_cli_run_does_all_three_in_one_process(world, monkeypatch, tmp_path, capsys):  # noqa: F811
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


def test_a_github_error_echoing_the_token_ends_in_one_redacted_line(
    world,  # noqa: F811
    monkeypatch,
    capsys,
    caplog,
    tmp_path,
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


def test_a_check_a_killed_finalize_left_queued_is_concluded_once(world, monkeypatch, capsys, tmp_path):  # noqa: F811
    """Issue 33, finding 7: finalize was killed (a forged artifact's alias bomb ran it to its timeout),
    the check stayed queued. The workflow's `conclude` job concludes it; run again, it changes nothing."""
    from bot.cli import main

    pr, sha, out = _dispatched(world, monkeypatch, tmp_path)
    check_id = _read_outputs(out)["check_run_id"]
    (check,) = world.checks(sha)
    assert check.status != "completed"  # queued; finalize never comes
    out.unlink()
    argv = ["conclude", "--repo", REPO, "--check-run-id", check_id, "--finalize-result", "cancelled"]
    assert main(argv) == 0
    (check,) = world.checks(sha)
    assert (check.status, check.conclusion) == ("completed", "failure")
    assert check.output.title == "agent-d error"
    assert "finalize job ended (cancelled) without concluding this check" in check.output.summary
    assert _read_outputs(out)["conclusion"] == "failure"
    edits = len(world.fake.calls("PATCH", r"/check-runs/\d+$"))
    assert main(argv) == 0  # concluded already: nothing is written
    assert len(world.fake.calls("PATCH", r"/check-runs/\d+$")) == edits
    assert "is concluded already (failure): nothing to do" in capsys.readouterr().out
