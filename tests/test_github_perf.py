"""The perf stage on GitHub, end to end against the local GitHub (tests/ghfake): an ALL_PASS port that
carries a perf result gets the perf table in its review and the informational ``agent-d/perf`` check
(success when DONE, neutral when INVESTIGATE, naming the slowest configs; never failure); the
summary travels in the artifact as schema-checked data, and config names from the pull request's
test ids stay inert text."""

from __future__ import annotations

import json
import logging

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github_world import BOTS, REPO, world  # noqa: F401
from test_github_support import fake_generate, fake_port

from bot.github.artifact import ArtifactError, read_artifact
from bot.github.runner import run_all
from bot.perf import summarise
from bot.perf.result import CUTILE, CUTILE_RS, PYTORCH, Case

HOSTILE = "64-<img src=x onerror=alert(1)>-@maint-`x`-[l](http://e.x)"


def _summary(rs_over_cutile: float, config: str = "64-1024-512-torch.float16", host: str = "") -> dict:
    """A perf stage's summary, made by the stage's own summariser from cases of two configs."""
    cases = []
    for name, dtype in ((config, "float16"), ("64-1024-512-torch.float32", "float32")):
        for backend, ms in ((CUTILE_RS, rs_over_cutile * 0.010), (CUTILE, 0.010), (PYTORCH, 0.020)):
            cases.append(
                Case(f"t.py::test_perf[{backend}-{name}]", backend, name, dtype, "passed", median_ms=ms)
            )
    result = summarise.summarise(cases)
    result.host_cause = host
    return result.summary()


def _port_with(summary: dict):
    def port(repo, op):
        kind, klass, reason, block = fake_port(repo, op)
        return kind, klass, reason, block, False, (), summary  # no annotations

    return port


def _run(world, port):  # noqa: F811
    world.n += 1
    return run_all(world.gh, world.event("pull_request", "opened", pr=world.pr.number), port,
                   world.tmp / f"run{world.n}", BOTS, run_ref=f"run-{world.n}", generate=fake_generate)  # fmt: skip


def _perf_checks(world, sha):  # noqa: F811
    return list(world.repo.get_commit(sha).get_check_runs(check_name="agent-d/perf"))


def test_a_done_port_gets_the_table_and_a_successful_perf_check(world, caplog):  # noqa: F811
    caplog.set_level(logging.INFO)
    world.pr = world.open_kernel_pr()
    s = _run(world, _port_with(_summary(0.98)))
    assert s.finalize.conclusion == "success" and s.finalize.pushed
    head = s.finalize.new_head
    [check] = _perf_checks(world, head)
    assert (check.status, check.conclusion, check.output.title) == ("completed", "success", "perf: DONE")
    assert [(c.status, c.conclusion) for c in world.checks(head)] == [
        ("completed", "success")
    ]  # the main one
    [review] = world.reviews(world.pr.number)
    body = review.body
    assert "### Performance (stage E): DONE" in body
    assert "| `silu_and_mul` | ` float16 ` | 1 | 0.980 | 0.490 |" in body
    assert "| `silu_and_mul` | **all** | 2 | **0.980** | 0.490 |" in body
    assert body.rstrip().endswith("VERDICT: ALL_PASS")  # the perf section leaves the verdict last
    art = read_artifact(s.artifacts[0])
    assert art.perf["silu_and_mul"]["verdict"] == "DONE"
    # the Actions job summary: the verdict table and the perf table, as in the review
    summary = s.finalize.summary
    assert summary.startswith("## agent-d finalize: VERDICT: ALL_PASS (success)")
    assert "| `silu_and_mul` | ALL_PASS |" in summary and "### Performance" in summary
    assert "| `silu_and_mul` | **all** | 2 | **0.980** | 0.490 |" in summary
    assert f"- Committed the generated files as `{head}`." in summary
    assert "summary" not in s.finalize.outputs()  # Markdown for the page, not a job output


def test_a_slow_port_gets_a_neutral_check_naming_the_slowest_config_as_inert_text(world):  # noqa: F811
    world.pr = world.open_kernel_pr()
    host = (
        "the wrapper launches copies or fills the cuTile reference does not: Memcpy DtoD take 3.0 of 13.0 us"
    )
    s = _run(world, _port_with(_summary(1.30, HOSTILE, host)))
    assert s.finalize.conclusion == "success"  # the correctness verdict is the perf stage's to keep
    [check] = _perf_checks(world, s.finalize.new_head)
    assert check.conclusion == "neutral"
    assert check.output.title.startswith("perf: INVESTIGATE: slowest silu_and_mul 64-")
    body = world.reviews(world.pr.number)[0].body
    assert "**INVESTIGATE** (MODERATE_GAP)" in body and "host cause: the wrapper launches copies" in body
    assert f"`` {HOSTILE} ``" in body  # a code span: no image, no mention, no link
    assert "<img" not in body.replace(f"`` {HOSTILE} ``", "")


def test_without_a_perf_result_there_is_no_perf_check_or_section(world):  # noqa: F811
    world.pr = world.open_kernel_pr()
    s = _run(world, fake_port)
    assert _perf_checks(world, s.finalize.new_head) == []
    assert "Performance (stage E)" not in world.reviews(world.pr.number)[0].body


def test_a_summary_that_breaks_its_schema_is_left_out_by_the_port_job_and_refused_by_finalize(world, caplog):  # noqa: F811
    world.pr = world.open_kernel_pr()
    bad = {**_summary(0.9), "verdict": "PASS"}
    with caplog.at_level(logging.WARNING):
        s = _run(world, _port_with(bad))
    assert "perf summary of silu_and_mul is left out" in caplog.text
    assert read_artifact(s.artifacts[0]).perf == {} and _perf_checks(world, s.finalize.new_head) == []
    # a perf entry forged into the artifact after the job: finalize refuses the artifact
    result = json.loads((s.artifacts[0] / "result.json").read_text())
    for forged in ({"silu_and_mul": {**_summary(0.9), "extra": 1}}, {"other_op": _summary(0.9)}):
        result["perf"] = forged
        (s.artifacts[0] / "result.json").write_text(json.dumps(result))
        with pytest.raises(ArtifactError):
            read_artifact(s.artifacts[0])


def test_a_blocked_kernel_s_check_title_says_why():
    from bot.github import render_perf

    blocked = {
        **_summary(0.9),
        "verdict": "BLOCKED",
        "severity": "MISSING_DATA",
        "reason": "no test_perf function in t.py",
    }
    conclusion, title, summary = render_perf.check_outcome({"silu_and_mul": blocked, "swiglu": _summary(0.9)})
    assert (conclusion, title) == ("neutral", "perf: BLOCKED: silu_and_mul: no test_perf function in t.py")
    assert render_perf.check_outcome({"x": {**_summary(0.9), "verdict": "NOT_RUN"}}) is None


def test_a_gap_the_evidence_gives_the_kernel_is_said_in_the_review_as_inert_text():
    from bot.github.render_perf import kernel_lines

    summary = _summary(3.0)
    summary["kernel_cause"] = "not the host's: ... the port's kernel <b>k</b> takes 88.3 us @maint"
    lines = kernel_lines("layer_norm_legacy", summary)
    [said] = [ln for ln in lines if "not the host's" in ln]
    assert "host cause" not in "".join(lines) and "<b>" not in said and "@maint" not in said
