"""A reference that launches two kernels one after the other, the second through a helper of another
module (flash_decode's shape: a split kernel, then a reduction), written by us: the reader follows
the import, keeps the two launches in order, and numbers what the second shares with the first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.infer import naming
from bot.infer.launch.syntax import NotThisShape
from bot.infer.reference import direct as reference_direct
from bot.infer.reference.op import ModuleLoader
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param

SPLIT_NORM = """\
import math

import cuda.tile as ct
import torch

from tilegym.backend import register_impl
from tilegym.ops.cutile.combine import combine

from .utils import next_power_of_2


@ct.kernel
def _split_kernel(X, Part, scale: float, n: int, SPLITS: ct.Constant[int], TILE: ct.Constant[int]):
    pass


class _SplitNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, splits):
        n = x.shape[-1]
        if splits is None:
            SPLITS = 4
            TILE = next_power_of_2(math.ceil(n / SPLITS))
        else:
            SPLITS = splits
            TILE = next_power_of_2(n // splits)
        part = torch.empty((x.shape[0], SPLITS), device=x.device, dtype=torch.float32)
        out = torch.empty_like(x)
        grid = (x.shape[0], SPLITS, 1)
        ct.launch(torch.cuda.current_stream(), grid, _split_kernel, (x, part, scale, n, SPLITS, TILE))
        combine(part, out, n)
        return out.view(x.shape)


split_norm_apply = _SplitNorm.apply


@register_impl("split_norm", backend="cutile")
def split_norm(x, scale=None, splits=None, **kwargs):
    if scale is None:
        scale = 1.0 / math.sqrt(x.shape[-1])
    y = split_norm_apply(x, scale, splits)
    return y
"""

COMBINE = """\
import cuda.tile as ct
import torch


@ct.kernel
def _combine_kernel(Part, Out, N: ct.Constant[int], SPLITS: ct.Constant[int]):
    total = SPLITS * N


def combine(part, out, n):
    rows, SPLITS = part.shape
    grid = (rows,)
    ct.launch(torch.cuda.current_stream(), grid, _combine_kernel, (part, out, n, SPLITS))
"""

REL = Path("src/tilegym/ops/cutile/split_norm.py")


def _entry(name, generics, params, outputs, axes) -> Entry:
    return Entry(
        name=name,
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"),) + tuple(Generic(g, "const", "i32") for g in generics),
        params=params,
        outputs=outputs,
        output_evidence={},
        block=BlockUse(axes, False),
    )


def _signature() -> KernelSignature:
    split = _entry(
        "split_kernel",
        ("SPLITS", "TILE"),
        (
            Param("x", "tensor", "E", 2),
            Param("part", "tensor", "f32", 2),
            Param("scale", "scalar", ty="f32"),
            Param("n", "scalar", ty="i32"),
        ),
        ("part",),
        2,
    )
    combine = _entry(
        "combine_kernel",
        ("N", "SPLITS", "TOTAL"),
        (Param("part", "tensor", "f32", 2), Param("out", "tensor", "E", 2)),
        ("out",),
        1,
    )
    # kernel.rs declares them in the other order: the reference's launches give the sequence
    return KernelSignature("split_norm_module", (combine, split))


def _read(tmp_path: Path, split_norm: str = SPLIT_NORM):
    cutile = tmp_path / "src" / "tilegym" / "ops" / "cutile"
    cutile.mkdir(parents=True)
    (cutile / "split_norm.py").write_text(split_norm)
    (cutile / "combine.py").write_text(COMBINE)
    tree = ast.parse(split_norm)
    return reference_direct.read_tree(tree, "split_norm", _signature(), ModuleLoader(tmp_path), REL)


def test_two_launches_read_in_order_through_an_imported_helper(tmp_path):
    reading = _read(tmp_path)
    assert reading.sequence == ["split_kernel", "combine_kernel"]
    assert reading.launch_lines == ["30", "src/tilegym/ops/cutile/combine.py:13"]
    assert reading.tensors == {"x": "x", "part": "part", "out": "out"}
    assert reading.outputs == {"part": "part", "out": "out"}
    # what the reference returns after both launches, through the alias of the autograd Function
    assert reading.result == "out.view(x.shape)"


def test_names_a_later_launch_shares_are_numbered_on_both_sides(tmp_path):
    reading = _read(tmp_path)
    args = {k: v for k, (v, _) in reading.args.items()}
    # step 1: `n` is a runtime scalar, SPLITS a generic, a 2-D grid
    assert args["n"] == "n" and args["splits"] == "int(SPLITS)" and args["scale"] == "scale"
    assert (args["grid_x"], args["grid_y"]) == ("x.shape[0]", "SPLITS")
    # step 2: N and SPLITS clash with step 1's C arguments; the callee's own SPLITS was renamed,
    # its parameter `n`, handed the caller's `n`, is that variable
    assert args["n_2"] == "int(n)" and args["splits_2"] == "int(SPLITS_2)"
    # TOTAL is computed in the reference kernel's body (`total = SPLITS * N`)
    assert args["total"] == "int(SPLITS_2 * n)"
    assert args["num_programs"] == "rows"
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    assert ("rows, SPLITS_2", "part.shape") in lets and not any(name == "n_2" for name, _ in lets)
    # the planner numbers the same names by the same rule
    combine, split = _signature().entries
    assert naming.sequence_names([split, combine]) == [{}, {"n": "n_2", "splits": "splits_2"}]


def test_an_if_else_of_several_assignments_is_decided_once(tmp_path):
    reading = _read(tmp_path)
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    flag = next(name for name, expr in lets if expr == "splits is None")
    assert ("SPLITS", f"splits if not {flag} else SPLITS") in lets
    assert ("TILE", f"next_power_of_2(n // splits) if not {flag} else TILE") in lets
    assert ("TILE", f"next_power_of_2(cdiv(n, SPLITS)) if {flag} else None") in lets
    # math stays: the wrapper imports it
    assert ("scale", "1.0 / math.sqrt(x.shape[-1]) if scale is None else scale") in lets


def test_one_launch_for_two_entries_is_another_reader_s(tmp_path):
    once = SPLIT_NORM.replace("        combine(part, out, n)\n", "")
    assert _read(tmp_path, once) is None  # variants of one launch: the autotuned reader's


def test_launches_whose_kernels_have_no_entry_of_their_names_are_refused(tmp_path):
    global COMBINE
    saved = COMBINE
    COMBINE = COMBINE.replace("_combine_kernel", "_merge_kernel")
    try:
        # two launches without an entry of their name: nothing says which entry each runs
        with pytest.raises(NotThisShape, match="no entry named like _divide_kernel"):
            _read(tmp_path, SPLIT_NORM.replace("_split_kernel", "_divide_kernel"))
    finally:
        COMBINE = saved


def test_the_one_launch_left_without_an_entry_of_its_name_runs_the_one_entry_left(tmp_path):
    global COMBINE
    saved = COMBINE
    COMBINE = COMBINE.replace("_combine_kernel", "_merge_kernel")
    try:
        reading = _read(tmp_path)
    finally:
        COMBINE = saved
    assert reading.sequence == ["split_kernel", "combine_kernel"]
    assert reading.outputs == {"part": "part", "out": "out"}


def test_an_unknown_import_is_not_followed(tmp_path):
    moved = SPLIT_NORM.replace("tilegym.ops.cutile.combine", "tilegym.ops.cutile.elsewhere")
    # the second launch is out of reach: one launch for two entries is not this reader's shape
    assert _read(tmp_path, moved) is None


def test_an_allocation_between_the_launches_is_made_before_them(tmp_path):
    # the reduction's output allocated only after the first launch (attention_sink_decode's shape):
    # it reads no launch's data, so the wrapper allocates it up front like any other output
    late = SPLIT_NORM.replace("        out = torch.empty_like(x)\n", "").replace(
        "        combine(part, out, n)\n",
        "        out = torch.empty_like(x)\n        combine(part, out, n)\n",
    )
    reading = _read(tmp_path, late)
    assert reading.sequence == ["split_kernel", "combine_kernel"]
    assert {"let": "out", "expr": "torch.empty_like(x)"} in reading.steps
    assert reading.outputs == {"part": "part", "out": "out"}
    assert reading.result == "out.view(x.shape)"


def test_an_allocation_rebinding_a_name_after_a_launch_is_not_moved_before_it(tmp_path):
    # `part` is what the first launch wrote: allocating anew under its name before the launches
    # would hand the first kernel the second buffer
    rebound = SPLIT_NORM.replace(
        "        combine(part, out, n)\n",
        "        part = torch.zeros_like(part)\n        combine(part, out, n)\n",
    )
    reading = _read(tmp_path, rebound)
    assert not any(s.get("expr") == "torch.zeros_like(part)" for s in reading.steps)


def test_a_parameter_the_declaration_lacks_is_read_from_its_kwargs(tmp_path):
    # ops.py declares split_norm(x, scale=None, **kwargs): a caller's splits= reaches the
    # reference through **kwargs, so the wrapper reads it there, with the reference's default
    cutile = tmp_path / "src" / "tilegym" / "ops" / "cutile"
    cutile.mkdir(parents=True)
    (cutile / "split_norm.py").write_text(SPLIT_NORM)
    (cutile / "combine.py").write_text(COMBINE)
    declared = reference_direct._declared("x, scale=None, **kwargs")
    reading = reference_direct.read_tree(
        ast.parse(SPLIT_NORM), "split_norm", _signature(), ModuleLoader(tmp_path), REL, declared
    )
    assert reading.steps[0] == {"let": "splits", "expr": "kwargs.get('splits', None)"}
    # without **kwargs in the declaration nothing binds it: the reading stays the reference's
    closed = reference_direct._declared("x, scale=None")
    reading = reference_direct.read_tree(
        ast.parse(SPLIT_NORM), "split_norm", _signature(), ModuleLoader(tmp_path), REL, closed
    )
    assert not any(s.get("let") == "splits" for s in reading.steps)


# Two launches in one function (moe_align_block's shape): a buffer filled in place before the
# first, and a value the second reads assigned between the two.
COUNT_SCAN = """\
import cuda.tile as ct
import torch

from tilegym.backend import register_impl

from .utils import next_power_of_2


@ct.kernel
def _count_kernel(X, Cnt, N: ct.Constant[int]):
    pass


@ct.kernel
def _scan_kernel(Cnt, N: ct.Constant[int], N_POW2: ct.Constant[int]):
    pass


@register_impl("count_scan", backend="cutile")
def count_scan(x, n):
    cnt = torch.empty((n,), dtype=torch.int32, device=x.device)
    cnt.fill_(0)
    ct.launch(torch.cuda.current_stream(), (n,), _count_kernel, (x, cnt, n))
    n_pow2 = next_power_of_2(n)
    ct.launch(torch.cuda.current_stream(), (1,), _scan_kernel, (cnt, n, n_pow2))
    return cnt
"""


def _count_scan_signature() -> KernelSignature:
    count = _entry(
        "count_kernel", ("N",), (Param("x", "tensor", "E", 1), Param("cnt", "tensor", "i32", 1)), ("cnt",), 1
    )
    scan = _entry("scan_kernel", ("N", "N_POW2"), (Param("cnt", "tensor", "i32", 1),), ("cnt",), 1)
    return KernelSignature("count_scan_module", (count, scan))


def _read_count_scan(tmp_path: Path, source: str = COUNT_SCAN):
    rel = Path("src/tilegym/ops/cutile/count_scan.py")
    (tmp_path / rel.parent).mkdir(parents=True)
    (tmp_path / rel).write_text(source)
    return reference_direct.read_tree(
        ast.parse(source), "count_scan", _count_scan_signature(), ModuleLoader(tmp_path), rel
    )


def test_an_in_place_fill_is_a_step_that_rebinds_its_tensor(tmp_path):
    reading = _read_count_scan(tmp_path)
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    allocated = lets.index(("cnt", "torch.empty((n,), dtype=torch.int32, device=x.device)"))
    assert lets[allocated + 1] == ("cnt", "cnt.fill_(0)")  # Tensor.fill_ returns the tensor it filled


def test_host_arithmetic_between_two_launches_is_a_step_before_both(tmp_path):
    reading = _read_count_scan(tmp_path)
    assert reading.sequence == ["count_kernel", "scan_kernel"]
    assert {"let": "n_pow2", "expr": "next_power_of_2(n)"} in reading.steps
    args = {k: v for k, (v, _) in reading.args.items()}
    assert args["n_pow2"] == "int(n_pow2)" and args["num_programs_2"] == "1"


def test_a_value_between_two_launches_that_reads_a_tensor_stops_the_reading(tmp_path):
    # `cnt.sum()` may read what the first launch wrote: it cannot run before the C call
    tensor_read = COUNT_SCAN.replace("n_pow2 = next_power_of_2(n)", "n_pow2 = int(cnt.sum())")
    with pytest.raises(NotThisShape, match="n_pow2"):
        _read_count_scan(tmp_path, tensor_read)
