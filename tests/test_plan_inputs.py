"""The planner's view of the facts (bot/plan/inputs.py): read once, typed, read-only, every value
with the source it came from."""

from __future__ import annotations

import dataclasses

import pytest

from bot.infer.facts import Facts
from bot.plan.inputs import Given, config_groups, ffi_inputs, python_inputs
from bot.targets.types import Source

CONTRACT = Source("contract", "host_contract.yaml: ffi.dtype_from")
REFERENCE = Source("reference", "ops/cutile/op.py:12")


def test_each_value_keeps_its_source():
    facts = Facts()
    facts.offer("ffi.dtype_from", "x", CONTRACT)
    facts.offer("ffi.scalars.n", "dim(x,1)", CONTRACT)
    facts.offer("python.args.n_cols", 128, REFERENCE)  # an integer is read with str()
    ffi, py = ffi_inputs(facts), python_inputs(facts)
    assert ffi.dtype_from == Given("x", CONTRACT)
    assert ffi.scalars == {"n": Given("dim(x,1)", CONTRACT)}
    assert py.args == {"n_cols": Given("128", REFERENCE)}


def test_a_value_of_the_wrong_type_is_not_given():
    facts = Facts()
    facts.offer("ffi.dtype_from", 3, CONTRACT)
    facts.offer("ffi.grid.k", ["a", "b"], CONTRACT)  # two terms, not three
    facts.offer("python.alloc", ["out"], CONTRACT)
    facts.offer("python.signature", None, REFERENCE)
    ffi, py = ffi_inputs(facts), python_inputs(facts)
    assert ffi.dtype_from is None and ffi.grids == {}
    assert py.alloc is None and py.signature is None


def test_the_view_is_read_only_and_built_once():
    facts = Facts()
    facts.offer("python.tensors", {"out": "y"}, CONTRACT)
    facts.note_tried("python.out_cols", "ops/cutile/op.py: no allocation")
    py = python_inputs(facts)
    with pytest.raises(TypeError):
        py.tensors.value["out"] = "z"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        py.key = "(n,)"  # type: ignore[misc]
    facts.offer("python.tensors", {"out": "z"}, CONTRACT)  # later offers do not reach the view
    assert py.tensors.value == {"out": "y"}


def test_only_the_porter_s_keys_count_as_the_porter_s():
    facts = Facts()
    facts.offer("python.result", "out", CONTRACT)
    facts.offer("python.alloc", {"out": "torch.empty_like(x)"}, REFERENCE)
    py = python_inputs(facts)
    assert py.from_porter(py.result) and not py.from_porter(py.alloc) and not py.from_porter(py.steps)


def test_config_groups():
    plain = [{"BM": 64}, {"BM": 128}]
    assert config_groups(plain) == ({"when": "always", "configs": plain},)
    grouped = [{"when": "persistent", "configs": [{"BM": 64}]}, {"configs": [{"BM": 32}]}]
    assert config_groups(grouped) == (
        {"when": "persistent", "configs": [{"BM": 64}]},
        {"when": "always", "configs": [{"BM": 32}]},
    )
    assert config_groups(None) == () and config_groups({"BM": 64}) == ()
