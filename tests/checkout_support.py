"""A TileGym checkout assembled from the tilegym==1.5.1 wheel with our kernel folders committed in it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from bot.demo import assemble_checkout

OPS_DIR = "src/tilegym/ops/cutile_rs"


def checkout_with_kernels(dest: Path, wheel: Path, kernels: Path, ops: list[str]) -> Path:
    """The silu_and_mul demo checkout plus ``kernels/<op>_kernel`` for each op, in one commit."""
    repo = assemble_checkout(dest, wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    for op in ops:
        shutil.copytree(kernels / f"{op}_kernel", repo / OPS_DIR / f"{op}_kernel")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "kernels: " + ", ".join(ops)], cwd=repo, check=True)
    return repo
