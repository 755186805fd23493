"""Running TileGym's own ``test_perf`` on a CPU (tests/perf_cpu_plugin.py), for the perf stage's tests.

Needs a TileGym checkout with cutile-rs ports (``$AGENT_D_TILEGYM``: a work tree, never part of
this repository) and the launch dry run's interpreter with torch and cuda.tile
(``$AGENT_D_CACHE/dry-run-venv``, ``scripts/setup.sh --test``). Without them the tests that need
them skip and say why.

Run as a script, it remakes the committed fixtures of tests/fixtures/perf/ from such a checkout:
``python tests/perf_support.py /path/to/TileGym``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(TESTS))  # run as a script too (remaking the fixtures)

from checkout_support import torch_python  # noqa: E402

from bot.perf import run as perf_run  # noqa: E402
from bot.testing.testrun import read_test_file  # noqa: E402
from bot.wheel import default_cache_dir  # noqa: E402

FIXTURES = TESTS / "fixtures" / "perf"
OP_TESTS = ("tests/ops/test_silu_and_mul.py",)
ONLY = "-512-"  # silu_and_mul's smallest hidden size: the CPU's share of its configs


def tilegym_checkout() -> Path:
    path = Path(os.environ.get("AGENT_D_TILEGYM", ""))
    if not os.environ.get("AGENT_D_TILEGYM") or not (path / "tests" / "ops").is_dir():
        pytest.skip("set AGENT_D_TILEGYM to a TileGym checkout (work tree) with its tests and skill scripts")
    return path.resolve()


def venv_python() -> str:
    return torch_python()


def cpu_python(folder: Path, python: str, graphs: bool = True) -> str:
    """An interpreter that runs pytest with the CPU plugin loaded, CUPTI off and tiny time budgets
    (what the perf stage is given as ``--python``)."""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"export CUPTI=0 REP=1 WARMUP=1 AGENT_D_PERF_CPU_ONLY='{ONLY}' AGENT_D_PERF_CPU_GRAPHS={int(graphs)}\n"
        # no library is built on a CPU: with autobuild on, cargo on PATH makes cutile-rs available,
        # and the recorders stand in for its C calls
        "export CUTILE_RS_AUTOBUILD=1\n"
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{ROOT}:{TESTS}"\n'
        'export PYTEST_ADDOPTS="-p perf_cpu_plugin"\n'
        f'exec {python} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def copy_tests(tilegym: Path, dest: Path) -> Path:
    """The checkout's src, tests, skills (their validators) and pytest config in ``dest``, so a test
    may edit its copy; nothing is written back."""
    for name in ("src", "tests", "skills", ".agents"):
        if (tilegym / name).is_dir():
            shutil.copytree(
                tilegym / name, dest / name, symlinks=True, ignore=shutil.ignore_patterns("target")
            )
    for name in ("pytest.ini", "pyproject.toml"):
        if (tilegym / name).is_file():
            shutil.copy(tilegym / name, dest / name)
    return dest


def record_run(repo: Path, python: str, out: Path) -> tuple[str, str]:
    """The perf stage's own pytest command (bot/perf/run.py) on the op's test_perf; (log, XML)."""
    paths = tuple(p for p in OP_TESTS if (repo / p).is_file())
    names = tuple(n for p in paths for n in read_test_file(repo / p).all_tests)
    selection = perf_run.select(repo, paths, names)
    assert selection is not None
    xml = out / perf_run.JUNIT_NAME
    argv = perf_run.argv(python, paths, selection, str(xml)) + ["--timeout=300"]
    env = {**os.environ, **perf_run.ENV, "PYTHONPATH": str(repo / "src")}
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    return proc.stdout + proc.stderr, xml.read_text(encoding="utf-8") if xml.is_file() else ""


def main(tilegym: Path) -> None:
    import tempfile

    python = os.environ.get("AGENT_D_DRYRUN_PYTHON") or str(
        default_cache_dir() / "dry-run-venv" / "bin" / "python"
    )
    with tempfile.TemporaryDirectory(prefix="agent-d-perf-fixture-") as tmp:
        repo = copy_tests(tilegym, Path(tmp) / "tilegym")
        for graphs, name in ((True, "silu_and_mul_cpu"), (False, "silu_and_mul_cpu_no_graphs")):
            out = Path(tmp) / name
            out.mkdir()
            log, xml = record_run(repo, cpu_python(Path(tmp) / f"py-{name}", python, graphs), out)
            (FIXTURES / name).mkdir(parents=True, exist_ok=True)
            (FIXTURES / name / "perf_cutile_rs.full.txt").write_text(
                log.replace(tmp, "/tmp/x"), encoding="utf-8"
            )
            (FIXTURES / name / perf_run.JUNIT_NAME).write_text(xml, encoding="utf-8")
            print(f"{name}: {log.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
