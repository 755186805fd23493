"""The host contract against its JSON Schema (bot/infer/contract/contract.schema.json): what passes, and the
exact dotted path each rejection names."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from bot.errors import Blocked
from bot.infer.contract import host_contract as contract
from bot.infer.contract.keys import known_keys, nest
from bot.infer.contract.schema import problems, schema
from bot.infer.facts import Facts
from bot.plan import python_side
from bot.plan.inputs import python_inputs
from bot.targets.types import Source, Target

FIXTURES = Path(__file__).parent / "fixtures"
CONTRACTS = sorted(FIXTURES.glob("contracts/*.yaml")) + sorted(FIXTURES.glob("ops/*/host_contract.yaml"))
# Contracts written inline by other tests (tests/test_plan_emit.py).
INLINE = [
    "contract_version: 1\nffi:\n  scalars:\n    hidden_size: dim(inp,1) / 2\n",
    "contract_version: 1\n"
    "ffi.checks: [{when: 'dim(inp,1) != 2 * dim(out,1)'}]\n"
    "ffi.grid.silu_and_mul_kernel: ['dim(inp,0)', 1, 1]\n",
]


def _target(tmp_path: Path, text: str) -> Target:
    target = Target(tmp_path, "op")
    target.kernel_dir.mkdir(parents=True)
    (target.kernel_dir / "host_contract.yaml").write_text(text, encoding="utf-8")
    return target


def _facts(tmp_path: Path, text: str) -> Facts:
    facts = Facts()
    contract.gather(_target(tmp_path, text), facts)
    return facts


def _refusal(tmp_path: Path, text: str) -> list[str]:
    """The reason's lines, each without the file prefix (checked once here for every line)."""
    with pytest.raises(Blocked) as info:
        _facts(tmp_path, text)
    assert info.value.klass == "host"
    prefix = "src/tilegym/ops/cutile_rs/op_kernel/host_contract.yaml: "
    lines = info.value.reason.splitlines()
    assert all(line.startswith(prefix) for line in lines), lines
    return [line[len(prefix) :] for line in lines]


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(schema())


