"""Arbitrary text in a contract's fields never becomes code of its own (issue 33, deliverable 2):
each field of a real contract (our fixture op tile_copy's) is given text hypothesis makes; the
contract is refused by its grammar, or the port's plan and generation stop with a clear error, or
every generated file holds only what its kind may (``bot/emit/contents.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bot.infer.contract as contract_pkg
from bot.emit import contents, generate
from bot.emit.stage_generate import make_plan
from bot.errors import StageStop
from bot.expr import ExprError
from bot.targets.types import Target

FIXTURES = Path(__file__).parent / "fixtures" / "ops"
OP = "tile_copy"
SCHEMA = json.loads((Path(contract_pkg.__file__).parent / "contract.schema.json").read_text())
# Valid neighbours for a fuzzed value whose object requires them (the schema's oneOf step shapes,
# a check, a config group), so the text reaches planning instead of a missing-key refusal.
SIBLINGS = {
    "python.steps.0<let>": {"let": "z0", "expr": "x.shape[0]"},
    "python.steps.0<check>": {"check": "x.dim() >= 1", "raise": "ValueError", "message": "bad"},
    "python.steps.0<return>": {"return": "x", "when": "x.numel() == 0"},
    "python.steps.0<detach>": {"detach": ["x"]},
    "ffi.checks.0": {"when": "dim(out, 0) != dim(x, 0)", "rc": "INVALID_ARGS"},
    "python.configs.0<group>": {"when": "x.numel() > 0", "configs": [{"block": 1024}]},
    "python.configs.0<config>": {"block": 1024},
    "python.per_element.<key>": {"list": "x", "item": "x"},
}
KEY = "k0"  # a map's key where its value is fuzzed


def _schema_slots(node: dict, path: str, shape: str = "") -> list[str]:
    """Every place of the contract that holds text: each string (or free-typed) leaf, and each map's
    keys (``<key>``), as dotted paths with ``0`` for an array's first item and ``<shape>`` after an
    item of one of several shapes (a step, a config group)."""
    if "$ref" in node:
        return _schema_slots(SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]], path, shape)
    if "oneOf" in node:  # the step shapes: named by their first required key
        return [slot for alt in node["oneOf"] for slot in _schema_slots(alt, f"{path}<{alt['required'][0]}>")]
    if "then" in node:  # configs: a list of groups, or a list of configs
        return [*_schema_slots(node["then"], path, "group"), *_schema_slots(node["else"], path, "config")]
    slots = []
    for key, sub in node.get("properties", {}).items():
        slots += _schema_slots(sub, f"{path}.{key}".lstrip("."))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        slots.append(f"{path}.<key>")
        slots += _schema_slots(extra, f"{path}.{KEY}")
    if "items" in node:
        slots += _schema_slots(node["items"], f"{path}.0" + (f"<{shape}>" if shape else ""))
    types = node.get("type", [])
    is_text = "string" in types or (not types and "enum" not in node)
    if is_text and not node.get("properties") and extra is None and "items" not in node:
        slots.append(path)
    return slots


FIELDS = sorted(set(_schema_slots(SCHEMA, "")))
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


def _copy(value):
    return json.loads(json.dumps(value))


def _with(contract: dict, slot: str, value: str) -> dict:
    """``contract`` with ``value`` at ``slot`` (a key slot gets it as a key), its missing containers
    made and filled with ``SIBLINGS``; a step or config of a named shape is added after the others."""
    parts = slot.split(".")
    key_slot = parts[-1] == "<key>"
    containers = parts[:-1]
    node: dict | list = contract
    walked = ""
    for i, part in enumerate(containers):
        name = part.split("<")[0]
        walked = f"{walked}.{part}".lstrip(".")
        template = SIBLINGS.get(walked.replace(f".{KEY}", ".<key>"))
        following = (containers[i + 1] if i + 1 < len(containers) else parts[-1]).split("<")[0]
        fresh = _copy(template) if template is not None else ([] if following.isdigit() else {})
        if isinstance(node, list):
            if "<" in part:
                node.append(fresh)
                node = node[-1]
            else:
                while len(node) <= int(name):
                    node.append(_copy(fresh))
                node = node[int(name)]
        else:
            if name not in node:
                node[name] = fresh
            node = node[name]
    if key_slot:
        node[value] = next(iter(node.values()), "x") if node else "x"
    elif isinstance(node, list):
        while len(node) <= int(parts[-1]):
            node.append(value)
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value
    return contract


def test_every_text_slot_of_the_schema_is_fuzzed():
    """The fuzzed places come from the schema itself: a field added to it is fuzzed too."""
    assert len(FIELDS) >= 40, FIELDS
    for named in ("python.register.name", "python.signature", "ffi.checks.0.rc", "python.configs.0<group>.when",
                  "python.alloc.<key>", "python.steps.0<let>.let", "ffi.scalars.<key>"):  # fmt: skip
        assert named in FIELDS


@pytest.mark.slow
@pytest.mark.parametrize("field", FIELDS)
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=TEXT)
def test_any_text_in_a_contract_field_is_refused_or_generates_only_allowed_code(checkout, field, text):
    target = Target(checkout, OP)
    base = yaml.safe_load((FIXTURES / f"{OP}_kernel" / "host_contract.yaml").read_text())
    (target.kernel_dir / "host_contract.yaml").write_text(yaml.safe_dump(_with(base, field, text)))
    try:
        plan, _facts, co = make_plan(target, checkout / "out" / OP)
        if plan.missing:
            return
        files = generate.generate(target, plan, co)
    except (StageStop, ExprError):
        return  # refused, with a reason: nothing generated
    written = [(f.path, f.content) for f in files.files if f.kind == "new"]
    contents.check(written, {plan.ffi.module})  # raises when a file holds what it may not
