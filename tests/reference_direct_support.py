"""Helpers shared by the test_reference_direct_* modules (no tests here): the references they read
(tests/fixtures/reference/scaled_mask.py and a rotate op written here) and the kernel.rs signatures
they are read against."""

from __future__ import annotations

from pathlib import Path

from bot.infer.reference import direct as reference_direct
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param

REFERENCE = (Path(__file__).parent / "fixtures" / "reference" / "scaled_mask.py").read_text()


def scaled_mask_signature(axes: int = 1) -> KernelSignature:
    entry = Entry(
        name="scaled_mask_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(
            Generic("E", "type"),
            Generic("BLOCK_SIZE", "const", "i32"),
            Generic("KEEP", "const", "i32"),
        ),
        params=(
            Param("x", "tensor", "E", 1),
            Param("out", "tensor", "E", 1),
            Param("row_stats", "tensor", "f32", 1),
            Param("n", "scalar", ty="i32"),
            Param("p", "scalar", ty="f32"),
            Param("seed", "scalar", ty="i32"),
        ),
        outputs=("out", "row_stats"),
        output_evidence={},
        block=BlockUse(axes, False),
    )
    return KernelSignature("scaled_mask_module", (entry,))


def read_scaled_mask(source: str = REFERENCE, axes: int = 1):
    import ast

    return reference_direct.read_tree(ast.parse(source), "scaled_mask", scaled_mask_signature(axes))


ROTATE = """
import cuda.tile as ct
import torch
from tilegym.backend import register_impl


@ct.kernel
def _rotate_kernel(a, b, table, ROWS, TILE_A):
    pass


def _pick(a, grid):
    return cached_replace_hints(_rotate_kernel, occupancy=4)


def _forward(a, b, table, width=None):
    rows, cols = a.shape
    if width is None:
        width = cols
    if table.ndim == 2:
        table = table.unsqueeze(0)
        b = b.contiguous()
    grid = (rows, 1, 1)
    kernel = _pick(a, grid)
    ct.launch(torch.cuda.current_stream(), grid, kernel, (a, b, table, rows, next_power_of_2(width)))
    return a, b, table


@register_impl("rotate", backend="cutile")
def rotate(a, b, table, factor=1.0):
    width = None
    if factor < 1.0:
        full = a.shape[-1]
        width = int(full * factor)
        assert table.shape[-1] == width, "table width"
    a, b, table = _forward(a, b, table, width=width)
    return a, b
"""


def rotate_signature() -> KernelSignature:
    entry = Entry(
        name="rotate_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("ROWS", "const", "i32"), Generic("TILE_A", "const", "i32")),
        params=(Param("a", "tensor", "E", 2), Param("b", "tensor", "E", 2), Param("table", "tensor", "E", 3)),
        outputs=("a", "b"),
        output_evidence={},
        block=BlockUse(1, False),
    )
    return KernelSignature("rotate_module", (entry,))


def scale_rows_signature() -> KernelSignature:
    """kernel.rs of the scale_rows references below: a TILE and a boolean EVEN generic."""
    entry = Entry(
        name="scale_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32"), Generic("EVEN", "const", "i32")),
        params=(
            Param("x", "tensor", "E", 2),
            Param("out", "tensor", "E", 2),
            Param("scale", "scalar", ty="f32"),
        ),
        outputs=("out",),
        output_evidence={},
        block=BlockUse(1, False),
    )
    return KernelSignature("scale_rows_module", (entry,))
