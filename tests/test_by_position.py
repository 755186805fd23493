"""A directly launched reference's parameters placed on kernel.rs by position where names say
nothing, and only where both kernels take the same parameters of the same kinds in the same order
(``bot/infer/by_position.py``); a kernel.rs scalar no argument feeds, valued by the reference's own
local of its name. On a reference written by us."""

from __future__ import annotations

import ast

import pytest

from bot.infer import by_position
from bot.infer.launch.syntax import NotThisShape
from bot.infer.reference import direct as reference_direct
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param

REFERENCE = """
import cuda.tile as ct
import torch

from tilegym.backend import register_impl

ConstInt = ct.Constant[int]


def _body(A, B, s, TILE):
    t = ct.load(A, index=(ct.bid(0),), shape=(TILE,))
    ct.store(B, index=(ct.bid(0),), tile=t * s)


@ct.kernel
def _scale_kernel(X, OUT, scale: float, N: int, TILE: ConstInt, FAST: ct.Constant[bool]):
    _body(X, OUT, scale, TILE)


@register_impl("scale", backend="cutile")
def scale(x, factor=2.0, fast=False):
    out = torch.empty_like(x)
    rows = x.shape[0]
    n_elements = x.numel()
    TILE = 256
    grid = (ct.cdiv(n_elements, TILE), 1, 1)
    ct.launch(torch.cuda.current_stream(), grid, _scale_kernel, (x, out, factor, n_elements, TILE, fast))
    return out
"""

PLAIN = [
    Param("u0", "tensor", "E", 1),
    Param("u1", "tensor", "E", 1),
    Param("u2", "scalar", ty="f32"),
    Param("u3", "scalar", ty="i32"),
]


def _read(params=PLAIN, outputs=("u1",), generics=("G0", "G1"), source=REFERENCE):
    entry = Entry(
        name="scale_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), *(Generic(g, "const", "i32") for g in generics)),
        params=tuple(params),
        outputs=outputs,
        output_evidence={},
        block=BlockUse(1, False),
    )
    return reference_direct.read_tree(ast.parse(source), "scale", KernelSignature("scale_module", (entry,)))


def test_names_of_no_meaning_are_placed_by_position():
    reading = _read()
    assert reading.tensors == {"u0": "x", "u1": "out"} and reading.outputs == {"u1": "out"}
    values = {k: v for k, (v, _) in reading.args.items()}
    assert values["u2"] == "factor" and values["u3"] == "n_elements"
    assert values["g0"] == "int(TILE)" and values["g1"] == "int(bool(fast))"
    assert {"when": "g1 != 0 and g1 != 1", "rc": "INVALID_ARGS"} in reading.checks  # FAST is a bool
    assert values["num_programs"] == "cdiv(n_elements, TILE)"
    assert by_position.HOW in reading.args["u3"][1] and by_position.HOW in reading.args["g0"][1]
    assert reading.unmatched == []


def test_a_tensor_is_known_through_the_helper_it_is_handed_to():
    kernel = next(
        n
        for n in ast.walk(ast.parse(REFERENCE))
        if isinstance(n, ast.FunctionDef) and n.name == "_scale_kernel"
    )
    functions = {n.name: n for n in ast.parse(REFERENCE).body if isinstance(n, ast.FunctionDef)}
    assert by_position.reference_kinds(kernel) == {
        "X": "",  # alone, the kernel does not say: it hands X to _body
        "OUT": "",
        "scale": "float",
        "N": "int",
        "TILE": "int",
        "FAST": "int",
    }
    assert by_position.array_uses(kernel, functions) == {"X": "read", "OUT": "write"}


@pytest.mark.parametrize(
    "params, outputs, generics, why",
    [
        (PLAIN + [Param("u4", "scalar", ty="i32")], ("u1",), ("G0", "G1"), "one more kernel.rs parameter"),
        (PLAIN, ("u1",), ("G0",), "one generic fewer"),
        (
            [*PLAIN[:2], Param("u2", "scalar", ty="i32"), PLAIN[3]],
            ("u1",),
            ("G0", "G1"),
            "an int for the float",
        ),
        (PLAIN, ("u0",), ("G0", "G1"), "kernel.rs writes the first tensor, the reference the second"),
        (PLAIN, ("u0", "u1"), ("G0", "G1"), "kernel.rs writes both"),
    ],
)
def test_no_position_unless_both_kernels_take_the_same_parameters(params, outputs, generics, why):
    with pytest.raises(NotThisShape, match="have no twin"):
        _read(params, outputs, generics)


