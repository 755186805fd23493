"""A launcher whose variants take different tensors (carried host code launching two kernels, each
in its own C call): the variant is chosen first, and only its own descriptors are read, in ffi.rs
and in the dry run alike. flash_decode's shape, cut down: a partial kernel writes `part`, a reduce
kernel reads it into `out`; one C argument `b` is the first entry's scalar and the second's generic.
"""

from __future__ import annotations

from bot.dryrun import port_side
from bot.emit import ffi_rs
from bot.plan import per_variant
from bot.plan.types import CScalar, CTensor, FfiPlan, LaunchPlan, PyPlan, TestWiring, Variant
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param
from bot.targets.types import Source

SRC = Source("test", "hand-built")


def _entry(name: str, params: tuple[Param, ...], generics: tuple[Generic, ...]) -> Entry:
    return Entry(
        name, False, True, {}, generics, params, (params[-1].name,), {}, BlockUse(1, False, "bid(0)")
    )


PARTIAL = _entry(
    "partial_kernel",
    (Param("x", "tensor", "E", 2), Param("b", "scalar", ty="i32"), Param("part", "tensor", "E", 2)),
    (Generic("E", "type"), Generic("TILE", "const", "i32")),
)
REDUCE = _entry(
    "reduce_kernel",
    (Param("part", "tensor", "E", 2), Param("lse", "tensor", "f32", 1), Param("out", "tensor", "E", 1)),
    (Generic("E", "type"), Generic("B", "const", "i32")),
)


def _ffi() -> FfiPlan:
    return FfiPlan(
        symbol="cutile_two",
        module="two_module",
        style="macros",
        tensors=[
            CTensor("x", "x_d", "x", "tensor", "E", "input", 2, SRC),
            CTensor("part_out", "part_out_d", "part", "tensor", "E", "output", 2, SRC),
            CTensor("part", "part_d", "part", "tensor", "E", "input", 2, SRC),
            CTensor("lse", "lse_d", "lse", "tensor", "f32", "input", 1, SRC),
            CTensor("out", "out_d", "out", "tensor", "E", "output", 1, SRC),
        ],
        dtype_from="x",
        dtype_generic="E",
        dtypes=["f32", "f16"],
        scalars=[
            CScalar("b", "i32", "runtime_scalar", "b", SRC),
            CScalar("tile", "i32", "generic", "TILE", SRC),
            CScalar("grid_x", "i32", "grid", "", SRC),
            CScalar("num_cta_in_cga", "i32", "compile_option", "", SRC),
            CScalar("occupancy", "i32", "compile_option", "", SRC),
            CScalar("entry", "i32", "selector", "", SRC),
        ],
        derived=[],
        checks=[
            {"when": "tile <= 0", "rc": "INVALID_ARGS"},
            {"when": "dim(lse,0) != b", "rc": "INVALID_ARGS"},
        ],
        variants=[
            Variant(
                "entry == 0",
                "partial_kernel",
                ["dtype", "tile"],
                ["ten(x)", "b", "ten(part_out)"],
                ["grid_x", "1", "1"],
                "partial_kernel",
                SRC,
            ),
            Variant(
                "entry == 1",
                "reduce_kernel",
                ["dtype", "b"],
                ["ten(part)", "ten(lse)", "ten(out)"],
                ["grid_x", "1", "1"],
                "reduce_kernel",
                SRC,
            ),
        ],
    )


def _plan() -> LaunchPlan:
    python = PyPlan("two", "direct", "", "", [], [], {}, "direct", [], "", {}, "", {}, {}, "", "")
    return LaunchPlan("two", _ffi(), python, TestWiring("", ""))


def _desc(dtype: str, shape: list[int]) -> dict:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return {"kind": "tensor", "dtype": dtype, "shape": shape, "strides": strides, "storage_offset": 0}


def _call(entry: int, **tensors) -> list:
    plan = _plan()
    args = {t.name: tensors.get(t.name) for t in plan.ffi.tensors}
    args.update(b=2, tile=16, grid_x=4, num_cta_in_cga=0, occupancy=0, entry=entry, device_id=0, raw_stream=0)
    return [args[name] for name, _ in plan.ffi.c_params()]


