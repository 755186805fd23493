"""The host rules a port's own ffi.rs and wrapper must keep, each finding on its line.

ffi.rs: tensors cross as ``*const TensorDesc`` (no raw data pointers), each descriptor is checked
for null, no op-level ``from_raw_parts`` / ``mem::forget`` / ``transmute``, the device comes from
``device_id`` (never ``Device::new(0)``), the launcher returns an ``i32`` code. The wrapper:
every call of the launcher is checked (``check_rc``) and the op is registered for ``cutile-rs``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bot.check.abi import Function
from bot.check.findings import Finding

_BANNED = re.compile(r"\b(from_raw_parts(?:_mut)?|mem::forget|transmute)\b")
_DEVICE_ZERO = re.compile(r"Device::new\(\s*0\s*[,)]")


def null_checking_macros(text: str) -> set[str]:
    """The ``macro_rules!`` of ``text`` (the checkout's ffi_util.rs) whose body checks its arguments
    for null (``$p.is_null()``): an invocation of one checks the descriptors it is given."""
    found = set()
    for m in re.finditer(r"macro_rules!\s*(\w+)\s*\{", text):
        depth, end = 1, m.end()
        while depth and end < len(text):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        if re.search(r"\$\w+\s*\.\s*is_null\s*\(", text[m.end() : end]):
            found.add(m.group(1))
    return found


def _null_checked(text: str, macros: set[str]) -> set[str]:
    checked = set(re.findall(r"\b(\w+)\s*\.\s*is_null\s*\(", text))
    for name in macros:
        for args in re.findall(rf"\b{re.escape(name)}!\s*[(\[{{]([^)\]}}]*)", text):
            checked |= set(re.findall(r"\w+", args))
    return checked


def ffi_rules(ffi_rs: Path, text: str, launcher: Function, macros: set[str] = frozenset()) -> list[Finding]:
    """``text``: ffi.rs (shown as ``ffi_rs``); ``macros``: the checkout's null-checking macros."""
    checked = _null_checked(text, macros)
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        code = line.split("//", 1)[0]
        banned = _BANNED.search(code)
        if banned:
            found.append(
                Finding(ffi_rs, number, f"op-level `{banned.group(1)}`: only ffi_util's borrow_tensor may")
            )
        if _DEVICE_ZERO.search(code):
            found.append(Finding(ffi_rs, number, "`Device::new(0)`: the device must come from `device_id`"))
    for p in launcher.params:
        if p.ctype.endswith("*") and "TensorDesc" not in p.ctype:
            found.append(
                Finding(
                    ffi_rs, p.line, f"`{p.name}` is a raw `{p.ctype}`: tensors cross as `*const TensorDesc`"
                )
            )
        elif "TensorDesc" in p.ctype and p.name not in checked:
            found.append(Finding(ffi_rs, p.line, f"descriptor `{p.name}` is never checked for null"))
    if launcher.returns != "int32_t":
        found.append(
            Finding(ffi_rs, launcher.line, f"`{launcher.name}` returns {launcher.returns}, not an i32 code")
        )
    if "device_id" not in {p.name for p in launcher.params}:
        found.append(Finding(ffi_rs, launcher.line, f"`{launcher.name}` takes no `device_id`"))
    return found


def registered_names(source: str) -> list[str]:
    """The names a wrapper registers for cutile-rs (``register_impl("<name>", backend="cutile-rs")``)."""
    return [
        n.args[0].value
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
        and _registers(n, str(n.args[0].value))
    ]  # fmt: skip


def wrapper_rules(wrapper: Path, source: str, registry_name: str, symbol: str) -> list[Finding]:
    """``registry_name``: what the cuTile reference registers the op as (``get_<op>`` for a getter)."""
    tree = ast.parse(source)
    found = []
    checked = _checked_names(tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _calls(n, symbol)]
    if not calls:
        found.append(Finding(wrapper, 0, f"the wrapper never calls `lib.{symbol}`"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for call in calls:
        parent = parents.get(call)
        direct = isinstance(parent, ast.Call) and _named(parent.func) == "check_rc"
        kept = isinstance(parent, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id in checked for t in parent.targets
        )
        if not (direct or kept):
            found.append(
                Finding(
                    wrapper, call.lineno, f"the return code of `lib.{symbol}(...)` is not passed to check_rc"
                )
            )
    if not any(_registers(n, registry_name) for n in ast.walk(tree)):
        why = f'no `register_impl("{registry_name}", backend="cutile-rs")`: not registered under the reference\'s name'
        found.append(Finding(wrapper, 0, why))
    return found


def _registers(node: ast.AST, op: str) -> bool:
    """``register_impl("<op>", "cutile-rs")`` or ``register_impl("<op>", backend="cutile-rs")``."""
    if not (isinstance(node, ast.Call) and _named(node.func) == "register_impl"):
        return False
    given = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
    given += [
        k.value.value for k in node.keywords if k.arg == "backend" and isinstance(k.value, ast.Constant)
    ]
    return given[:1] == [op] and "cutile-rs" in given[1:]


def _calls(call: ast.Call, symbol: str) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == symbol


def _named(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _checked_names(tree: ast.AST) -> set[str]:
    """Names passed to ``check_rc`` anywhere: a code kept in one and checked later."""
    return {
        a.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and _named(n.func) == "check_rc"
        for a in n.args[:1]
        if isinstance(a, ast.Name)
    }
