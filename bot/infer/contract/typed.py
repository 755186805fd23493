"""The host contract as typed data: every value is read by the closed grammar of its kind.

The schema says a value is a string; this module says what the string may be. A contract value
becomes code in the wrapper or in ffi.rs, so each one must be one of:

- an identifier (a name the generated code binds or reads): the language's own rules, not a
  keyword, not a builtin, no dunder;
- a return-code name of ffi.rs (``RC_NAMES``), an exception class of ``RAISABLE``, a torch dtype
  of ``TORCH_DTYPES``;
- an FFI expression (``bot/plan/expr.py``): names, integers, a dtype name, arithmetic,
  comparisons and the plan's functions (``dim``, ``stride``, ``cdiv``, ...);
- a wrapper expression: Python's expression syntax without lambdas, comprehensions, f-strings,
  walrus or starred values; names that are not dunder and builtins only from ``PY_BUILTINS``;
  attributes that are not dunder; calls only of ``PY_FUNCTIONS``, of ``torch``/``math`` functions
  in ``MODULE_FUNCTIONS``, or of tensor methods in ``METHODS``;
- a message: text whose ``{...}`` fields are wrapper expressions;
- a signature: parameters whose defaults are literals.

``problems`` lists each value that is none of these, ``<dotted key>: <why>``; the loader refuses
the contract with them, so no contract text reaches generated code unread.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from collections.abc import Iterator

from bot.expr import DTYPE_NAME, TENSOR_FUNCS, ExprError
from bot.expr import parse as parse_ffi

RC_NAMES = ("NULL_PTR", "INVALID_ARGS")  # the codes a contract check may return (ffi.rs's rc table)
RAISABLE = ("ValueError", "TypeError", "NotImplementedError", "RuntimeError", "IndexError", "AssertionError")
FFI_FUNCTIONS = TENSOR_FUNCS | {"cdiv", "sel", "max", "min"}
PY_BUILTINS = {"int", "float", "bool", "min", "max", "abs", "len", "tuple", "list", "round", "sum", "range"}
PY_BUILTINS |= {"isinstance", "str", "None", "True", "False"}
PY_FUNCTIONS = PY_BUILTINS - {"None", "True", "False"} | {"next_power_of_2", "cdiv", "get_num_sm"}
MODULE_FUNCTIONS = {
    "torch": {
        "tensor",
        "empty",
        "empty_like",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "arange",
    },
    "math": {"sqrt", "ceil", "floor", "log2", "prod", "gcd", "isqrt"},
}
METHODS = {
    "contiguous", "view", "reshape", "flatten", "transpose", "permute", "unsqueeze", "squeeze", "expand",
    "to", "size", "dim", "stride", "numel", "element_size", "is_contiguous", "new_empty", "new_zeros",
    "new_full", "item", "t", "float", "half", "bfloat16", "int", "long", "detach", "get",
}  # fmt: skip
# what python.dtypes may name: torch's dtypes (the wrapper writes each as torch.<name>)
TORCH_DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
                "float8_e4m3fn", "float8_e5m2")  # fmt: skip
MODULE_VALUES = {
    "torch": {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"}
    | {"float8_e4m3fn", "float8_e5m2", "half", "float", "int", "long", "Size", "Tensor"},
    "math": {"pi", "e", "inf"},
}
PARAMETER_BUILTINS = {"input"}  # references name a parameter so; it shadows the builtin
# module names of the generated wrapper a contract value must not reach
WRAPPER_NAMES = {"register_impl", "autotune_launch", "SimpleNamespace", "ffi", "lib", "os", "sys", "builtins"}
MAX_TEXT = 2000  # one value's characters: longer is not a contract value
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPR_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple,
    ast.List, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword,
    ast.Starred, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip


class TypedError(ValueError):
    pass


def identifier(text: object) -> str:
    name = str(text)
    if not _IDENTIFIER.fullmatch(name):
        raise TypedError(f"{_show(name)} is not an identifier")
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name.startswith("_"):
        raise TypedError(
            f"{_show(name)} is a keyword or begins with an underscore (the wrapper's own names do)"
        )
    if hasattr(builtins, name) and name not in PARAMETER_BUILTINS:
        raise TypedError(f"{_show(name)} is a Python builtin")
    if name in WRAPPER_NAMES:
        raise TypedError(f"{_show(name)} is a name of the wrapper module itself")
    return name


def ffi_expr(text: object) -> str:
    """An FFI expression (an integer is one too), by the plan's expression language."""
    source = _bounded(text)
    try:
        tree = parse_ffi(source)
    except ExprError as exc:
        raise TypedError(str(exc)) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FFI_FUNCTIONS or node.keywords:
                raise TypedError(f"{_show(source)}: calls only {', '.join(sorted(FFI_FUNCTIONS))}")
        elif isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise TypedError(f"{_show(source)}: the name {node.id} is a dunder name")
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str) and not DTYPE_NAME.fullmatch(node.value):
                raise TypedError(f"{_show(source)}: a string here names a dtype")
            if not isinstance(node.value, bool | int | str):
                raise TypedError(f"{_show(source)}: {node.value!r} is not an integer")
        elif not isinstance(node, _EXPR_NODES) or isinstance(
            node, ast.Attribute | ast.Subscript | ast.IfExp | ast.Starred
        ):
            raise TypedError(f"{_show(source)}: {type(node).__name__} is not in the FFI expression language")
    return source


