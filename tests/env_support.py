"""A machine arranged around a real interpreter: our own ``libcuda.so.1`` (a few C lines: the driver
version and the device count it reports) on LD_LIBRARY_PATH, a ``torch`` module of our making on
PYTHONPATH, and a tile toolchain laid out as one CUDA_HOME (empty files where tileiras looks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from validator_support import CC

from bot.testing import envcheck

FAKE_LIBCUDA = """
int cuDriverGetVersion(int *v) { *v = VERSION; return 0; }
int cuInit(unsigned int flags) { return 0; }
int cuDeviceGetCount(int *n) { *n = COUNT; return 0; }
"""
TORCH_WITH_CUDA = """
__version__ = "2.11.0+cu130"
class _Props:
    name, major, minor = "Fake H200", 9, 0
class cuda:
    is_available = staticmethod(lambda: AVAILABLE)
    get_device_properties = staticmethod(lambda i: _Props())
"""
TORCH_BROKEN = 'raise ImportError("libcudart.so.13: cannot open shared object file")\n'


def interpreter(tmp: Path, *, gpus: int | None = 1, driver: int = 13000, torch: str | None = "cuda") -> str:
    """A python that sees the given driver (None: no libcuda at all) and torch (None: none)."""
    tmp.mkdir(parents=True, exist_ok=True)
    libdir, pydir = tmp / "lib", tmp / "py"
    libdir.mkdir()
    pydir.mkdir()
    if gpus is not None:
        src = tmp / "libcuda.c"
        src.write_text(FAKE_LIBCUDA)
        subprocess.run(
            [CC, "-shared", "-fPIC", f"-DVERSION={driver}", f"-DCOUNT={gpus}", "-o", str(libdir / "libcuda.so.1"),
             str(src)],
            check=True,
        )  # fmt: skip
    if torch == "cuda" or torch == "cpu":
        (pydir / "torch.py").write_text(TORCH_WITH_CUDA.replace("AVAILABLE", str(torch == "cuda")))
    elif torch == "broken":
        (pydir / "torch.py").write_text(TORCH_BROKEN)
    else:  # no torch: hide any installed one behind a module that is not importable
        (pydir / "torch.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\")\n")
    wrapper = tmp / "python"
    # the caller's PYTHONPATH first: a wrapper around this one can still put a path before ours
    wrapper.write_text(
        f'#!/bin/sh\nLD_LIBRARY_PATH={libdir} PYTHONPATH=${{PYTHONPATH:+$PYTHONPATH:}}{pydir} exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def no_tileiras_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != envcheck.TILEIRAS_ENV}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not Path(p, "tileiras").exists()
    )
    return env


def with_tileiras(tmp: Path) -> dict[str, str]:
    """A tile toolchain laid out as one CUDA_HOME: tileiras, and the libnvvm it loads (empty files)."""
    home = tmp / "cuda"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "nvvm" / "lib64").mkdir(parents=True, exist_ok=True)
    (home / "nvvm" / "lib64" / "libnvvm.so.4").write_bytes(b"")
    tool = home / "bin" / "tileiras"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    return {**no_tileiras_env(), envcheck.TILEIRAS_ENV: str(tool), "CUDA_HOME": str(home)}
