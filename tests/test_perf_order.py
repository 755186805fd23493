"""The perf run's order (bot/perf/run.py ``by_config``): whole configs first, dtypes taking turns.

A perf run is bounded by its deadline. Run in pytest's collection order (all cuTile cases, then all
cutile-rs ones) a cut run had measured one backend and no ratio (rope's first H200 run: 7 cuTile
cases, no cutile-rs one). In config order every config the run reached has its three backends.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.perf import run

FILE = "tests/ops/test_op.py::Test_Op::test_perf"
IDS = [
    f"{FILE}[{backend}-{n}-torch.{dtype}]"
    for backend in ("cutile", "cutile_rs", "pytorch")
    for dtype in ("float16", "bfloat16")
    for n in (1024, 4096)
]


def test_each_config_has_its_three_backends_together_and_cutile_rs_first():
    ordered = run.by_config(IDS)
    assert sorted(ordered) == sorted(IDS)
    triples = [ordered[i : i + 3] for i in range(0, len(ordered), 3)]
    for triple in triples:
        assert [t.split("[")[1].split("-")[0] for t in triple] == ["cutile_rs", "cutile", "pytorch"]
        assert len({t.split("-", 1)[1] for t in triple}) == 1  # one config


def test_the_dtypes_take_turns():
    dtypes = [t.rsplit("torch.", 1)[1] for t in run.by_config(IDS)[::3]]
    assert dtypes == ["float16]", "bfloat16]", "float16]", "bfloat16]"]


def test_ids_without_a_backend_or_dtype_keep_their_place():
    ids = ["t.py::test_perf[a]", "t.py::test_perf[b]", "t.py::test_perf"]
    assert run.by_config(ids) == ids


def test_pytest_runs_the_ids_in_that_order(tmp_path: Path):
    (tmp_path / "test_op.py").write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('backend', ['cutile', 'cutile_rs', 'pytorch'])\n"
        "@pytest.mark.parametrize('n', [1, 2, 3])\n"
        "def test_perf(backend, n):\n"
        "    pass\n"
    )
    command = [sys.executable, "-m", "pytest", "test_op.py", "-k", "test_perf and (cutile or pytorch)", "-v"]
    command += ["-p", "no:cacheprovider", "--rootdir", str(tmp_path)]

    def pytest(*argv: str) -> list[str]:
        out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout
        return [ln.split(" ")[0] for ln in out.splitlines() if ln.startswith("test_op.py::")]

    ids = pytest(*[a for a in command if a != "-v"], "--collect-only", "-q")
    assert ids[0] == "test_op.py::test_perf[1-cutile]"  # pytest's own order: all cuTile first
    ordered = run.by_config(ids)
    argv = run.with_ids(command, ("test_op.py",), ordered)
    assert "-k" not in argv and "test_op.py" not in argv
    assert pytest(*argv) == ordered
    assert ordered[:4] == [
        "test_op.py::test_perf[1-cutile_rs]",
        "test_op.py::test_perf[1-cutile]",
        "test_op.py::test_perf[1-pytorch]",
        "test_op.py::test_perf[2-cutile_rs]",
    ]


def test_the_session_timeout_s_line_says_the_run_ended_early():
    """mla's H200 run: pytest-timeout ended the session, wrote the XML, and the cases after it were
    named "not reported by pytest" instead of not reached."""
    tail = (
        "- generated xml file: /tmp/out/mla/perf_records.xml -\n"
        "!!!!!!!!!!!!!!!!!!!!!! session-timeout: 91.0 sec exceeded !!!!!!!!!!!!!!!!!!!!!!\n"
        "============= 1 failed, 4 passed, 2 warnings in 113.74s (0:01:53) ==============\n"
    )
    assert run.ended_at_session_timeout(tail)
    assert not run.ended_at_session_timeout("session timeout: 91.0s\n== 5 passed in 3.0s ==\n")  # the header