def py_expr(text: object) -> str:
    """A wrapper expression (a literal number or boolean is one too)."""
    source = _bounded(text)
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise TypedError(f"{_show(source)} is not a Python expression ({exc.msg})") from None
    _check_py(tree, source)
    return source


def message(text: object) -> str:
    """A check's message: text, and wrapper expressions in its ``{...}`` fields."""
    source = _bounded(text, ascii_only=False)
    if "{" not in source:
        return source
    try:
        tree = ast.parse("f" + repr(source), mode="eval")
    except SyntaxError as exc:
        raise TypedError(f"{_show(source)}: its {{...}} fields do not parse ({exc.msg})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue):
            if node.format_spec is not None or node.conversion != -1:
                raise TypedError(f"{_show(source)}: a field is an expression alone (no !r or :spec)")
            _check_py(ast.Expression(node.value), source)
    return source


def signature(text: object) -> str:
    """A wrapper signature: parameters, ``*args``/``**kwargs``, defaults that are literals."""
    source = _bounded(text)
    try:
        fn = ast.parse(f"def _({source}):\n    pass").body[0]
    except SyntaxError as exc:
        raise TypedError(f"{_show(source)} is not a parameter list ({exc.msg})") from None
    assert isinstance(fn, ast.FunctionDef)
    args = fn.args
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
    for arg in every:
        identifier(arg.arg)
        if arg.annotation is not None:
            raise TypedError(f"{_show(source)}: {arg.arg} has an annotation (give the parameter alone)")
    for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
        if not _literal(default):
            raise TypedError(f"{_show(source)}: the default {ast.unparse(default)!r} is not a literal")
    return source


def targets(text: object) -> str:
    """A ``let`` target: one identifier or several, comma-separated."""
    source = _bounded(text)
    for part in source.split(","):
        if part.strip() != "_":  # the value unpacked and not kept
            identifier(part.strip())
    return source


def _check_py(tree: ast.AST, source: str) -> None:
    for node in ast.walk(tree):
        if not isinstance(node, _EXPR_NODES):
            raise TypedError(
                f"{_show(source)}: {type(node).__name__} is not allowed in a contract expression"
            )
        if isinstance(node, ast.Name):
            builtin = hasattr(builtins, node.id) and node.id not in PY_BUILTINS | PARAMETER_BUILTINS
            if node.id.startswith("_") or builtin or node.id in WRAPPER_NAMES:
                raise TypedError(f"{_show(source)}: the name {node.id} is not allowed")
        elif isinstance(node, ast.Attribute):
            _check_attribute(node, source)
        elif isinstance(node, ast.Call):
            _check_call(node, source)
        elif isinstance(node, ast.keyword) and node.arg is None:
            raise TypedError(f"{_show(source)}: **mapping arguments are not allowed")
        elif isinstance(node, ast.Constant) and not isinstance(
            node.value, int | float | str | bool | type(None)
        ):
            raise TypedError(f"{_show(source)}: the literal {node.value!r} is not allowed")


def _check_attribute(node: ast.Attribute, source: str) -> None:
    """No private attribute; of a module, only its values and functions of the tables."""
    if node.attr.startswith("_"):
        raise TypedError(f"{_show(source)}: the attribute {node.attr} is not allowed")
    if isinstance(node.value, ast.Name) and node.value.id in MODULE_FUNCTIONS:
        module = node.value.id
        if node.attr not in MODULE_FUNCTIONS[module] | MODULE_VALUES[module]:
            raise TypedError(f"{_show(source)}: {module}.{node.attr} is not one a contract may read")


def _check_call(node: ast.Call, source: str) -> None:
    fn = node.func
    if isinstance(fn, ast.Name) and fn.id in PY_FUNCTIONS:
        return
    if isinstance(fn, ast.Attribute):
        if isinstance(fn.value, ast.Name) and fn.value.id in MODULE_FUNCTIONS:
            if fn.attr in MODULE_FUNCTIONS[fn.value.id]:
                return
            raise TypedError(
                f"{_show(source)}: {fn.value.id}.{fn.attr}() is not a function a contract may call"
            )
        if fn.attr in METHODS:
            return
    raise TypedError(f"{_show(source)}: {ast.unparse(fn)}() is not a function a contract may call")


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.Tuple):
        return all(_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant) and not isinstance(node.value, bytes)


