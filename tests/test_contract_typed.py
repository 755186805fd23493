"""The host contract is typed data (bot/infer/contract/typed.py, bounded_yaml.py): each value is
read by its kind's grammar, the YAML is read within bounds, and nothing a contract says reaches
generated code as code of its own.

The attacks are those of the third trust round (issue 33): a value that breaks out of a comment or a
string into module code, a return-code name that writes Rust, a default argument that imports, a
document of aliases."""

from __future__ import annotations

import ast
import keyword
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import Blocked
from bot.infer.contract import bounded_yaml, typed
from bot.infer.contract import host_contract as contract
from bot.infer.facts import Facts
from bot.targets.types import Target

PREFIX = "src/tilegym/ops/cutile_rs/op_kernel/host_contract.yaml: "


def _gather(tmp_path: Path, text: str) -> Facts:
    target = Target(tmp_path, "op")
    target.kernel_dir.mkdir(parents=True, exist_ok=True)
    (target.kernel_dir / "host_contract.yaml").write_text(text, encoding="utf-8")
    facts = Facts()
    contract.gather(target, facts)
    return facts


def _refused(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(Blocked) as info:
        _gather(tmp_path, text)
    assert info.value.klass == "host"
    return [line.removeprefix(PREFIX) for line in info.value.reason.splitlines()]


# --------------------------------------------------------------------------- the round's attacks


def test_a_config_condition_cannot_leave_its_comment(tmp_path):
    text = (
        "contract_version: 1\npython:\n  configs:\n"
        "    - when: \"x > 0 '''\\nimport os; os.system('id')\\n'''\"\n"
        "      configs: [{BLOCK: 64}]\n"
    )
    (line,) = _refused(tmp_path, text)
    assert line.startswith("python.configs[0].when: ") and "one line only" in line


def test_a_return_code_is_a_name_of_the_table_not_rust(tmp_path):
    for rc in (
        'INVALID_ARGS; } std::process::Command::new("sh"); if true { return 0',
        'INVALID_ARGS; compile_error!(include_str!("/etc/passwd"))',
        "OK",
    ):
        text = f"contract_version: 1\nffi:\n  checks:\n    - when: dim(x,0) > 0\n      rc: '{rc}'\n"
        (line,) = _refused(tmp_path, text)
        assert line.startswith("ffi.checks[0].rc: ") and "is not one of NULL_PTR, INVALID_ARGS" in line


def test_a_default_argument_that_imports_is_refused(tmp_path):
    text = (
        "contract_version: 1\npython:\n  signature: \"x, _probe=__import__('os').system('id'), **kwargs\"\n"
    )
    (line,) = _refused(tmp_path, text)
    assert line.startswith("python.signature: ")
    assert "begins with an underscore" in line or "not a literal" in line
    text = "contract_version: 1\npython:\n  signature: \"x, probe=__import__('os').system('id')\"\n"
    (line,) = _refused(tmp_path, text)
    assert "is not a literal" in line


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("python.alloc.out", "__import__('os').system('id')", "is not a function a contract may call"),
        ("python.alloc.out", "x.view(__import__)", "the name __import__ is not allowed"),
        ("python.alloc.out", "torch.load('/tmp/x')", "torch.load() is not a function a contract may call"),
        ("python.args.n", "x.__class__", "the attribute __class__ is not allowed"),
        ("python.args.n", "torch.os.environ", "torch.os is not one a contract may read"),
        ("python.args.n", "(lambda: 1)()", "is not a function a contract may call"),
        ("python.args.n", "max(lambda: 1, 2)", "Lambda is not allowed"),
        ("python.args.n", "[eval][0]('1')", "[eval][0]() is not a function a contract may call"),
        ("python.args.n", "max(eval, 1)", "the name eval is not allowed"),
        ("python.args.n", "getattr(x, 'shape')", "getattr() is not a function a contract may call"),
        ("python.args.n", "x.shape[0] + int('º')", "ASCII"),
        ("ffi.scalars.n", "dim(xº,0)", "ASCII"),
        ("python.result", "f'{x}'", "JoinedStr is not allowed"),
        ("python.tensors.out", "_lib", "the name _lib is not allowed"),
        ("ffi.scalars.n", "dim(x,0) + open('/etc/passwd')", "calls only"),
        ("ffi.scalars.n", "x.attr", "Attribute is not in the FFI expression language"),
        ("ffi.grid.k", "['cdiv(n, 2)', 1, \"1; loop {}\"]", "not a plan expression"),
    ],
)
def test_each_expression_slot_reads_only_its_grammar(tmp_path, key, value, why):
    parsed = yaml.safe_load(value) if key == "ffi.grid.k" else value
    text = yaml.safe_dump({"contract_version": 1, key: parsed})
    lines = _refused(tmp_path, text)
    assert any(line.startswith(key) and why in line for line in lines), lines


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("python:\n  register: {name: 'os', kind: direct}\n", "python.register.name"),
        ("python:\n  tensor_params: [x, 'y); import os; (z']\n", "python.tensor_params[1]"),
        ("python:\n  steps:\n    - {let: 'a, b = 1; import os; c', expr: '1'}\n", "python.steps[0].let"),
        ("python:\n  steps:\n    - {check: 'x.dim() != 2', raise: 'SystemExit'}\n", "python.steps[0].raise"),
        ("python:\n  configs: [{'A=1, **{}) or (B': 2}]\n", "python.configs[0].A=1, **{}) or (B"),
        ("ffi:\n  selector: 'entry) { loop {} } fn x('\n", "ffi.selector"),
        ("ffi:\n  generics:\n    BLOCK: 'n; std::process::exit(0)'\n", "ffi.generics.BLOCK"),
        # found by the schema-wide fuzz: written as torch.<name> into the wrapper's dtype check
        (
            "python:\n  dtypes: [float16, \"float16 if __import__('os').system('id') else float32\"]\n",
            "python.dtypes[1]",
        ),
        ("python:\n  dtypes: ['']\n", "python.dtypes[0]"),
    ],
)
def test_each_name_slot_is_an_identifier_or_a_word_of_its_table(tmp_path, text, where):
    lines = _refused(tmp_path, "contract_version: 1\n" + text)
    assert any(line.startswith(where + ": ") for line in lines), lines


