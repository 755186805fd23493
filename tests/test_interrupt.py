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


def _as_in_a_terminal() -> None:
    """Ctrl-C's default meaning in the child, as in a terminal's foreground job. A suite started in
    the background (`cmd &` from a script) inherits SIGINT ignored, and then so would agent-d, rightly:
    a background job is not the one Ctrl-C is for."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    marker = tmp_path / "child"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(marker)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_in_a_terminal,
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


def _processes_naming(text: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", text], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


@pytest.mark.slow
def test_ctrl_c_during_a_real_ports_cold_build_ends_cargo_and_rustc(tmp_path, tilegym_wheel):
    """`agent-d port` on the demo checkout with a cold target folder: Ctrl-C while cargo compiles
    the cutile crates. Exit 130, one line naming what was stopped and what is left in the checkout,
    no traceback, and 10 s later no cargo or rustc building into that folder."""
    from bot.demo import assemble_checkout

    repo = assemble_checkout(tmp_path / "tilegym", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    target = tmp_path / "cold-target"  # named in every rustc's arguments, and nowhere else
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "port",
            "--repo",
            str(repo),
            "--cargo-target-dir",
            str(target),
            "--no-sandbox",
        ],  # fmt: skip
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_in_a_terminal,
    )
    try:
        deadline = time.monotonic() + 240
        while not any("rustc" in p for p in _processes_naming(str(target))):  # the build is under way
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        time.sleep(2)  # a few crates in
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    [said] = [line for line in err.splitlines() if line.startswith("agent-d: interrupted")]
    assert said == err.strip().splitlines()[-1]  # the last word, and the only one about it
    assert said.startswith("agent-d: interrupted by SIGINT: stopped cargo build.")
    assert "silu_and_mul" in said or "`git status` shows them" in said
    time.sleep(10)
    assert _processes_naming(str(target)) == []
