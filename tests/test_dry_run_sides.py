"""The dry run's two sides, each recorded by its own pytest process side by side
(bot/dryrun/run.py): their parts merged, a side that wrote nothing named, and no process left
behind when they outlast the time given."""

from __future__ import annotations

import json
import os
import sys
import time

from bot.dryrun import run as dry

WRITER = """
import json, os, sys, time
side = os.environ["AGENT_D_DRYRUN_SIDE"]
with open(os.environ["AGENT_D_DRYRUN_PID_DIR"] + "/" + side, "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(float(os.environ.get("NAP", "0")))
if side in os.environ.get("WRITES", "cutile cutile-rs").split():
    with open(os.environ["AGENT_D_DRYRUN_OUT"], "w") as fh:
        json.dump({"cases": {f"t[{side}]": {"backend": side}}, "unavailable": [], "skipped_files": ["f: skip"]}, fh)
"""


def _sides(tmp_path, timeout: float = 60.0, **env):
    parts = {side: tmp_path / f"dry_run.{side}.json" for side in dry.SIDES}
    full = {**os.environ, "AGENT_D_DRYRUN_PID_DIR": str(tmp_path), **env}
    return parts, dry._record_sides([sys.executable, "-c", WRITER], full, tmp_path, parts, timeout)


def test_both_sides_run_at_once_and_their_parts_merge(tmp_path):
    start = time.monotonic()
    parts, done = _sides(tmp_path, NAP="1.5")
    assert time.monotonic() - start < 2.9  # side by side: not one nap after the other
    assert sorted(done) == sorted(dry.SIDES) and all(p.returncode == 0 for p in done.values())
    merged = dry._merged([json.loads(p.read_text()) for p in parts.values()])
    assert sorted(merged["cases"]) == ["t[cutile-rs]", "t[cutile]"]
    assert merged["skipped_files"] == ["f: skip"]  # said once


def test_a_side_that_outlasts_the_time_given_leaves_no_process_behind(tmp_path):
    parts, done = _sides(tmp_path, timeout=1.0, NAP="30")
    assert done == "the dry run outlasted 1 s"
    for side in dry.SIDES:
        pid = int((tmp_path / side).read_text())
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        assert not alive, side
    assert not any(p.exists() for p in parts.values())


def test_a_side_that_wrote_no_records_is_named(tmp_path):
    parts, done = _sides(tmp_path, WRITES="cutile")
    assert parts["cutile"].is_file() and not parts["cutile-rs"].is_file()
    assert done["cutile-rs"].returncode == 0  # record() then says: no records for cutile-rs
