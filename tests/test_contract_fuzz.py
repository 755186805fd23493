"""Arbitrary text in a contract's fields never becomes code of its own (issue 33, deliverable 2):
each field of a real contract (our fixture op tile_copy's) is given text hypothesis makes; the
contract is refused by its grammar, or the port's plan and generation stop with a clear error, or
every generated file holds only what its kind may (``bot/emit/contents.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.emit import contents, generate
from bot.emit.stage_generate import make_plan
from bot.errors import StageStop
from bot.expr import ExprError
from bot.targets.types import Target

FIXTURES = Path(__file__).parent / "fixtures" / "ops"
OP = "tile_copy"
# (dotted path into the contract, kind of slot): each gets hypothesis's text
FIELDS = [
    ("python.register.name", "name"),
    ("python.signature", "text"),
    ("python.steps.0.expr", "text"),
    ("python.steps.1.let", "name"),
    ("python.alloc.y1", "text"),
    ("python.args.num_programs", "text"),
    ("python.result", "text"),
]
TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["'''\nimport os\n'''", '"); import os; ("', "__import__('os')", "x\\", "a}{b", "#"]
    ).flatmap(lambda s: st.text(max_size=8).map(lambda t: t + s)),
)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, tilegym_wheel) -> Path:
    from bot.demo import assemble_checkout

    repo = assemble_checkout(tmp_path_factory.mktemp("fuzz") / "tg", tilegym_wheel, ["silu_and_mul"], []).repo
    shutil.copytree(FIXTURES / f"{OP}_kernel", Target(repo, OP).kernel_dir)
    return repo


def _with(contract: dict, dotted: str, value: str) -> dict:
    node = contract
    keys = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return contract


@pytest.mark.slow
@pytest.mark.parametrize(("field", "_kind"), FIELDS)
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=TEXT)
def test_any_text_in_a_contract_field_is_refused_or_generates_only_allowed_code(checkout, field, _kind, text):
    target = Target(checkout, OP)
    base = yaml.safe_load((FIXTURES / f"{OP}_kernel" / "host_contract.yaml").read_text())
    (target.kernel_dir / "host_contract.yaml").write_text(yaml.safe_dump(_with(base, field, text)))
    try:
        plan, _facts, co = make_plan(target, checkout / "out" / OP, carry_always=False)
        if plan.missing:
            return
        files = generate.generate(target, plan, co)
    except (StageStop, ExprError):
        return  # refused, with a reason: nothing generated
    written = [(f.path, f.content) for f in files.files if f.kind == "new"]
    contents.check(written, {plan.ffi.module})  # raises when a file holds what it may not
