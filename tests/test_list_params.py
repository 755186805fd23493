"""A reference kernel over lists of tensors, kernel.rs over one element: read, planned and
compared as one launch per element (bot/infer/list_params.py, python.per_element)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from checkout_support import checkout_with_kernels

from bot.dryrun import compare as dry_compare
from bot.dryrun import result as dry_result
from bot.infer import list_params
from bot.pipeline import make_plan
from bot.read.reader import read_kernel
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param
from bot.targets.types import Target

KERNELS = Path(__file__).parent / "fixtures" / "tilegym_ops"

# Written by us: the shape of an autotuned reference whose kernel takes lists (xs, ys, outs).
REFERENCE = """
import cuda.tile as ct
import torch
from types import SimpleNamespace
from cuda.tile.tune import exhaustive_search
from tilegym.backend import register_impl

_cache = {}


def _configs():
    yield SimpleNamespace(TILE=64, num_ctas=1, occupancy=1)
    yield SimpleNamespace(TILE=128, num_ctas=2, occupancy=1)


@ct.kernel
def _pairwise_kernel(Xs, Ys, Outs, TILE: ct.Constant[int], PROGRAMS: ct.Constant[int]):
    for g in range(len(Xs)):
        Xi = Xs[g]
        Yi = Ys[g]
        Oi = Outs[g]
        ct.store(Oi, (0,), tile=ct.load(Xi, (0,), shape=(TILE,)) + ct.load(Yi, (0,), shape=(TILE,)))


