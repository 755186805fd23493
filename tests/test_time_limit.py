"""agent-d's own planning and generation run under a time and a memory limit that end in a verdict
(issue 33, deliverable 3): an input that makes planning run on, or grow, is BLOCKED (host) with its
reports, not the job's 120-minute timeout or the runner's out-of-memory killer."""

from __future__ import annotations

import time

from bot import pipeline
from bot.demo import assemble_checkout
from bot.emit import stage_generate
from bot.pipeline import PortOptions
from bot.time_limit import ENV, MEMORY_ENV

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


def test_planning_that_grows_is_stopped_with_a_verdict_and_the_limit_is_lifted_after(
    tmp_path, tilegym_wheel, monkeypatch
):
    import resource

    demo = assemble_checkout(tmp_path / "tg", tilegym_wheel, [OP], [OP]).repo
    original = stage_generate.build_plan

    def greedy_plan(*args, **kwargs):
        hoard = bytearray(2 << 30)  # stands in for an input that makes planning grow without end
        return original(*args, **kwargs), hoard

    monkeypatch.setattr(stage_generate, "build_plan", greedy_plan)
    monkeypatch.setenv(MEMORY_ENV, "256")
    before = resource.getrlimit(resource.RLIMIT_AS)
    (result,) = pipeline.port(
        PortOptions(repo=demo, kernel=OP, out_root=tmp_path / "out", echo=lambda _: None)
    )
    verdict = result.verdict
    assert (verdict.kind.value, verdict.klass) == ("BLOCKED", "host"), verdict
    assert verdict.reason.startswith(
        f"reading, planning and generating {OP} needed more than 256 MB and was stopped ({MEMORY_ENV})"
    )
    assert result.stages[-1].status == "blocked" and result.changed_files == []
    assert (tmp_path / "out" / OP / "reports" / "correctness.md").is_file()
    assert resource.getrlimit(resource.RLIMIT_AS) == before  # the rest of the process is not limited
    bytearray(512 << 20)  # ... and can hold more than the limit again
