"""The reader of directly launched cuTile references: the wrapper's steps around the launch, on
references written here: in-place outputs, guarded branches and nested raises, an import alias of torch,
the axis handling of a reduction along ``dim``, values computed after the launch, dropped parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_direct_support import (
    REFERENCE,
    ROTATE,
    rotate_signature,
    scaled_mask_signature,
)

from bot.infer.launch.syntax import NotThisShape
from bot.infer.reference import direct as reference_direct
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param


def test_in_place_outputs_a_tuned_kernel_helper_and_guarded_branches():
    import ast

    reading = reference_direct.read_tree(ast.parse(ROTATE), "rotate", rotate_signature())
    # the helper that tunes the kernel leaves no step: the launcher takes the kernel itself
    assert not any("_pick" in s.get("expr", "") for s in reading.steps)
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    # a branch of several assignments is decided once, before any of them
    assert ("_branch_20", "table.ndim == 2") in lets
    assert ("table", "table.unsqueeze(0) if _branch_20 else table") in lets
    assert ("b", "b.contiguous() if _branch_20 else b") in lets
    assert ("width", "cols if width is None else width") in lets  # `if width is None: width = cols`
    # a name the branch introduces is None otherwise; the assert holds under the branch
    assert ("full", "a.shape[-1] if _branch_32 else None") in lets
    assert {"check": "(_branch_32) and not (table.shape[-1] == width)", "raise": "ValueError",
            "message": "cutile-rs rotate: table width"} in reading.steps  # fmt: skip
    # the kernel writes the caller's a and b in place: outputs without an allocation, and tensors
    assert reading.outputs == {"a": "a", "b": "b"}
    assert reading.tensor_params == ["a", "b", "table"]
    assert reading.result == "(a, b)"
    assert (
        reading.args["rows"][0] == "int(rows)" and reading.args["tile_a"][0] == "int(next_power_of_2(width))"
    )


def test_a_value_computed_after_the_launch_stops_the_reading():
    import ast

    source = ROTATE.replace(
        "a, b, table = _forward(a, b, table, width=width)", "c, d, e = _forward(a, b, table, width=width)"
    )
    source = source.replace("return a, b\n", "return c, d\n")
    with pytest.raises(NotThisShape, match="is computed after the launch"):
        reference_direct.read_tree(ast.parse(source), "rotate", rotate_signature())


def test_facts_name_dropped_reference_parameters_and_offer_no_empty_result():
    import ast

    from bot.infer.facts import Facts
    from bot.infer.reference.op import ReferenceOp

    source = REFERENCE.replace("        ctx.p = p\n        return out\n", "        ctx.p = p\n")
    source = source.replace(
        "    return _ScaledMask.apply(x, seed, p, training, inplace)",
        "    _ScaledMask.apply(x, seed, p, training, inplace)",
    )
    source = source.replace(
        "def _scaled_mask_kernel(X, OUT,", "def _scaled_mask_kernel(X, OUT, EXTRA_FLAG,"
    ).replace("args = (x.view(-1), out.view(-1),", "args = (x.view(-1), out.view(-1), 1,")
    facts = Facts()
    ref = ReferenceOp(Path("ops/cutile/scaled_mask.py"), ast.parse(source), "", "scaled_mask")
    reference_direct.gather(None, scaled_mask_signature(), facts, ref)
    assert not facts.has("python.result")  # nothing returned: the plan's own default stays
    assert facts.source("python.steps").detail.endswith("not in kernel.rs: EXTRA_FLAG")


PADDED = """
import cuda.tile as ct
import torch
import torch.nn.functional as F
from tilegym.backend import register_impl


@ct.kernel
def _rotate_kernel(a, b, table, ROWS, TILE_A):
    pass


