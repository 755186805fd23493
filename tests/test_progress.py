"""Progress on long work: a heartbeat with the elapsed time at least every HEARTBEAT_S seconds
during a cargo build (naming the crate being compiled) and pytest, one line per finished test
file, all through the progress echo (stderr in the CLI; nothing with --quiet)."""

from __future__ import annotations

import re
import sys
import time

import pytest

from bot import progress
from bot.build import build
from bot.build.toolchain import Toolchain
from bot.errors import Blocked
from bot.targets.types import Target
from bot.testing import testrun

BEAT = 0.2  # seconds, instead of 15, so the test sees several beats


@pytest.fixture()
def fast_beat(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", BEAT)


def test_heartbeat_says_elapsed_time_while_silent_and_stops_after(fast_beat):
    lines: list[str] = []
    with progress.heartbeat(lines.append, "work", status=lambda: "step 3"):
        time.sleep(BEAT * 4.5)
    count = len(lines)
    assert 3 <= count <= 5, lines
    assert all(re.fullmatch(r"\[agent-d\] work: still running, \d+s elapsed, step 3", ln) for ln in lines)
    time.sleep(BEAT * 2)
    assert len(lines) == count  # nothing after the block


def test_heartbeat_is_quiet_while_the_work_reports_and_under_quiet(fast_beat):
    lines: list[str] = []
    with progress.heartbeat(lines.append, "work") as alive:
        for _ in range(8):
            time.sleep(BEAT / 4)
            alive()
    assert lines == []
    with progress.heartbeat(progress.silent, "work"):  # --quiet: no thread, no line
        time.sleep(BEAT * 2)


def test_cargo_build_beats_with_the_crate_being_compiled(tmp_path, fast_beat):
    cargo = tmp_path / "cargo"
    cargo.write_text(
        "#!/bin/sh\n"
        'echo "   Compiling cuda-bindings v0.2.0" >&2\n'
        f"sleep {BEAT * 3}\n"
        'echo "   Compiling cutile-compiler v0.2.0" >&2\n'
        f"sleep {BEAT * 4}\n"
        'echo "error: linker failed" >&2\n'
        "exit 101\n"
    )
    cargo.chmod(0o755)
    target = Target(tmp_path / "repo", "x")
    target.crate_dir.mkdir(parents=True)
    lines: list[str] = []
    start = time.monotonic()
    with pytest.raises(Blocked, match="linker failed"):
        build.build(target, Toolchain(str(cargo), tmp_path, None), tmp_path / "target", echo=lines.append)
    assert time.monotonic() - start >= BEAT * 7
    beats = [ln for ln in lines if ln.startswith("[agent-d] cargo build: still running, ")]
    assert len(beats) >= 5, lines
    assert "compiling cuda-bindings v0.2.0 (1 crates started)" in beats[0]
    assert beats[-1].endswith("compiling cutile-compiler v0.2.0 (2 crates started)")


def test_pytest_progress_one_line_per_test_file(tmp_path):
    (tmp_path / "test_a.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    (tmp_path / "test_b.py").write_text(
        "import pytest\n\ndef test_three():\n    pass\n\ndef test_four():\n    pytest.skip('why')\n"
    )
    argv = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_a.py", "test_b.py"]
    lines: list[str] = []
    outcome = testrun.run(Target(tmp_path, "x"), argv, tmp_path / "log.txt", {}, 60.0, None, lines.append)
    assert outcome.code == 0
    assert lines == [
        "[agent-d]   pytest: test_a.py: 2 passed",
        "[agent-d]   pytest: test_b.py: 1 passed, 1 skipped",
    ]
    assert "test_b.py::test_four SKIPPED" in (tmp_path / "log.txt").read_text()


def test_file_progress_reads_verbose_result_lines():
    lines: list[str] = []
    files = testrun.FileProgress(lines.append)
    for text in (
        "tests/ops/test_x.py::Test_X::test_op[4-float16-cutile_rs] PASSED [ 50%]",
        "tests/ops/test_x.py::Test_X::test_op[8-float16-cutile-rs] FAILED [100%]",
        "FAILED tests/ops/test_x.py::Test_X::test_op[8-float16-cutile-rs] - AssertionError",
        "tests/ops/test_y.py::test_op[a] ERROR [100%]",
    ):
        files.line(text)
    assert files.status() == "3 tests done, in tests/ops/test_y.py"
    files.flush()
    assert lines == [
        "[agent-d]   pytest: tests/ops/test_x.py: 1 passed, 1 failed",
        "[agent-d]   pytest: tests/ops/test_y.py: 1 error",
    ]
