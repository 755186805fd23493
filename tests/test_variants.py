"""Kernels nobody here has seen, checked independently (issue 20): every kernel we have, rewritten
into signature variants (tests/variant_corpus.py: renamed, reordered, an extra derived scalar,
a tensor as a pointer and back), plans to the original's plan modulo names, or asks for exactly
the keys listed here, each with no source (docs/variants.md says why, row by row).

The kernels: tests/fixtures/tilegym_ops in a checkout of the tilegym 1.5.1 wheel, and the wheel's
five cutile-rs ops.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from checkout_support import checkout_with_kernels
from variant_corpus import original, plan_variant, variants_of

from bot.demo import assemble_checkout
from bot.read.reader import read_kernel

KERNELS = Path(__file__).parent / "fixtures" / "tilegym_ops"
FIXTURE_OPS = sorted(d.name[: -len("_kernel")] for d in KERNELS.iterdir() if (d / "kernel.rs").is_file())
WHEEL_OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]
DOC = Path(__file__).resolve().parent.parent / "docs" / "variants.md"

SAME = "same plan"
# renamed: the C arguments of the second entry's generics get names of their own (`b_2`), where the
# original's share the first entry's (`b`); the launch is the same (docs/variants.md)
WIDER = "differs: .ffi.scalars.b_2"
EXPECTED: dict[tuple[str, str], str | list[str]] = {
    ("attention", "renamed"): SAME,
    ("attention", "reordered"): SAME,
    ("attention", "extra_scalar"): SAME,
    ("attention", "tensor_as_ptr"): SAME,
    # P is a float constant (a runtime f32 in kernel.rs), but SEED, TILE_SIZE and TRAINING are all
    # integer constants: any one of them may be kernel.rs's runtime i32, so position says nothing
    ("dropout", "renamed"): ["python.alloc", "python.tensors", "python.args.zarg2", "python.args.zarg3"]
    + ["python.args.zgen0", "python.args.zgen1", "python.args.num_programs"],
    ("dropout", "reordered"): SAME,
    ("dropout", "extra_scalar"): SAME,
    ("dropout", "tensor_as_ptr"): SAME,
    ("flash_decode", "renamed"): WIDER,
    ("flash_decode", "reordered"): SAME,
    ("flash_decode", "extra_scalar"): SAME,
    ("flash_decode", "tensor_as_ptr"): SAME,
    # the reference passes N_ELEMENTS, which kernel.rs reads off the tensor: one parameter more,
    # so no position places BLOCK_SIZE (nor APPROXIMATE) once the names are gone
    # kernel.rs also takes n_elements (its pointer loads need the bound the reference's gathers
    # take from the arrays): one parameter more, so no position places the scalars
    ("geglu", "renamed"): ["python.out_cols", "python.args.zarg2", "python.args.zarg3", "python.args.zarg4"]
    + ["python.args.zarg5", "python.args.zgen0", "python.args.zgen1"],
    ("geglu", "reordered"): SAME,
    ("geglu", "ptr_as_tensor"): SAME,
    ("gelu", "renamed"): ["python.alloc", "python.tensors", "python.args.zgen0", "python.args.zgen1"]
    + ["python.args.num_programs"],
    ("gelu", "reordered"): SAME,
    ("gelu", "extra_scalar"): SAME,
    ("gelu", "tensor_as_ptr"): SAME,
    ("gemma_attention_decode", "renamed"): SAME,
    ("gemma_attention_decode", "reordered"): SAME,
    ("gemma_attention_decode", "extra_scalar"): SAME,
    ("gemma_attention_decode", "tensor_as_ptr"): SAME,
    ("gemma_attention", "renamed"): [
        "python.alloc",
        "python.tensors",
        "python.args.zarg4",
        "python.args.zarg5",
        "python.args.zgen0",
        "python.args.zgen1",
        "python.args.zgen2",
        "python.args.zgen3",
        "python.args.zgen4",
        "python.args.zgen5",
        "python.args.zgen6",
        "python.args.zgen7",
        "python.args.zgen8",
        "python.args.grid_x",
        "python.args.grid_y",
    ],
    ("gemma_attention", "reordered"): SAME,
    ("gemma_attention", "extra_scalar"): SAME,
    ("gemma_attention", "tensor_as_ptr"): SAME,
    ("layer_norm_legacy", "renamed"): SAME,
    ("layer_norm_legacy", "reordered"): SAME,
    ("layer_norm_legacy", "extra_scalar"): SAME,
    ("layer_norm_legacy", "tensor_as_ptr"): SAME,
    ("mla_decoding", "renamed"): SAME,
    ("mla_decoding", "reordered"): SAME,
    ("mla_decoding", "extra_scalar"): SAME,
    ("mla_decoding", "tensor_as_ptr"): SAME,
    ("mla_decoding_split_kv", "renamed"): WIDER,
    ("mla_decoding_split_kv", "reordered"): SAME,
    ("mla_decoding_split_kv", "tensor_as_ptr"): SAME,
    ("mhc_apply_residual", "renamed"): SAME,
    ("mhc_apply_residual", "reordered"): SAME,
    ("mhc_apply_residual", "extra_scalar"): SAME,
    ("mhc_apply_residual", "tensor_as_ptr"): SAME,
    # N and TOTAL = N * N: one constant of the reference against two generics, nothing pairs them;
    # a porter's wrapper contract would state all four keys
    ("mhc_sinkhorn", "renamed"): ["python.alloc", "python.args.zgen0", "python.args.zgen1"]
    + ["python.args.num_programs"],
    ("mhc_sinkhorn", "extra_scalar"): SAME,
    # moe: by position, like gemma_attention: its renamed scalars, generics and grid have no twin
    ("moe", "renamed"): ["python.alloc", "python.tensors"]
    + [f"python.args.zarg{i}" for i in range(7, 12)]
    + [f"python.args.zgen{i}" for i in range(6)]
    + ["python.args.num_programs"],
    ("moe", "reordered"): SAME,
    ("moe", "tensor_as_ptr"): SAME,
    ("moe", "ptr_as_tensor"): SAME,
    ("moe_align_block", "renamed"): [
        "ffi.variants",
        "python.alloc",
        "python.tensors",
        "python.args.zarg2",
        "python.args.zarg3",
        "python.args.zgen0",
        "python.args.zgen1",
        "python.args.zgen2",
        "python.args.num_programs",
    ],
    ("moe_align_block", "reordered"): SAME,
    ("moe_align_block", "tensor_as_ptr"): SAME,
    ("mla", "renamed"): SAME,
    ("mla", "reordered"): SAME,
    ("mla", "extra_scalar"): SAME,
    ("mla", "tensor_as_ptr"): SAME,
    ("relu", "renamed"): ["python.alloc", "python.tensors", "python.args.zgen0", "python.args.num_programs"],
    ("relu", "reordered"): SAME,
    ("relu", "extra_scalar"): SAME,
    ("relu", "tensor_as_ptr"): SAME,
    ("rms_norm", "renamed"): SAME,
    ("rms_norm", "reordered"): SAME,
    ("rms_norm", "extra_scalar"): SAME,
    ("rms_norm", "tensor_as_ptr"): SAME,
    ("rope", "renamed"): SAME,
    ("rope", "reordered"): SAME,
    ("rope", "extra_scalar"): SAME,
    ("rope", "tensor_as_ptr"): SAME,
    # N_ROWS, TILE_SIZE and DIM_COLS are all integer constants; kernel.rs makes two of them runtime
    # scalars and keeps one a generic: which one, position cannot say (as written it would pair
    # DIM_COLS with the generic, which is wrong)
    ("softmax", "renamed"): ["python.alloc", "python.tensors", "python.args.zarg2", "python.args.zarg3"]
    + ["python.args.zgen0", "python.args.num_programs"],
    ("softmax", "reordered"): SAME,
    ("softmax", "extra_scalar"): SAME,
    ("softmax", "tensor_as_ptr"): SAME,
    ("splitk_reduce", "renamed"): SAME,
    ("splitk_reduce", "reordered"): SAME,
    ("splitk_reduce", "tensor_as_ptr"): SAME,
    ("swa_attention", "renamed"): SAME,
    ("swa_attention", "reordered"): SAME,
    ("swa_attention", "extra_scalar"): SAME,
    ("swa_attention", "tensor_as_ptr"): SAME,
    ("silu_and_mul", "renamed"): [
        "python.args.zarg2",
        "python.args.zarg3",
        "python.args.zarg4",
        "python.args.zgen0",
    ],
    ("silu_and_mul", "reordered"): SAME,
    ("silu_and_mul", "extra_scalar"): ["python.args.batch_size"],
    ("silu_and_mul", "ptr_as_tensor"): SAME,
    ("swiglu", "renamed"): ["python.tensors"]
    + [f"python.args.zarg{i}" for i in (1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14)]
    + ["python.args.zgen0"],
    ("swiglu", "reordered"): SAME,
    ("swiglu", "extra_scalar"): SAME,
    ("swiglu", "ptr_as_tensor"): SAME,
    ("matmul", "renamed"): [
        "python.alloc",
        "python.tensors",
        "python.args.zarg3",
        "python.args.zarg4",
        "python.args.zarg5",
        "python.args.zgen0",
        "python.args.zgen1",
        "python.args.zgen2",
        "python.args.zgen3",
        "python.args.zgen4",
        "python.args.num_programs",
    ],
    ("matmul", "reordered"): SAME,
    ("matmul", "extra_scalar"): SAME,
    ("matmul", "tensor_as_ptr"): SAME,
    ("bmm", "renamed"): [
        "python.alloc",
        "python.tensors",
        "python.args.zarg3",
        "python.args.zarg4",
        "python.args.zarg5",
        "python.args.zarg6",
        "python.args.zgen0",
        "python.args.zgen1",
        "python.args.zgen2",
        "python.args.zgen3",
        "python.args.zgen4",
        "python.args.zgen5",
        "python.args.num_programs",
        "python.args.grid_x",
        "python.args.grid_y",
        "python.args.grid_z",
    ],
    ("bmm", "reordered"): SAME,
    ("bmm", "extra_scalar"): SAME,
    ("bmm", "tensor_as_ptr"): SAME,
    # group_gemm: autotuned like matmul, its renamed lists have no twin by name (As ~ a) either
    ("group_gemm", "renamed"): [
        "python.alloc",
        "python.tensors",
        "python.args.zgen0",
        "python.args.zgen1",
        "python.args.zgen2",
        "python.args.zgen3",
        "python.args.zgen4",
        "python.args.num_programs",
    ],
    ("group_gemm", "reordered"): SAME,
    # M is each list element's own (`M, K = A.shape` in the loop over the group): no one value to
    # carry; a porter's wrapper contract would state M and the rest of the launch
    ("group_gemm", "extra_scalar"): ["python.alloc", "python.tensors", "python.args.M"]
    + [f"python.args.{n}" for n in ("tile_m", "tile_n", "tile_k", "num_sm", "trans_b", "num_programs")],
    ("group_gemm", "tensor_as_ptr"): SAME,
    ("attention_sink", "renamed"): SAME,
    ("attention_sink", "reordered"): SAME,
    ("attention_sink", "extra_scalar"): SAME,
    ("attention_sink", "tensor_as_ptr"): SAME,
}


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory, tilegym_wheel) -> dict[str, Path]:
    """op -> the checkout that plans it."""
    root = tmp_path_factory.mktemp("variants")
    ours = checkout_with_kernels(root / "ours", tilegym_wheel, KERNELS, FIXTURE_OPS)
    wheel = assemble_checkout(root / "wheel", tilegym_wheel, WHEEL_OPS, WHEEL_OPS).repo
    return {**dict.fromkeys(FIXTURE_OPS, ours), **dict.fromkeys(WHEEL_OPS, wheel)}


def _result(outcome) -> str | list[str]:
    assert outcome.result in ("same plan", "asks", "differs"), (outcome.result, outcome.detail)
    if outcome.result == "differs":
        return "differs: " + outcome.detail[0].split(":")[0]
    return outcome.keys if outcome.result == "asks" else outcome.result


@pytest.mark.parametrize("op", FIXTURE_OPS + WHEEL_OPS)
def test_each_variant_plans_as_the_original_or_asks_exactly_these_keys(op, checkouts, tmp_path):
    repo = checkouts[op]
    orig = original(repo, op)
    assert orig.plan.missing == [], op
    variants = variants_of(repo, op, orig)
    assert sorted(v.kind for v in variants) == sorted(k for o, k in EXPECTED if o == op)
    for variant in variants:
        kernel = tmp_path / f"{variant.kind}.rs"
        kernel.write_text(variant.kernel_rs)
        read_kernel(kernel)  # syn parses every variant
        got = _result(plan_variant(repo, variant, orig))
        assert got == EXPECTED[(op, variant.kind)], (op, variant.kind, got)


def test_renamed_names_are_none_of_the_reference_s(checkouts):
    from variant_corpus import reference_names

    from bot.targets.discover import discover
    from bot.targets.types import Target

    for op in ("dropout", "matmul"):
        repo = checkouts[op]
        ref = reference_names(repo / discover(Target(repo, op)).reference.path)
        (variant,) = [v for v in variants_of(repo, op, original(repo, op)) if v.kind == "renamed"]
        assert variant.names and not {n.lower() for n in variant.names} & ref
        assert all(re.fullmatch(r"zarg\d+|ZGEN\d+|ZTY\d+", n) for n in variant.names)


def test_the_table_in_docs_is_the_corpus_result():
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and (cells[0], cells[1]) in {(o, k) for o, k in EXPECTED} | {
            (f"`{o}`", f"`{k}`") for o, k in EXPECTED
        }:
            op, kind = cells[0].strip("`"), cells[1].strip("`")
            result = cells[2]
            if result.startswith("differs"):
                rows[(op, kind)] = "differs: " + re.findall(r"`([\w.]+)`", result)[0]
            else:
                rows[(op, kind)] = result if result == SAME else re.findall(r"`([\w.]+)`", result)
    assert rows == EXPECTED