@register_impl("rotate", backend="cutile")
def rotate(a, b, table, width):
    rows, cols = a.shape
    if table.shape[0] != rows:
        if table.shape[0] > rows or rows % table.shape[0] != 0:
            raise ValueError(f"{rows} rows for a table of {table.shape[0]}")
        table = table.repeat_interleave(rows // table.shape[0], dim=0)
    if cols != width:
        a = F.pad(a, (0, width - cols))
    ct.launch(torch.cuda.current_stream(), (rows, 1, 1), _rotate_kernel, (a, b, table, rows, width))
    return a, b
"""


def test_a_raise_nested_in_a_guarded_block_is_a_check_under_both_conditions():
    import ast

    reading = reference_direct.read_tree(ast.parse(PADDED), "rotate", rotate_signature())
    flag = {"let": "_branch_16", "expr": "table.shape[0] != rows"}
    check = {
        "check": "_branch_16 and (table.shape[0] > rows or rows % table.shape[0] != 0)",
        "raise": "ValueError",
        "message": "{rows} rows for a table of {table.shape[0]}",
    }
    repeat = {
        "let": "table",
        "expr": "table.repeat_interleave(rows // table.shape[0], dim=0) if _branch_16 else table",
    }
    steps = reading.steps
    # the check runs where the reference raises: after the branch is decided, before what follows
    assert steps.index(flag) < steps.index(check) < steps.index(repeat)


def test_an_import_alias_of_torch_is_spelled_out_for_the_wrapper():
    import ast

    reading = reference_direct.read_tree(ast.parse(PADDED), "rotate", rotate_signature())
    assert {"let": "a", "expr": "torch.nn.functional.pad(a, (0, width - cols)) if cols != width else a"} in (
        reading.steps
    )
    # the same module through `from torch.nn import functional as F`
    other = PADDED.replace("import torch.nn.functional as F", "from torch.nn import functional as F")
    steps = reference_direct.read_tree(ast.parse(other), "rotate", rotate_signature()).steps
    assert any("torch.nn.functional.pad(a" in s.get("expr", "") for s in steps)


ALONG_DIM = """
import cuda.tile as ct
import torch

from tilegym.backend import register_impl


@ct.kernel
def _row_sum_kernel(X, Out, n: int, TILE: ct.Constant[int]):
    pass


@register_impl("sum_along", backend="cutile")
def sum_along(x, dim=-1, keepdim=False, **kwargs):
    moved = x.movedim(dim, -1).contiguous()
    rows = moved.numel() // moved.shape[-1]
    flat = moved.view(rows, moved.shape[-1])
    out = torch.empty((rows,), device=x.device, dtype=x.dtype)
    ct.launch(torch.cuda.current_stream(), (rows,), _row_sum_kernel, (flat, out, flat.shape[-1], 1024))
    result = out.view(moved.shape[:-1])
    if keepdim:
        result = result.unsqueeze(dim)
    return result
"""


def test_a_reduction_along_dim_keeps_the_axis_handling_around_the_launch():
    """`dim` is the reference's own: the wrapper moves that axis last before the launch and puts
    the result back after it, as the reference does (steps before, the returned value after)."""
    import ast

    entry = Entry(
        name="row_sum_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32")),
        params=(Param("x", "tensor", "E", 2), Param("out", "tensor", "E", 1), Param("n", "scalar", ty="i32")),
        outputs=("out",),
        output_evidence={},
        block=BlockUse(1, False),
    )
    reading = reference_direct.read_tree(ast.parse(ALONG_DIM), "sum_along", KernelSignature("m", (entry,)))
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    assert ("moved", "x.movedim(dim, -1).contiguous()") in lets
    assert reading.tensors == {"x": "flat", "out": "out"}
    assert reading.args["n"][0] == "flat.shape[-1]" and reading.args["num_programs"][0] == "rows"
    # after the launch: the reduced axis comes back where the caller asked for it
    assert (
        reading.result
        == "out.view(moved.shape[:-1]).unsqueeze(dim) if keepdim else out.view(moved.shape[:-1])"
    )
