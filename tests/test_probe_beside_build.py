"""The interpreter probe (seconds: it imports torch) runs beside the build, not after it: it needs
the applied wrapper, not the library, and the tests stage takes its answer afterwards."""

from __future__ import annotations

import sys
import threading

import pytest

from bot import pipeline
from bot.demo import assemble_checkout
from bot.job import PortOptions
from bot.testing import testrun

pytestmark = pytest.mark.slow


def test_the_probe_starts_while_the_build_runs_and_is_asked_once(
    tmp_path, tilegym_wheel, cargo_target_dir, monkeypatch
):
    started, calls, seen_in_build = threading.Event(), [], []
    real_probe, real_build = testrun.probe, pipeline._build

    def probe(*args, **kwargs):
        calls.append(threading.current_thread().name)
        started.set()
        return real_probe(*args, **kwargs)

    def build(jobs, options, left_out):
        seen_in_build.append(started.wait(60))  # the probe began before the build ended
        return real_build(jobs, options, left_out)

    monkeypatch.setattr(testrun, "probe", probe)
    monkeypatch.setattr(pipeline, "_build", build)
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    options = PortOptions(
        repo=repo,
        kernel="silu_and_mul",
        out_root=tmp_path / "out",
        python=sys.executable,
        cargo_target_dir=cargo_target_dir,
        echo=lambda _: None,
    )
    (result,) = pipeline.port(options)
    assert seen_in_build == [True]
    assert calls == ["agent-d interpreter probe"]  # the tests stage took the same answer
    assert [s.name for s in result.stages if s.name == "interpreter"] == ["interpreter"]