def test_a_let_may_unpack_into_the_bare_underscore(tmp_path):
    text = "contract_version: 1\npython:\n  steps:\n    - {let: '_, n', expr: x.shape}\n"
    assert _gather(tmp_path, text).get("python.steps")[0]["let"] == "_, n"


def test_a_message_renders_as_one_literal_whatever_it_holds(tmp_path):
    from bot.emit.wrapper_py import _step
    from bot.plan.types import PyStep

    for text in ('a" + __import__("os").system("id") + "', "ends in a backslash \\", "{x.shape} \\\"'"):
        typed.message(text)
        lines = _step(PyStep("check", expr="x.dim() != 2", error="ValueError", message=text))
        tree = ast.parse("\n".join(lines))
        (raise_,) = [n for n in ast.walk(tree) if isinstance(n, ast.Raise)]
        (arg,) = raise_.exc.args
        calls = [n for n in ast.walk(arg) if isinstance(n, ast.Call)]
        assert calls == [] and isinstance(arg, ast.Constant | ast.JoinedStr), text
    with pytest.raises(typed.TypedError, match="not a function a contract may call"):
        typed.message("{__import__('os').system('id')}")


# --------------------------------------------------------------------------- bounds


def test_a_document_of_aliases_is_refused_before_it_expands(tmp_path):
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
    for level in "bcdefghijkl":
        prev = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
    assert len(bomb) < 1000  # 10^12 leaves once expanded
    (line,) = _refused(tmp_path, bomb)
    assert line == "an anchor (&name): write each value out (line 1)"
    (line,) = _refused(tmp_path, "contract_version: 1\npython:\n  dtypes: *missing\n")
    assert line.startswith("not valid YAML") or line.startswith("an alias")


def test_a_large_or_deep_document_is_refused_unread(tmp_path):
    big = "contract_version: 1\n" + "# padding\n" * 8000
    (line,) = _refused(tmp_path, big)
    assert line == f"{len(big)} bytes, more than {bounded_yaml.MAX_BYTES} (a contract is a few dozen lines)"
    deep = "contract_version: 1\npython:\n  args: " + "[" * 40 + "]" * 40 + "\n"
    (line,) = _refused(tmp_path, deep)
    assert line.startswith(f"nested deeper than {bounded_yaml.MAX_DEPTH} levels")


def test_a_refusal_is_cut_to_a_few_lines_of_a_few_hundred_characters(tmp_path):
    args = "".join(f"    n{i}: '{'__import__(1) + ' * 60}1'\n" for i in range(30))
    lines = _refused(tmp_path, "contract_version: 1\npython:\n  args:\n" + args)
    assert len(lines) == contract.MAX_PROBLEMS + 1 and lines[-1] == "(+18 more)"
    assert all(len(line) <= bounded_yaml.MAX_SHOWN for line in lines)


# --------------------------------------------------------------------------- properties


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(max_size=80))
def test_an_accepted_wrapper_expression_is_one_expression_calling_only_the_tables(text):
    try:
        typed.py_expr(text)
    except typed.TypedError:
        return
    module = ast.parse(f"value = {text.strip()}\n")
    assert len(module.body) == 1 and isinstance(module.body[0], ast.Assign)
    for node in ast.walk(module.body[0].value):
        assert not isinstance(node, ast.Lambda | ast.NamedExpr | ast.JoinedStr | ast.comprehension)
        if isinstance(node, ast.Call):
            fn = node.func
            assert (isinstance(fn, ast.Name) and fn.id in typed.PY_FUNCTIONS) or (
                isinstance(fn, ast.Attribute)
                and (
                    fn.attr in typed.METHODS
                    or fn.attr in typed.MODULE_FUNCTIONS.get(getattr(fn.value, "id", ""), ())
                )
            )
        if isinstance(node, ast.Name | ast.Attribute):
            assert not (getattr(node, "id", "") or getattr(node, "attr", "")).startswith("__")


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(max_size=40))
def test_an_accepted_identifier_binds_one_name(text):
    try:
        name = typed.identifier(text)
    except typed.TypedError:
        return
    (stmt,) = ast.parse(f"{name} = 1").body
    assert isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
    assert not keyword.iskeyword(name) and name not in typed.WRAPPER_NAMES


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(max_size=60))
def test_an_accepted_ffi_expression_renders_as_one_rust_expression_of_the_language(text):
    from bot.emit.rustexpr import ExprError, to_rust

    try:
        typed.ffi_expr(text)
    except typed.TypedError:
        return
    try:
        rust = to_rust(text, bind=lambda t: f"{t}_d", elem=lambda t: "f32")
    except ExprError:
        return  # the renderer refuses more (a call's arity), never less
    words = set(re.findall(r"[A-Za-z_]\w*", rust)) - set(re.findall(r"[A-Za-z_]\w*", text))
    assert words <= RUST_WORDS, (text, rust)
    assert ";" not in rust and "#" not in rust and not re.search(r"!(?![(=])", rust), (text, rust)


RUST_WORDS = {"if", "else", "strides", "as", "i32", "dim", "dtype", "max", "min", "true", "false", "d"}
