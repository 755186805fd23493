"""Ctrl-C and SIGTERM (issue 34, item 2): agent-d ends the process groups it started (cargo,
pytest and the validator script run in sessions of their own, which a signal to agent-d does not
reach), prints one line saying what it stopped and what is left, no traceback, and exits 128 + the
signal's number. A process started after the signal is ended at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# agent-d's CLI with a command that starts a child in a session of its own, as the build does,
# and waits for it; the child writes `late` if it outlives its 20 s
DRIVER = textwrap.dedent("""
    import subprocess, sys
    from pathlib import Path
    from bot import children, cli

    marker = Path(sys.argv[1])

    def fake_run(_argv):
        proc = subprocess.Popen(
            ["sh", "-c", f"touch {marker}.started; sleep 20; touch {marker}.late"],
            start_new_session=True,
        )
        with children.started(proc, "cargo build"):
            proc.wait()
        return 0

    cli._run = fake_run
    sys.exit(cli.main([]))
""")


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    marker = tmp_path / "child"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(marker)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not Path(f"{marker}.started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return proc, marker


def _child_group_alive(marker: Path) -> bool:
    found = subprocess.run(["pgrep", "-f", f"touch {marker}.late"], capture_output=True, text=True)
    return bool(found.stdout.strip())


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_ends_the_children_and_says_so_in_one_line(tmp_path, signum, name):
    proc, marker = _start(tmp_path)
    assert _child_group_alive(marker)
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"agent-d: interrupted by {name}: stopped cargo build.")
    assert "`git status` shows them" in lines[0]
    assert not _child_group_alive(marker)  # the sleeping child of the session is gone too
    time.sleep(0.5)
    assert not Path(f"{marker}.late").exists()


def test_a_process_started_after_the_signal_is_ended_at_once():
    from bot import children

    first = subprocess.Popen(["sleep", "20"], start_new_session=True)
    with children.started(first, "pytest"):
        assert children.running() == ["pytest"]
        assert children.stop_all() == ["pytest"]
    assert first.wait(timeout=10) != 0
    late = subprocess.Popen(["sleep", "20"], start_new_session=True)
    try:
        with (
            pytest.raises(children.Stopping, match="was not run: agent-d is stopping"),
            children.started(late, "the validator script"),
        ):
            pass
        assert late.wait(timeout=10) == -signal.SIGKILL
    finally:
        children._stopping.clear()  # this process goes on testing