@pytest.mark.parametrize("path", CONTRACTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_contract_validates(path, tmp_path):
    assert CONTRACTS, "no fixture contracts found"
    nested, twice = nest(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert twice == [] and problems(nested) == []
    assert _facts(tmp_path, path.read_text(encoding="utf-8")).items  # and they load as facts


@pytest.mark.parametrize("text", INLINE)
def test_inline_test_contracts_validate(text, tmp_path):
    assert _facts(tmp_path, text).items


def test_known_keys_are_those_of_contract_v1():
    """Draft contracts list the facts whose keys are known: the schema must know the same ones."""
    assert set(known_keys()) == {
        *(f"ffi.{k}" for k in ("scalars.*", "generics.*", "derived_generics.*", "type_generics.*")),
        *(f"ffi.{k}" for k in ("dtype_from", "dtypes")),
        *(f"ffi.{k}" for k in ("grid.*", "variants", "sequence", "selector", "dispatch_key", "checks")),
        *(f"python.{k}" for k in ("register.name", "register.kind", "signature", "tensor_params")),
        *(f"python.{k}" for k in ("inner_name", "inner_signature", "out_cols", "out_param", "generics.*")),
        *(f"python.{k}" for k in ("steps", "alloc", "tensors", "args.*", "configs", "key", "result")),
        "python.dtypes",
        "python.per_element",
    }
    assert contract._known("ffi.scalars.n") and not contract._known("ffi.scalars")
    assert not contract._known("python.alloc.out") and not contract._known("contract.lines")


def test_every_ffi_and_python_key_the_planner_reads_is_one_a_contract_may_give():
    """A key the planner reads from the facts and the schema refuses could only come from a reader;
    a porter could never say it (``python.per_element`` was one)."""
    import re

    source = (Path(__file__).parent.parent / "bot" / "plan" / "inputs.py").read_text(encoding="utf-8")
    read = set(re.findall(r'facts(?:\.get\(|, )"((?:ffi|python)\.[\w.]+)"', source))
    assert "python.per_element" in read and "ffi.variants" in read
    for key in sorted(read):
        assert contract._known(key) or contract._known(key + ".x"), key


def test_a_contract_s_per_element_lists_reach_the_plan_inputs(tmp_path):
    text = "contract_version: 1\npython:\n  per_element:\n    a: {list: group_A, item: Ai}\n"
    assert _facts(tmp_path, text).get("python.per_element") == {"a": {"list": "group_A", "item": "Ai"}}
    without_item = "contract_version: 1\npython:\n  per_element:\n    a: {list: group_A}\n"
    assert _refusal(tmp_path / "refused", without_item)


def test_unknown_top_level_key(tmp_path):
    assert _refusal(tmp_path, "contract_version: 1\npyhton:\n  key: (m,)\n") == [
        "pyhton: unknown key (did you mean python?)"
    ]
    assert _refusal(tmp_path / "b", "launcher: {}\n") == [
        "launcher: unknown key (known: contract_version, ffi, python)"
    ]


def test_unknown_nested_key_suggests_the_closest(tmp_path):
    assert _refusal(tmp_path, "python:\n  stpes: []\n") == [
        "python.stpes: unknown key (did you mean python.steps?)"
    ]
    # dotted, a level deeper: the same path and suggestion
    assert _refusal(tmp_path / "b", "python.register.knd: direct\n") == [
        "python.register.knd: unknown key (did you mean python.register.kind?)"
    ]


def test_unquoted_int_scalar_expression(tmp_path):
    assert _refusal(tmp_path, "ffi:\n  scalars: {n_rows: 4}\n") == [
        'ffi.scalars.n_rows: 4 is not a string (write the expression in quotes: "4")'
    ]
    # quoted, it is an expression like any other
    assert _facts(tmp_path / "b", "ffi:\n  scalars: {n_rows: '4'}\n").get("ffi.scalars.n_rows") == "4"


def test_python_args_keep_taking_literals(tmp_path):
    facts = _facts(tmp_path, "python.args: {block_rows: 16, eps: 0.5, flag: true, n: 'cdiv(m, 16)'}\n")
    assert facts.get("python.args.block_rows") == 16 and facts.get("python.args.eps") == 0.5
    assert _refusal(tmp_path / "b", "python.args: {block_rows: [16]}\n") == [
        "python.args.block_rows: [16] is not a string, an integer, a number or a boolean"
    ]


def test_grid_needs_three_terms(tmp_path):
    assert _refusal(tmp_path, 'ffi:\n  grid:\n    k: ["cdiv(m, bm)", 1]\n') == [
        "ffi.grid.k: expected 3 grid terms, got 2"
    ]
    assert _refusal(tmp_path / "b", "ffi.grid.k: [a, 1, 2.5]\n") == [
        'ffi.grid.k[2]: 2.5 is not a string or an integer (write the expression in quotes: "2.5")'
    ]


def test_bad_step_forms(tmp_path):
    steps = (
        "python:\n  steps:\n"
        "    - {let: x, exp: y}\n"  # a let step with a typo
        "    - {let: m, n, expr: x.shape}\n"  # an unquoted comma in flow style
        "    - {assign: x}\n"  # no known form at all
        "    - {detach: x}\n"  # names must be a list
    )
    forms = "one of {let, expr}, {check, raise?, message?}, {detach: [names]}, {return, when}"
    assert _refusal(tmp_path, steps) == [
        "python.steps[0]: missing key expr",
        "python.steps[0].exp: unknown key (did you mean python.steps[0].expr?)",
        "python.steps[1].n: unknown key (known: let, expr); "
        "an unquoted comma in YAML flow style splits a value: quote it",
        f'python.steps[2]: expected {forms}, got {{"assign": "x"}}',
        'python.steps[3].detach: "x" is not a list',
    ]


def test_unparsable_step_expression_names_its_index():
    """The schema checks forms; whether an expression parses is still the planner's check."""
    facts = Facts()
    steps = [{"let": "a", "expr": "x.shape"}, {"check": "a >", "raise": "ValueError"}]
    facts.offer("python.steps", steps, Source("contract", "host_contract.yaml: python.steps"))
    with pytest.raises(Blocked, match=r"host_contract.yaml: python.steps\[1\]: check 'a >' is not a Python"):
        python_side.contract_steps(python_inputs(facts).steps)


def test_bad_register_kind(tmp_path):
    assert _refusal(tmp_path, "python:\n  register: {name: op, kind: dirct}\n") == [
        'python.register.kind: "dirct" is not one of direct, getter'
    ]


def test_other_value_checks(tmp_path):
    text = (
        "contract_version: 2\n"
        "ffi.dtypes: [f32, f64]\n"
        "ffi.checks: [{when: 'dim(x,0) < 1', rcc: INVALID_ARGS}]\n"
        "python.out_cols: null\n"
        "python.configs: [{when: big, configs: [{BM: 128}]}, {BM: 64}]\n"
    )
    assert _refusal(tmp_path, text) == [
        "contract_version: 2 is not supported (expected 1)",
        "ffi.checks[0].rcc: unknown key (did you mean ffi.checks[0].rc?)",
        'ffi.dtypes[1]: "f64" is not one of f32, f16, bf16, i32, i64, f8e5m2, f8e4m3fn, f4e2m1fnx2',
        "python.configs[1]: missing key configs",
        "python.configs[1].BM: unknown key (known: when, configs)",
        "python.out_cols: null is not a string (fill in a value or delete the key)",
    ]


def test_a_key_given_twice(tmp_path):
    text = "ffi.scalars.n: dim(x,0)\nffi:\n  scalars: {n: dim(x,1)}\npython.register: direct\n"
    lines = _refusal(tmp_path, text + "python.register.kind: direct\n")
    assert lines[:2] == ["ffi.scalars.n: given more than once", "python.register: given more than once"]


NESTED = """\
contract_version: 1
ffi:
  scalars:
    hidden_size: dim(out,1)
  grid:
    k: [n_rows, 1, 1]
python:
  register: {name: op, kind: direct}
  alloc: {out_rows: torch.empty_like(x)}
  args:
    bm: 64
"""
DOTTED = """\
contract_version: 1
ffi.scalars.hidden_size: dim(out,1)
ffi.grid.k: [n_rows, 1, 1]
python.register.name: op
python:
  register.kind: direct
  alloc: {out_rows: torch.empty_like(x)}
python.args.bm: 64
"""


def test_dotted_and_nested_spellings_give_the_same_facts(tmp_path):
    nested = _facts(tmp_path / "nested", NESTED)
    dotted = _facts(tmp_path / "dotted", DOTTED)

    def keyed(facts: Facts) -> dict:
        return {k: (f.value, f.source) for k, f in facts.items.items() if k != "contract.lines"}

    assert keyed(nested) == keyed(dotted) and len(keyed(nested)) == 6
    assert nested.get("python.alloc") == {"out_rows": "torch.empty_like(x)"}
    assert (
        nested.source("ffi.grid.k").detail
        == "src/tilegym/ops/cutile_rs/op_kernel/host_contract.yaml: ffi.grid.k"
    )


def test_agent_b_block_is_validated_the_same_way(tmp_path):
    report = tmp_path / "agent_b.md"
    block = "python:\n  stpes: []\nffi.scalars.n_rows: 4\n"
    report.write_text(f"# Stage B\n\n## host_launch_contract\n\n```yaml\n{block}```\n", encoding="utf-8")
    with pytest.raises(Blocked) as info:
        contract.gather_agent_b(report, Facts())
    assert info.value.reason.splitlines() == [
        'agent_b.md host_launch_contract: ffi.scalars.n_rows: 4 is not a string (write the expression in quotes: "4")',
        "agent_b.md host_launch_contract: python.stpes: unknown key (did you mean python.steps?)",
    ]
    report.write_text(f"## host_launch_contract\n\n```yaml\n{DOTTED}```\n", encoding="utf-8")
    facts = Facts()
    contract.gather_agent_b(report, facts)
    assert facts.get("ffi.scalars.hidden_size") == "dim(out,1)"
    assert facts.source("python.args.bm") == Source("agent_b", "agent_b.md: python.args.bm")


def test_the_verify_path_imports_without_jsonschema():
    """GPU runners run `agent-d verify` with the wheels scripts/gpu/pack/trees.py carries, and jsonschema is
    not among them: the schema library loads only when a contract is checked."""
    import subprocess
    import sys

    code = "import sys; sys.modules['jsonschema'] = None; import bot.cli, bot.pipeline; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_the_schema_s_dtype_names_are_the_dtype_table_s():
    """One table of element types (bot/dtypes.py): the contract's enums are checked against it."""
    from bot import dtypes

    ffi = schema()["$defs"]["ffi"]["properties"]
    assert set(ffi["dtypes"]["items"]["enum"]) == set(dtypes.NAMES)
    assert set(ffi["type_generics"]["additionalProperties"]["enum"]) == {*dtypes.UNPACKED, "dtype"}
