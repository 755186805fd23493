"""``agent-d check`` reads a wrapper's C calls through agent-d's launch plan (bot/check/wrapper_run.py
``as_plan_calls``): by name, in the plan's order; what the wrapper's cdef lacks from agent-d's port's
call of the same case; a call that cannot be read so is a case left out, said as a finding."""

from __future__ import annotations

from bot.check.abi import Param
from bot.check.wrapper_run import as_plan_calls

SYMBOL = "cutile_op"


def _records(calls: list[list]) -> dict:
    launches = [{"side": "cutile-rs", "symbol": SYMBOL, "args": a} for a in calls]
    return {
        "cases": {"t.py::test_op[cutile_rs-1]": {"backend": "cutile-rs", "case": "1", "launches": launches}}
    }


def _params(*names: str) -> tuple[Param, ...]:
    return tuple(Param(n, "int32_t", i + 1) for i, n in enumerate(names))


def test_calls_are_put_in_the_plans_order_and_what_the_cdef_lacks_is_agent_ds():
    theirs = _records([[64, 7]])  # tile, rows; the wrapper's ffi.rs computes the grid itself
    ours = _records([[9, 7, 64]])
    read, filled, left_out = as_plan_calls(
        theirs, _params("tile", "rows"), ["grid", "rows", "tile"], ours, SYMBOL
    )
    (record,) = read["cases"].values()
    assert record["launches"][0]["args"] == [9, 7, 64]
    assert (filled, left_out) == (["grid"], [])


def test_a_call_that_cannot_be_read_leaves_its_case_out_with_the_reason():
    ours = _records([[9, 7, 64]])
    params = _params("tile", "rows")
    read, _, left_out = as_plan_calls(_records([[64]]), params, ["grid", "rows", "tile"], ours, SYMBOL)
    assert read["cases"] == {} and left_out == ["1: call 1 passes 1 arguments to a 2-parameter cdef"]
    # a second call that needs agent-d's grid, where agent-d's port made one call
    read, _, left_out = as_plan_calls(
        _records([[64, 7], [64, 7]]), params, ["grid", "rows", "tile"], ours, SYMBOL
    )
    assert read["cases"] == {} and left_out == ["1: call 2 lacks grid and agent-d's port made 1 call(s)"]
    # ... a second call the wrapper's cdef says in full is read as it is
    full = _params("grid", "rows", "tile")
    read, _, left_out = as_plan_calls(
        _records([[9, 7, 64], [3, 7, 64]]), full, ["grid", "rows", "tile"], ours, SYMBOL
    )
    assert left_out == [] and len(next(iter(read["cases"].values()))["launches"]) == 2