def _tuned(stream, xs, ys, outs):
    sms = torch.cuda.get_device_properties("cuda").multi_processor_count
    key = (tuple(tuple(x.shape) for x in xs), xs[0].dtype)
    if key not in _cache:
        exhaustive_search(
            list(_configs()),
            stream,
            lambda cfg: (sms // cfg.num_ctas,),
            _pairwise_kernel,
            lambda cfg: (xs, ys, outs, cfg.TILE, sms // cfg.num_ctas),
            lambda cfg: {"num_ctas": cfg.num_ctas, "occupancy": cfg.occupancy},
        )
    return outs


@register_impl("pairwise_add", backend="cutile")
def pairwise_add(xs, ys):
    if not xs:
        raise ValueError("xs must not be empty")
    outs = []
    for x, y in zip(xs, ys):
        (n,) = x.shape
        out = torch.empty((n,), device=x.device, dtype=x.dtype)
        outs.append(out)
    stream = torch.cuda.current_stream()
    _tuned(stream, xs, ys, outs)
    return outs
"""


def _signature(tensors: tuple[str, ...] = ("x", "y", "out")) -> KernelSignature:
    entry = Entry(
        name="pairwise_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32"), Generic("PROGRAMS", "const", "i32")),
        params=tuple(Param(t, "tensor", "E", 1) for t in tensors),
        outputs=(tensors[-1],),
        output_evidence={},
        block=BlockUse(1, True),
    )
    return KernelSignature("pairwise", (entry,))


def _kernel(source: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_a_list_parameter_is_one_the_kernel_indexes_by_a_loop_variable():
    kernel = _kernel(REFERENCE, "_pairwise_kernel")
    assert list_params.list_elements(kernel) == {"Xs": "Xi", "Ys": "Yi", "Outs": "Oi"}
    # indexed by a constant, or a name that is no loop variable: not walked as a list
    other = _kernel("def k(As, i):\n    a = As[0]\n    b = As[i]\n", "k")
    assert list_params.list_elements(other) == {}


def test_kernel_rs_takes_an_element_under_the_list_s_singular_or_the_element_s_name():
    assert list_params.element_twin("Xs", "Xi", ["x", "y", "out"]) == "x"
    assert list_params.element_twin("Outs", "Oi", ["x", "y", "out"]) == "out"
    assert list_params.element_twin("Xs", "Xi", ["xi", "y"]) == "xi"
    assert list_params.element_twin("Xs", "Xi", ["a", "b"]) is None  # no twin: nothing is guessed
    assert list_params.element_twin("Xs", "Xi", ["x", "xi"]) is None  # two: ambiguous, not chosen


def test_an_output_list_built_by_appending_allocations_is_one_comprehension():
    fn = _kernel(REFERENCE, "pairwise_add")
    loop = next(s for s in fn.body if isinstance(s, ast.For))
    name, comp = list_params.appended_list(loop, {"outs"})
    assert name == "outs"
    assert ast.unparse(comp) == (
        "[torch.empty((x.shape[0],), device=x.device, dtype=x.dtype) for x, y in zip(xs, ys)]"
    )
    assert list_params.appended_list(loop, set()) is None  # a list not bound to [] first
    odd = ast.parse("for x in xs:\n    print(x)\n    outs.append(torch.empty((1,)))\n").body[0]
    assert list_params.appended_list(odd, {"outs"}) is None  # a statement that is no assignment


@pytest.fixture(scope="module")
def group_gemm(tmp_path_factory, tilegym_wheel):
    """Our group_gemm kernel.rs planned against the wheel's cuTile group_gemm (lists of tensors)."""
    repo = checkout_with_kernels(tmp_path_factory.mktemp("gg") / "tg", tilegym_wheel, KERNELS, ["group_gemm"])
    target = Target(repo, "group_gemm")
    plan, _facts, _co = make_plan(target, repo / "out")
    return plan, read_kernel(target.kernel_rs)


def _group_records(plan, shapes: list[tuple[int, int, int]], calls: int | None = None) -> dict:
    """One case: the reference's one launch over lists, the wrapper's C call per group."""
    a = [_tensor([m, k], f"a{g}") for g, (m, _n, k) in enumerate(shapes)]
    b = [_tensor([k, n], f"b{g}") for g, (_m, n, k) in enumerate(shapes)]
    c = [_tensor([m, n], f"c{g}") for g, (m, n, _k) in enumerate(shapes)]
    reference = {
        "side": "cutile",
        "kernel": "_group_gemm_kernel",
        "params": ["As", "Bs", "Cs", "TILE_M", "TILE_N", "TILE_K", "NUM_SM", "TRANSPOSE_B"],
        "grid": [132],
        "args": [{"kind": "list", "items": items} for items in (a, b, c)]
        + [{"kind": "scalar", "value": v} for v in (128, 128, 128, 132, 0)],
    }
    scalars = {"tile_m": 128, "tile_n": 128, "tile_k": 128, "num_sm": 132, "trans_b": 0}
    scalars |= {"num_programs": 132, "num_cta_in_cga": 1, "occupancy": 1, "device_id": 0, "raw_stream": 0}
    c_calls = []
    for g in range(len(shapes) if calls is None else calls):
        values = {"c": c[g], "a": a[g], "b": b[g], **scalars}
        c_calls.append({"side": "cutile-rs", "args": [values[n] for n, _ in plan.ffi.c_params()]})
    case = f"case{shapes}"
    return {
        f"t::test_op[cutile-{shapes}]": {
            "backend": "cutile",
            "case": case,
            "launches": [reference],
            "error": "",
        },
        f"t::test_op[cutile_rs-{shapes}]": {
            "backend": "cutile-rs",
            "case": case,
            "launches": c_calls,
            "error": "",
        },
    }


def test_a_launch_over_lists_is_compared_with_the_wrapper_s_c_call_per_element(group_gemm):
    plan, signature = group_gemm
    cases = _group_records(plan, [(256, 128, 64), (128, 256, 128)])
    cases |= _group_records(plan, [(512, 512, 512), (64, 64, 64)])
    found = dry_compare.compare(plan, signature, cases)
    assert found.identical, [dry_result.describe_row(r) for r in found.differences]
    a_shapes = [r.reference for r in found.rows if "512" in r.case and (r.param, r.what) == ("a", "shape")]
    assert a_shapes == ["As[0]: [512, 512]", "As[1]: [64, 64]"]  # each C call with its group's element
    assert "Not compared: that the reference runs all elements in one grid" in found.notes[0]
    # the wrapper launches the first group only: a difference, with both counts
    short = dry_compare.compare(plan, signature, _group_records(plan, [(64, 64, 64), (32, 32, 32)], calls=1))
    assert [(r.param, r.what, r.reference, r.cutile_rs) for r in short.differences] == [
        ("launches", "count", "2", "1")
    ]


def _tensor(shape: list[int], digest: str) -> dict:
    strides = [shape[1], 1] if len(shape) == 2 else [1]
    return {
        "kind": "tensor",
        "shape": shape,
        "strides": strides,
        "dtype": "float16",
        "numel": 0,
        "digest": digest,
    }


def test_a_reference_launch_over_lists_is_read_as_one_launch_per_element():
    launch = {
        "side": "cutile",
        "kernel": "k",
        "params": ["As", "TILE"],
        "grid": [132],
        "args": [
            {"kind": "list", "items": [_tensor([4, 8], "a0"), _tensor([2, 8], "a1")]},
            {"kind": "scalar", "value": 64},
        ],
    }
    first, second = dry_compare.per_element_launches(launch)
    assert first["params"] == ["As[0]", "TILE"] and second["params"] == ["As[1]", "TILE"]
    assert second["args"][0]["digest"] == "a1" and second["args"][1] == {"kind": "scalar", "value": 64}
    assert second["grid"] == [132]
    uneven = {**launch, "params": ["As", "Bs"], "args": [launch["args"][0], {"kind": "list", "items": []}]}
    assert dry_compare.per_element_launches(uneven) == [uneven]  # not paired: compared as it is
