"""The GPU image's install path, run where no docker daemon is (issue 13, deliverable 8).

The Dockerfile installs agent-d with ``scripts/setup.sh --gpu --no-editable`` into a venv. Here the
same script runs with ``--no-editable`` into a fresh venv, and the demo is ported with what it
installed. ``--gpu`` adds torch and the tile toolchain wheels (gigabytes: not in CI); the layout it
makes of those wheels (``scripts/tile_home.sh``) is checked on stand-in files.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _venv_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AGENT_D_READER", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.mark.slow
def test_setup_script_installs_into_a_fresh_venv_and_ports_the_demo(
    tmp_path, tilegym_wheel, cargo_target_dir
):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = _venv_env(venv)
    setup = subprocess.run(
        [str(ROOT / "scripts" / "setup.sh"), "--no-editable"], env=env, capture_output=True, text=True
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert f"[setup] ready: {venv / 'bin' / 'agent-d'}" in setup.stdout

    # a copy of the package, not this checkout, and the kernel reader beside the agent-d script
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import bot; print(bot.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(venv)), where.stdout
    assert os.access(venv / "bin" / "kernel-reader", os.X_OK)
    helped = subprocess.run(["agent-d", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert helped.returncode == 0 and "demo" in helped.stdout, helped.stdout + helped.stderr

    demo = subprocess.run(
        ["agent-d", "demo", "--workdir", str(tmp_path / "demo"), "--cargo-target-dir", str(cargo_target_dir)],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    log = demo.stdout + demo.stderr
    assert demo.returncode == 0, log  # the demo ran to a verdict
    assert re.search(r"\[agent-d\] build\s+ok .*cutile_silu_and_mul exported", demo.stderr), log
    assert re.search(r"\[agent-d\] abi smoke\s+ok ", demo.stderr), log
    assert "VERDICT: BLOCKED" in demo.stdout, log  # this machine has no GPU


def _stand_in_wheels(site: Path, without: str = "") -> None:
    files = {
        "nvidia/cu13/bin/tileiras": "#!/bin/sh\n",
        "nvidia/cu13/bin/ptxas": "#!/bin/sh\n",
        "nvidia/cu13/lib/libnvvm.so.4": "",
        "nvidia/cu13/lib/libnvJitLink.so.13": "",
        "nvidia/cu13/include/cuda.h": "",
        "nvidia/curand/include/curand.h": "",
    }
    for rel, text in files.items():
        if Path(rel).name == without:
            continue
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)


def test_tile_home_lays_the_wheels_out_as_a_cuda_home(tmp_path):
    site, home = tmp_path / "site", tmp_path / "cuda-tile"
    _stand_in_wheels(site)
    run = subprocess.run(
        [str(ROOT / "scripts" / "tile_home.sh"), str(site), str(home)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert (home / "bin" / "tileiras").resolve() == (site / "nvidia/cu13/bin/tileiras").resolve()
    assert (home / "bin" / "ptxas").resolve() == (site / "nvidia/cu13/bin/ptxas").resolve()
    # where tileiras looks for libnvvm in a toolkit, and the unversioned names a linker asks for
    for rel in ("nvvm/lib64/libnvvm.so", "nvvm/lib64/libnvvm.so.4", "lib/libnvvm.so"):
        assert (home / rel).resolve() == (site / "nvidia/cu13/lib/libnvvm.so.4").resolve(), rel
    assert (home / "lib/libnvJitLink.so").resolve() == (site / "nvidia/cu13/lib/libnvJitLink.so.13").resolve()
    assert (home / "include/curand.h").resolve() == (site / "nvidia/curand/include/curand.h").resolve()
    assert f"CUDA_HOME={home}" in run.stdout


def test_tile_home_names_a_missing_wheel_file(tmp_path):
    site = tmp_path / "site"
    _stand_in_wheels(site, without="ptxas")
    run = subprocess.run(
        [str(ROOT / "scripts" / "tile_home.sh"), str(site), str(tmp_path / "home")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert "ptxas not found" in run.stderr and "tile toolchain wheels" in run.stderr


def test_image_demo_says_when_there_is_no_docker_daemon(tmp_path):
    fake = tmp_path / "bin" / "docker"  # a docker client whose daemon is not running
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run([str(ROOT / "scripts" / "image_demo.sh")], env=env, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr == "[image] no docker daemon here: run this where `docker info` works\n"