def test_each_variant_reads_its_own_tensors_and_the_scalars_it_needs():
    ffi = _ffi()
    assert per_variant.split(ffi)
    first, second = (per_variant.part(ffi, v) for v in ffi.variants)
    assert [t.name for t in first.tensors] == ["x", "part_out"]
    assert [t.name for t in second.tensors] == ["part", "lse", "out"]
    assert second.dtype_from == "part"  # x, the plan's dtype driver, is the other entry's
    assert [c["when"] for c in first.checks] == ["tile <= 0"]  # the lse check is the reduce's
    assert [c["when"] for c in second.checks] == ["tile <= 0", "dim(lse,0) != b"]
    assert {s.name for s in second.scalars} == {"b", "tile", "grid_x", "num_cta_in_cga", "occupancy"}
    assert "entry" not in {s.name for s in first.scalars}  # the dispatcher reads the selector


def test_alternatives_over_the_same_tensors_or_a_sequence_are_not_split():
    ffi = _ffi()
    ffi.variants[1].args = ["ten(x)", "ten(lse)", "ten(part_out)"]
    ffi.variants[0].args = ["ten(x)", "b", "ten(part_out)"]
    ffi.variants[0].grid = ["dim(lse,0)", "1", "1"]
    assert not per_variant.split(ffi)  # both read x, part_out and lse
    sequence = _ffi()
    sequence.sequence = True
    assert not per_variant.split(sequence)
    by_descriptor = _ffi()
    by_descriptor.variants[0].when = "dim(x,0) > 4"
    assert not per_variant.split(by_descriptor)  # chosen by a descriptor: all are read first


def test_the_dry_run_takes_a_call_that_leaves_the_other_entry_s_tensors_null():
    plan = _plan()
    signature = KernelSignature("two_module", (PARTIAL, REDUCE))
    reduce_call = _call(
        1, part=_desc("float16", [2, 16]), lse=_desc("float32", [2]), out=_desc("float16", [16])
    )
    (launch,) = port_side.port_launches(plan, signature, reduce_call)
    assert launch.entry == "reduce_kernel"
    assert launch.values["B"] == 2  # the C argument `b`, the reduce's generic
    refused = port_side.port_launches(plan, signature, _call(1, part=_desc("float16", [2, 16])))
    assert refused == "the launcher returns NULL_PTR (a null descriptor for lse, out)"
    partial_call = _call(0, x=_desc("float16", [4, 16]), part_out=_desc("float16", [4, 16]))
    (launch,) = port_side.port_launches(plan, signature, partial_call)
    assert (launch.entry, launch.values["b"], launch.values["TILE"]) == ("partial_kernel", 2, 16)


def test_ffi_rs_chooses_the_variant_and_borrows_only_its_descriptors():
    text = ffi_rs.render(_plan())
    exported = text[
        text.index('pub unsafe extern "C" fn cutile_two(') : text.index("unsafe fn agent_d_launch_")
    ]
    assert "deref_descs" not in exported  # nothing is read before the variant is chosen
    assert "if entry == 0 {" in exported and "} else if entry == 1 {" in exported
    assert (
        "agent_d_launch_partial_kernel(x, part_out, b, tile, grid_x, num_cta_in_cga, occupancy, device_id, raw_stream)"
        in exported
    )
    reduce = text[text.index("unsafe fn agent_d_launch_reduce_kernel(") :]
    reduce = reduce[: reduce.index("\n}\n")]
    assert "crate::deref_descs!(part, lse, out)" in reduce
    assert "crate::resolve_dtype!(part_d)" in reduce
    assert "x_d" not in reduce and "part_out" not in reduce
    assert ".generics(vec![dty.to_string(), b.to_string()])" in reduce


def test_a_value_is_compared_with_the_reference_s_argument_of_its_name_before_any_equal_value():
    """The reduce launch passing `B = 0`: the reference's `USE_DOT` is 0 too, but its `B` is 2."""
    from bot.dryrun import compare

    def learned(b: int) -> list:
        mine = port_side.PortLaunch("reduce_kernel", [4, 1, 1], {"B": b}, {"B": "generic"})
        theirs = {
            "params": ["part", "B", "USE_DOT"],
            "args": [
                {"kind": "scalar", "value": 0},
                {"kind": "scalar", "value": 2},
                {"kind": "scalar", "value": 0},
            ],
            "grid": [4, 1, 1],
        }
        return [(f"case[{k}]", [(mine, theirs)]) for k in range(2)]

    wrong = compare._scalar_rows(learned(0))
    assert [(r.reference, r.cutile_rs, r.same) for r in wrong] == [("B = 2", "0", False)] * 2
    right = compare._scalar_rows(learned(2))
    assert [(r.reference, r.same) for r in right] == [("B = 2", True)] * 2
