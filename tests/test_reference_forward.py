"""Directly launched cuTile references carried into the wrapper: references and kernels written by
us (tests/fixtures/reference/forward), one per pattern (a local passed by name, an if/elif/else on the
op's argument, products over a shape, flattening views, two outputs, parameters named unlike the
declaration), each in a checkout assembled from the tilegym==1.5.1 wheel with the op's reference,
public declaration and kernel.rs.

Each plan has no missing fact, and the wrapper agent-d generates binds every name it reads: ``ruff
check --select F`` finds nothing in it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.emit import generate
from bot.pipeline import make_plan
from bot.plan.types import LaunchPlan
from bot.targets.types import Target

FORWARD = Path(__file__).parent / "fixtures" / "reference" / "forward"
OPS = sorted(p.stem for p in FORWARD.glob("*.py"))

# The public declarations of our ops, annotated as TileGym's ops.py annotates its own.
DECLARATIONS = '''"""Public declarations of agent-d's test ops (written by us, not TileGym's)."""

import torch

from tilegym.backend import dispatch


@dispatch("scaled_copy")
def scaled_copy(src: torch.Tensor, factor: float = 1.0) -> torch.Tensor:
    raise NotImplementedError


@dispatch("line_sum")
def line_sum(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    raise NotImplementedError


@dispatch("group_scale")
def group_scale(x: torch.Tensor, scale: torch.Tensor, dim: int = -1) -> torch.Tensor:
    raise NotImplementedError


@dispatch("shift_add")
def shift_add(x: torch.Tensor, y: torch.Tensor, shift: float = 0.0) -> torch.Tensor:
    raise NotImplementedError


@dispatch("rms_rows")
def rms_rows(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    raise NotImplementedError


@dispatch("soft_sign")
def soft_sign(x: torch.Tensor, **kwargs) -> torch.Tensor:
    raise NotImplementedError
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory, tilegym_wheel) -> Path:
    checkout = assemble_checkout(
        tmp_path_factory.mktemp("forward") / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]
    ).repo
    (checkout / "src/tilegym/ops/forward_ops.py").write_text(DECLARATIONS)
    for op in OPS:
        shutil.copy(FORWARD / f"{op}.py", checkout / "src/tilegym/ops/cutile" / f"{op}.py")
        kernel_dir = checkout / "src/tilegym/ops/cutile_rs" / f"{op}_kernel"
        kernel_dir.mkdir()
        shutil.copy(FORWARD / f"{op}.rs", kernel_dir / "kernel.rs")
    return checkout


def _port(repo: Path, op: str) -> tuple[LaunchPlan, str]:
    """The op's plan, with no missing fact, and its generated wrapper, F-clean."""
    target = Target(repo, op)
    plan, _facts, co = make_plan(target, repo / "out" / op)
    assert [m.key for m in plan.missing] == [], [f"{m.key}: {m.question}" for m in plan.missing]
    files = apply.formatted(generate.generate(target, plan, co), repo)
    wrapper = next(f.content for f in files.files if f.path.endswith(f"ops/cutile_rs/{op}.py"))
    assert _pyflakes(wrapper) == "", wrapper
    return plan, wrapper


def _pyflakes(text: str) -> str:
    """What ``ruff check --select F`` says of a wrapper ("" when nothing)."""
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    proc = subprocess.run(
        [*cmd, "check", "--select", "F", "--isolated", "--no-cache", "--output-format", "concise",
         "--stdin-filename", "wrapper.py", "-"],
        input=text, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return "" if proc.returncode == 0 else proc.stdout


@pytest.mark.parametrize("op", OPS)
def test_each_forward_is_carried_over_as_a_port_writes_it(repo, op):
    plan, wrapper = _port(repo, op)
    assert plan.carry is not None, op
    assert "cuda.tile" not in wrapper and "tilegym.ops.cutile." not in wrapper
