"""Why a machine cannot prove a kernel: each environment problem with its own reason and fix.

The probe (``testrun.probe``) gathers the facts from the interpreter that will run pytest and from
the CUDA driver; :func:`problems` turns them into ``EnvProblem`` values, most fundamental first:
the machine (no device, a driver too old for the toolchain, no tile compiler) before the
interpreter (not found, no pytest, no torch, a torch without CUDA). Every problem found is listed,
so a missing torch is named even on a machine that also has no GPU.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

# The crate is built against CUDA 13.0 headers (toolchain.HEADER_WHEELS); cuda-bindings refuses a
# driver whose CUDA major is lower ("CUDA driver too old: built against X but runtime is Y").
REQUIRED_CUDA = (13, 0)
TILEIRAS_ENV = "CUTILE_TILEIRAS_PATH"  # cutile-rs looks here first, then `tileiras` on PATH
TILE_WHEELS = "nvidia-cuda-tileiras nvidia-nvvm nvidia-cuda-nvcc nvidia-nvjitlink (13.3 or newer)"


@dataclass(frozen=True)
class EnvProblem:
    reason: str  # what is wrong, naming the interpreter or the device
    fix: str  # what to do about it


def cuda_version(encoded: int) -> str:
    """The driver's ``cuDriverGetVersion`` number as ``13.0`` (13000) or ``12.8`` (12080)."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def tileiras_path(env: dict[str, str] | None = None) -> str:
    """Where cutile-rs will find the tile compiler in ``env``, or ``""`` when it will not."""
    env = dict(os.environ if env is None else env)
    explicit = env.get(TILEIRAS_ENV, "")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else ""
    return shutil.which("tileiras", path=env.get("PATH")) or ""


# What tileiras loads from CUDA_HOME (docs gpu-recipe: without it, "failed to compile Tile IR program").
LIBNVVM_GLOBS = ("nvvm/lib64/libnvvm.so*", "lib/libnvvm.so*", "lib64/libnvvm.so*")


def tile_home_problem(tileiras: str, env: dict[str, str] | None = None) -> str:
    """Why ``tileiras`` will not compile with this environment's CUDA_HOME; ``""`` when it finds its libnvvm.

    Without CUDA_HOME, the folder above tileiras's ``bin/`` is where it looks (a full toolkit)."""
    if not tileiras:
        return ""
    env = dict(os.environ if env is None else env)
    home = env.get("CUDA_HOME", "")
    where = Path(home) if home else Path(tileiras).resolve().parent.parent
    if any(any(where.glob(pattern)) for pattern in LIBNVVM_GLOBS):
        return ""
    if home:
        return f"CUDA_HOME={home} holds no libnvvm"
    return f"CUDA_HOME is not set and {where}, the folder of {tileiras}, holds no libnvvm"


def problems(interp: Interpreter) -> list[EnvProblem]:
    """Every reason this interpreter on this machine cannot prove a kernel; empty when it can."""
    py = interp.python
    if interp.missing:
        return [
            EnvProblem(
                f"interpreter not found: {py}", "pass --python the path of the GPU environment's python"
            )
        ]
    if interp.error.startswith("cannot run"):
        return [EnvProblem(interp.error, f"check that {py} starts: run `{py} -c 'import sys'`")]
    found = (_gpu_problem(interp), _pytest_problem(interp), _torch_problem(interp))
    return [problem for problem in found if problem is not None]


def _gpu_problem(interp: Interpreter) -> EnvProblem | None:
    """The first thing missing between this machine and a compiled tile kernel: a GPU, a new
    enough driver, the tileiras compiler, and a complete toolchain folder around it."""
    if interp.gpus == 0:
        why = interp.driver or "the driver reports 0 devices"
        return EnvProblem(
            f"no CUDA GPU on this machine ({why})",
            "run on a machine with an NVIDIA GPU and its driver; check nvidia-smi and CUDA_VISIBLE_DEVICES",
        )
    if interp.driver_version and _too_old(interp.driver_version):
        need = ".".join(map(str, REQUIRED_CUDA))
        return EnvProblem(
            f"CUDA driver too old for the toolchain: it supports CUDA {cuda_version(interp.driver_version)}, "
            f"the kernels are built against CUDA {need}",
            f"install an NVIDIA driver that supports CUDA {need} or newer (the 580 series or later)",
        )
    if not interp.tileiras:
        return EnvProblem(
            f"the CUDA tile toolchain is missing: no tileiras in ${TILEIRAS_ENV} or on PATH",
            f"pip install {TILE_WHEELS} into one folder, set CUDA_HOME to it and put its bin/ on PATH "
            f"(or set {TILEIRAS_ENV})",
        )
    if interp.tile_home:
        return EnvProblem(
            f"the CUDA tile toolchain is incomplete: {interp.tile_home}, so tileiras cannot compile a kernel",
            "set CUDA_HOME to the folder of the tile toolchain (bin/tileiras, bin/ptxas, nvvm/lib64/libnvvm.so, "
            f"lib/libnvJitLink.so; the wheels {TILE_WHEELS})",
        )
    return None


def _pytest_problem(interp: Interpreter) -> EnvProblem | None:
    """pytest and the pytest-timeout plugin the run's --timeout=60 needs."""
    py = interp.python
    if not interp.pytest:
        return EnvProblem(f"pytest is not installed for {py}", f"{py} -m pip install pytest pytest-timeout")
    if not interp.timeout_plugin:
        return EnvProblem(
            f"pytest-timeout is not installed for {py} (the run needs --timeout=60)",
            f"{py} -m pip install pytest-timeout",
        )
    return None


def _torch_problem(interp: Interpreter) -> EnvProblem | None:
    """torch importable, and built with CUDA when the machine has a GPU."""
    py = interp.python
    if not interp.torch:
        detail = _torch_error(interp.error)
        return EnvProblem(
            f"torch is not importable by {py}" + (f" ({detail})" if detail else ""),
            f"install a CUDA build of torch for {py}, or pass --python the interpreter that has it",
        )
    if interp.gpus and not interp.cuda:
        return EnvProblem(
            f"torch {interp.torch} under {py} sees no CUDA device (a CPU-only build?)",
            f"install a CUDA build of torch for {py}",
        )
    return None


def _too_old(encoded: int) -> bool:
    return (encoded // 1000, encoded % 1000 // 10) < REQUIRED_CUDA


def _torch_error(error: str) -> str:
    for part in error.split("; "):
        if part.startswith("torch: "):
            return part.removeprefix("torch: ")
    return ""


@dataclass(frozen=True)
class Interpreter:
    python: str
    pytest: str | None
    timeout_plugin: bool
    torch: str | None
    cuda: bool
    device: str
    error: str
    gpus: int = 0
    driver: str = ""
    driver_version: int = 0  # cuDriverGetVersion: 13000 is CUDA 13.0; 0 when unknown
    tileiras: str = ""  # the tile compiler cutile-rs will use, "" when it will find none
    missing: bool = False  # the interpreter itself does not exist
    tile_home: str = ""  # why tileiras will not compile with this CUDA_HOME ("" when it will)
    # the backends TileGym's dispatcher registers per name, asked in the same process; None: not asked
    registered: dict[str, list[str]] | None = None

    def env_problems(self) -> list[EnvProblem]:
        return problems(self)

    def env_problem(self) -> str:
        """Why pytest here cannot prove the kernel on a GPU, every reason; empty when it can."""
        return "; ".join(p.reason for p in self.env_problems())

    def env_fix(self) -> str:
        """What the runner's owner must do, every fix on one line (the verdict's fix line)."""
        return "; ".join(p.fix for p in self.env_problems())
