"""agent-d's own planning and generation run under a time limit that ends in a verdict (issue 33,
deliverable 3): an input that makes planning run on is BLOCKED (host) with its reports, not the
job's 120-minute timeout."""

from __future__ import annotations

import time

from bot import pipeline
from bot.demo import assemble_checkout
from bot.emit import stage_generate
from bot.pipeline import PortOptions
from bot.time_limit import ENV

OP = "silu_and_mul"


def test_planning_that_runs_on_is_stopped_with_a_verdict(tmp_path, tilegym_wheel, monkeypatch):
    demo = assemble_checkout(tmp_path / "tg", tilegym_wheel, [OP], [OP]).repo
    original = stage_generate.build_plan

    def slow_plan(*args, **kwargs):
        time.sleep(30)  # stands in for an input that makes planning run on
        return original(*args, **kwargs)

    monkeypatch.setattr(stage_generate, "build_plan", slow_plan)
    monkeypatch.setenv(ENV, "1.5")
    started = time.monotonic()
    (result,) = pipeline.port(
        PortOptions(repo=demo, kernel=OP, out_root=tmp_path / "out", echo=lambda _: None)
    )
    assert time.monotonic() - started < 25
    verdict = result.verdict
    assert (verdict.kind.value, verdict.klass) == ("BLOCKED", "host"), verdict
    assert verdict.reason.startswith(
        f"reading, planning and generating {OP} took more than 1.5 s and was stopped"
    )
    assert result.stages[-1].status == "blocked" and result.changed_files == []
    assert (tmp_path / "out" / OP / "reports" / "correctness.md").is_file()
