"""What kernel.rs names say is not overridden by the order it declares them in: a row kernel's
inputs pair with the wrapper's tensors by name (a single one left with a single one left), and the
GEMM letters read A and B by their names. Two inputs no name pairs are asked for, not zipped. A
raw pointer A (or B) beside a tensor still makes a GEMM pair: the letters read its dims."""

from __future__ import annotations

import pytest
from rust_edit import find_entry, join, rename, split_params, tokens, with_params, without_comments

from bot.infer import naming
from bot.pipeline import make_plan
from bot.plan.types import CTensor
from bot.read.types import BlockUse, Entry, Param
from bot.targets.types import Source, Target


@pytest.fixture()
def swiglu(tmp_path, tilegym_wheel) -> Target:
    from bot.demo import assemble_checkout

    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["swiglu"], ["swiglu"]).repo
    return Target(repo, "swiglu")


def _rewrite(target: Target, names: dict[str, str], reverse_inputs: bool) -> None:
    """swiglu's kernel with its parameters renamed, and ``b_ptr``'s five before ``a_ptr``'s."""
    toks = without_comments(tokens(target.kernel_rs.read_text()))
    where = find_entry(toks, "swiglu_forward_kernel")
    params = split_params(toks, where)
    if reverse_inputs:
        params = params[5:10] + params[0:5] + params[10:]
    toks = rename(with_params(toks, where, params), names)
    target.kernel_rs.write_text(join(toks))


def _plan(target: Target):
    return make_plan(target, target.repo / "out" / target.op)[0]


def test_row_inputs_pair_with_the_wrapper_tensors_by_name_whatever_their_order(swiglu, carrying_gives_way):
    assert _plan(swiglu).python.tensors_py == {"c": "c_rows", "a": "a_rows", "b": "b_rows"}
    _rewrite(swiglu, {}, reverse_inputs=True)
    plan = _plan(swiglu)
    assert [t.name for t in plan.ffi.tensors] == ["c", "b", "a"]  # kernel.rs's order
    assert plan.python.tensors_py == {"c": "c_rows", "b": "b_rows", "a": "a_rows"}  # by name
    assert plan.missing == []


def test_two_row_inputs_no_name_pairs_are_asked_for(swiglu):
    _rewrite(swiglu, {"a_ptr": "p_ptr", "b_ptr": "q_ptr"}, reverse_inputs=False)
    plan = _plan(swiglu)
    (asked,) = [m for m in plan.missing if m.key == "python.tensors"]
    assert "['p', 'q']" in asked.question and "['a', 'b']" in asked.question


def _gemm(inputs: list[str], pointers: tuple[str, ...] = ()):
    src = Source("kernel", "test")
    params = tuple(Param(n, "ptr", "E") if n in pointers else Param(n, "tensor", "E", 2) for n in inputs)
    entry = Entry("k", True, True, {}, (), params, (), {}, BlockUse(1, False))
    tensors = [
        CTensor(n, f"{n}_d", n, "ptr", "E", "input", None, src)
        if n in pointers
        else CTensor(n, f"{n}_d", n, "tensor", "E", "input", 2, src)
        for n in inputs
    ]
    found = {letter: naming.gemm_dim(letter, entry, tensors) for letter in ("m", "n", "k")}
    return {letter: f[0] if f else None for letter, f in found.items()}


def test_gemm_letters_read_a_and_b_by_name_in_any_order():
    assert _gemm(["a", "b"]) == _gemm(["b", "a"]) == {"m": "dim(a,0)", "n": "dim(b,1)", "k": "dim(a,1)"}
    # no input named a and b: TileGym's GEMM order, the first two
    assert _gemm(["w", "x"]) == {"m": "dim(w,0)", "n": "dim(x,1)", "k": "dim(w,1)"}


def test_a_raw_pointer_takes_the_rank_the_letters_read_beside_a_tensor():
    assert _gemm(["a", "b"], pointers=("a",)) == {"m": "dim(a,0)", "n": "dim(b,1)", "k": "dim(a,1)"}
    # two bare pointers: nothing says they are a GEMM pair of rank 2
    assert _gemm(["a", "b"], pointers=("a", "b")) == {"m": None, "n": None, "k": None}


@pytest.mark.parametrize("kind", ["ptr", "tensor"])
def test_the_ptr_suffix_names_the_c_tensor_for_a_pointer_and_a_tensor_alike(kind):
    """A porter who turns the reference's ``a_ptr`` into ``&Tensor`` may keep its name: the C tensor is
    ``a`` either way, so the plan does not change with the parameter's form."""
    name, bind, source = naming.c_tensor_name(Param("a_ptr", kind, "E", 1))
    assert (name, bind) == ("a", "a_d") and "a_ptr -> a" in source.detail
    assert naming.c_tensor_name(Param("in_ptr", kind, "E", 1))[0] == "inp"  # a keyword once stripped
    assert naming.c_tensor_name(Param("_ptr", kind, "E", 1))[0] == "_ptr"  # nothing left to name it
    assert naming.c_tensor_name(Param("a_ptrs", kind, "E", 1))[0] == "a_ptrs"
