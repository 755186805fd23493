"""A TileGym checkout assembled from the tilegym==1.5.1 wheel with our kernel folders committed in
it, and the interpreter with torch that runs its tests on a CPU."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.demo import assemble_checkout
from bot.wheel import default_cache_dir

OPS_DIR = "src/tilegym/ops/cutile_rs"


def checkout_with_kernels(dest: Path, wheel: Path, kernels: Path, ops: list[str]) -> Path:
    """The silu_and_mul demo checkout plus ``kernels/<op>_kernel`` for each op, in one commit."""
    repo = assemble_checkout(dest, wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    for op in ops:
        shutil.copytree(kernels / f"{op}_kernel", repo / OPS_DIR / f"{op}_kernel")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "kernels: " + ", ".join(ops)], cwd=repo, check=True)
    return repo


def torch_python() -> str:
    """The interpreter with torch and cuda.tile that scripts/setup.sh --test makes (the suite's own
    stays torch-free); CI fails without it, elsewhere the test skips saying why."""
    path = Path(
        os.environ.get("AGENT_D_DRYRUN_PYTHON") or default_cache_dir() / "dry-run-venv" / "bin" / "python"
    )
    if path.is_file():
        return str(path)
    why = f"no interpreter with torch and cuda.tile at {path} (scripts/setup.sh --test installs it)"
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)