def _bounded(text: object, ascii_only: bool = True) -> str:
    source = str(text)
    if ascii_only and not source.isascii():
        # Python folds identifiers by NFKC (`º` reads as `o`): a name must be spelled as it binds
        raise TypedError(f"{_show(source)}: ASCII only")
    if len(source) > MAX_TEXT:
        raise TypedError(f"{_show(source)}: {len(source)} characters, more than {MAX_TEXT}")
    if "\n" in source.strip() or "\r" in source:
        raise TypedError(f"{_show(source)}: one line only")
    return source


def _show(text: str) -> str:
    one = text.replace("\n", "\\n")
    return repr(one if len(one) <= 60 else one[:57] + "...")


# --------------------------------------------------------------------------- the contract's slots


def problems(contract: dict) -> list[str]:
    """Every value of a schema-valid nested contract that is not of its kind."""
    return [f"{key}: {why}" for key, why in _walk(contract)]


def _walk(contract: dict) -> Iterator[tuple[str, str]]:
    ffi, py = contract.get("ffi") or {}, contract.get("python") or {}
    for key, read in _slots(ffi, py):
        try:
            read()
        except TypedError as exc:
            yield key, str(exc)


def _slots(ffi: dict, py: dict) -> Iterator[tuple[str, object]]:
    def each(prefix: str, mapping: dict, value_kind, key_kind=identifier):
        for name, value in (mapping or {}).items():
            yield f"{prefix}.{name}", lambda n=name: key_kind(n)
            if value_kind is not None:
                yield f"{prefix}.{name}", lambda v=value: value_kind(v)

    def ffi_or(words: tuple[str, ...]):
        return lambda v: v if v in words else ffi_expr(v)

    yield from each("ffi.scalars", ffi.get("scalars"), ffi_or(("arg",)))
    yield from each("ffi.generics", ffi.get("generics"), identifier)
    yield from each("ffi.derived_generics", ffi.get("derived_generics"), ffi_expr)
    yield from each("ffi.type_generics", ffi.get("type_generics"), None)
    yield from each("ffi.variants", ffi.get("variants"), ffi_or(("else",)))
    for entry, terms in (ffi.get("grid") or {}).items():
        yield f"ffi.grid.{entry}", lambda e=entry: identifier(e)
        for i, term in enumerate(terms):
            yield f"ffi.grid.{entry}[{i}]", lambda t=term: ffi_expr(t)
    for key in ("dtype_from", "selector"):
        if key in ffi:
            yield f"ffi.{key}", lambda v=ffi[key]: identifier(v)
    if "dispatch_key" in ffi:
        yield "ffi.dispatch_key", lambda: ffi_expr(ffi["dispatch_key"])
    for i, entry in enumerate(ffi.get("sequence") or []):
        yield f"ffi.sequence[{i}]", lambda e=entry: identifier(e)
    for i, check in enumerate(ffi.get("checks") or []):
        yield f"ffi.checks[{i}].when", lambda c=check: ffi_expr(c["when"])
        if "rc" in check:
            yield f"ffi.checks[{i}].rc", lambda c=check: _one_of(c["rc"], RC_NAMES)
    yield from _python_slots(py, each)


