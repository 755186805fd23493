"""A dry-run case ends at the test's first read of a launched tensor (bot/dryrun/case_end.py).

A small checkout of our own: a ``tilegym`` op that launches twice and reads its own output between
the launches, and a test that writes a marker before and after it reads the op's output. The
plugin runs it in the interpreter with torch and cuda.tile, as the dry run does."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from checkout_support import torch_python

from bot.dryrun.run import AGENT_D_ROOT

OP = """
import cuda.tile as ct
import torch


def first(x, out):
    pass


def second(out, n):
    pass


def op(x):
    out = torch.empty_like(x)
    ct.launch(torch.cuda.current_stream(), (1,), first, (x, out))
    n = int(out.numel())  # the op reads its own output: still inside the call
    ct.launch(torch.cuda.current_stream(), (2,), second, (out, n))
    return out
"""

TEST = """
import os
from pathlib import Path

import pytest
import torch

from tilegym.ops.cutile.fake_op import op


@pytest.mark.parametrize("backend", ["cutile", "cutile_rs"])
@pytest.mark.parametrize("size", [4, 8])
def test_op(size, backend):
    marks = Path(os.environ["MARKS"])
    x = torch.randn(size, device="cuda")
    out = op(x)
    marks.write_text(marks.read_text() + f"{backend}-{size} called\\n")
    if float((out - x).abs().max()) > 1e-3:  # the test's comparison: never reached
        marks.write_text(marks.read_text() + f"{backend}-{size} compared\\n")
        raise AssertionError("mismatch")
"""


@pytest.mark.slow
def test_the_case_ends_when_the_test_reads_a_launched_tensor(tmp_path):
    python = torch_python()
    ops = tmp_path / "src" / "tilegym" / "ops" / "cutile"
    ops.mkdir(parents=True)
    for pkg in (ops.parent.parent, ops.parent, ops):
        (pkg / "__init__.py").write_text("")
    (ops / "fake_op.py").write_text(OP)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_fake_op.py").write_text(TEST)
    marks, records = tmp_path / "marks.txt", tmp_path / "records.json"
    marks.write_text("")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), str(AGENT_D_ROOT)]),
        "MARKS": str(marks),
        "AGENT_D_DRYRUN_OUT": str(records),
        "AGENT_D_DRYRUN_CASES": "2",
    }
    proc = subprocess.run(
        [python, "-m", "pytest", "-p", "bot.dryrun.plugin", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr  # every case passed: it ended at the read
    assert sorted(marks.read_text().split("\n")[:-1]) == sorted(
        f"{backend}-{size} called" for backend in ("cutile", "cutile_rs") for size in (4, 8)
    )
    cases = json.loads(records.read_text())["cases"]
    assert len(cases) == 4
    for case in cases.values():
        # both launches recorded: the op's own read of its output between them did not end the case
        assert [launch["kernel"] for launch in case["launches"]] == ["first", "second"], case
        assert case["error"] == ""