def test_a_runtime_scalar_among_the_constants_is_placed_before_kernel_rs_generics():
    # mla's `_prefill_mla_kernel(.., TILE_D, TILE_KPE, H: int, TILE_M, ..)`: kernel.rs can only
    # take the runtime H before its const generics
    source = REFERENCE.replace(
        "scale: float, N: int, TILE: ConstInt,", "scale: float, TILE: ConstInt, N: int,"
    ).replace("(x, out, factor, n_elements, TILE, fast)", "(x, out, factor, TILE, n_elements, fast)")
    values = {k: v for k, (v, _) in _read(source=source).args.items()}
    assert values["u3"] == "n_elements" and values["g0"] == "int(TILE)" and values["g1"] == "int(bool(fast))"


def test_a_runtime_scalar_of_the_reference_is_never_a_const_generic():
    # kinds alone would pair N: int with G0 (both integers): kernel.rs takes no runtime integer
    with pytest.raises(NotThisShape, match="have no twin"):
        _read(PLAIN[:3], ("u1",), ("G0", "G1", "G2"))


def test_constants_kernel_rs_may_split_either_way_place_nothing():
    # softmax's `_softmax_kernel(output, input, N_ROWS, TILE_SIZE, DIM_COLS)`, all constants, against
    # kernel.rs's runtime n_rows, dim_cols and generic TILE_SIZE: here N, TILE and FAST are all
    # integer constants and kernel.rs takes one runtime integer: any of the three may be it
    source = REFERENCE.replace("N: int,", "N: ConstInt,")
    with pytest.raises(NotThisShape, match="have no twin"):
        _read(source=source)
    # a float constant can only be the runtime f32: one split fits, and position places it
    source = source.replace("scale: float,", "scale: ct.Constant[float],")
    params = [*PLAIN[:2], Param("u2", "scalar", ty="f32")]
    values = {k: v for k, (v, _) in _read(params, source=source, generics=("G0", "G1", "G2")).args.items()}
    assert (
        values["u2"] == "factor" and values["g0"] == "int(n_elements)" and values["g2"] == "int(bool(fast))"
    )


def test_a_reference_parameter_of_unknown_kind_places_nothing():
    source = REFERENCE.replace("N: int,", "N,")  # neither annotated nor used as an array
    with pytest.raises(NotThisShape, match="have no twin"):
        _read(source=source)


def test_names_that_cross_positions_leave_the_rest_unmatched():
    # kernel.rs names its tensors as the reference does, in the other order; its generics say nothing
    params = [Param("out", "tensor", "E", 1), Param("x", "tensor", "E", 1), *PLAIN[2:]]
    reading = _read(params, ("out",))
    assert reading.tensors == {"out": "out", "x": "x"}  # by name
    assert reading.unmatched == ["scale", "N", "TILE", "FAST"]  # nothing by position


def test_a_kernel_rs_scalar_no_argument_feeds_is_the_reference_s_local_of_its_name():
    params = [
        Param("x", "tensor", "E", 1),
        Param("out", "tensor", "E", 1),
        Param("scale", "scalar", ty="f32"),
        Param("n", "scalar", ty="i32"),
        Param("rows", "scalar", ty="i32"),  # the reference computes rows and passes it nowhere
        Param("cols", "scalar", ty="i32"),  # nothing of that name in the reference
    ]
    reading = _read(params, ("out",), ("TILE", "FAST"))
    value, why = reading.args["rows"]
    assert value == "rows" and "the reference's own `rows`" in why
    assert "cols" not in reading.args


IN_PLACE = """
import cuda.tile as ct

from tilegym.backend import register_impl


@ct.kernel
def _norm_kernel(Y, N: ct.Constant[int]):
    total = N * N
    t = ct.load(Y, index=(ct.bid(0), 0), shape=(1, total))
    ct.store(Y, index=(ct.bid(0), 0), tile=t)


@register_impl("norm", backend="cutile")
def norm(y, n):
    rows = y.shape[0]
    ct.launch(None, (rows,), _norm_kernel, (y, n))
    return y
"""


@pytest.mark.parametrize("written", [True, False])
def test_the_one_tensor_each_kernel_takes_is_placed_alone(written):
    entry = Entry(
        name="norm_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("G0", "const", "i32"), Generic("G1", "const", "i32")),
        params=(Param("u0", "tensor", "E", 2),),
        outputs=("u0",) if written else (),
        output_evidence={},
        block=BlockUse(1, False),
    )
    signature = KernelSignature("norm_module", (entry,))
    if not written:  # kernel.rs reads what the reference writes: not the same tensor
        with pytest.raises(NotThisShape, match="have no twin"):
            reference_direct.read_tree(ast.parse(IN_PLACE), "norm", signature)
        return
    reading = reference_direct.read_tree(ast.parse(IN_PLACE), "norm", signature)
    assert reading.tensors == {"u0": "y"} and reading.outputs == {"u0": "y"}
    # one constant for two generics (TOTAL is N * N in the reference's body): neither is placed
    assert reading.unmatched == ["N"] and "g0" not in reading.args and "g1" not in reading.args