def _python_slots(py: dict, each) -> Iterator[tuple[str, object]]:
    register = py.get("register") or {}
    if "name" in register:
        yield "python.register.name", lambda: identifier(register["name"])
    for key in ("inner_name", "out_param"):
        if key in py:
            yield f"python.{key}", lambda v=py[key]: identifier(v)
    for key in ("signature", "inner_signature"):
        if key in py:
            yield f"python.{key}", lambda v=py[key]: signature(v)
    for key in ("out_cols", "key", "result"):
        if key in py:
            yield f"python.{key}", lambda v=py[key]: py_expr(v)
    for i, name in enumerate(py.get("tensor_params") or []):
        yield f"python.tensor_params[{i}]", lambda n=name: identifier(n)
    for i, name in enumerate(py.get("dtypes") or []):
        yield f"python.dtypes[{i}]", lambda n=name: _one_of(n, TORCH_DTYPES)
    yield from each("python.generics", py.get("generics"), py_expr)
    yield from each("python.alloc", py.get("alloc"), py_expr)
    yield from each("python.tensors", py.get("tensors"), py_expr)
    yield from each("python.args", py.get("args"), py_expr)
    for name, spec in (py.get("per_element") or {}).items():
        yield f"python.per_element.{name}", lambda n=name: identifier(n)
        yield f"python.per_element.{name}.list", lambda s=spec: py_expr(s["list"])
        yield f"python.per_element.{name}.item", lambda s=spec: identifier(s["item"])
    for i, step in enumerate(py.get("steps") or []):
        yield from _step_slots(f"python.steps[{i}]", step)
    for i, group in enumerate(py.get("configs") or []):
        yield from _config_slots(f"python.configs[{i}]", group)


def _step_slots(where: str, step: dict) -> Iterator[tuple[str, object]]:
    kinds = {"let": targets, "expr": py_expr, "check": py_expr, "message": message, "return": py_expr}
    kinds |= {"when": py_expr, "raise": lambda v: _one_of(v, RAISABLE)}
    for key, value in step.items():
        if key == "detach":
            for j, name in enumerate(value):
                yield f"{where}.detach[{j}]", lambda n=name: identifier(n)
        elif key in kinds:
            yield f"{where}.{key}", lambda k=key, v=value: kinds[k](v)


def _config_slots(where: str, group: dict) -> Iterator[tuple[str, object]]:
    if "configs" in group:
        if "when" in group and group["when"] not in ("always", "else"):
            yield f"{where}.when", lambda: py_expr(group["when"])
        for j, config in enumerate(group["configs"]):
            yield from _config_slots(f"{where}.configs[{j}]", config)
        return
    for field, value in group.items():
        yield f"{where}.{field}", lambda f=field: identifier(f)
        yield f"{where}.{field}", lambda v=value: _config_value(v)


def _config_value(value: object) -> object:
    if isinstance(value, str):
        return _bounded(value, ascii_only=False)  # rendered with repr(): a string stays a string
    return value


def _one_of(value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise TypedError(f"{_show(str(value))} is not one of {', '.join(allowed)}")
    return str(value)
