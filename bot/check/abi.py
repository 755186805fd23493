"""``agent-d check``: a port's own ffi.rs export held against its wrapper's ``_FFI_CDEF``.

ffi.rs is read with syn (``kernel-reader --exports``), the cdef with a C parser (pycparser, which
cffi itself parses cdefs with), so neither comments nor layout matter. Each parameter is compared
by position: its name, and its type through the C ABI (``RUST_TO_C``).
"""

from __future__ import annotations

import ast
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pycparser import c_ast, c_parser
from pycparser.c_generator import CGenerator

from bot.check.findings import Finding

# Rust types of an exported launcher's parameters, as C spells them
RUST_TO_C = {
    "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t", "u16": "uint16_t", "i32": "int32_t",
    "u32": "uint32_t", "i64": "int64_t", "u64": "uint64_t", "isize": "intptr_t", "usize": "size_t",
    "f32": "float", "f64": "double", "bool": "bool",
    "*const TensorDesc": "const TensorDesc *", "*mut TensorDesc": "TensorDesc *",
    "*const c_void": "const void *", "*mut c_void": "void *",
}  # fmt: skip
# what the cdef may name without declaring it: the fixed-width integers and the descriptor
_C_PRELUDE = (
    "".join(
        f"typedef int {name};\n"
        for name in (
            "int8_t",
            "uint8_t",
            "int16_t",
            "uint16_t",
            "int32_t",
            "uint32_t",
            "int64_t",
            "uint64_t",
            "intptr_t",
            "size_t",
            "bool",
        )  # fmt: skip
    )
    + "typedef struct TensorDesc TensorDesc;\n"
)


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str  # as C spells it
    line: int


@dataclass(frozen=True)
class Function:
    name: str
    params: tuple[Param, ...]
    returns: str
    line: int


def rust_exports(ffi_rs: Path, text: str, reader: str) -> tuple[list[Function], list[Finding]]:
    """The ``extern "C"`` functions of ``text`` (ffi.rs, shown as ``ffi_rs``) with C types; findings
    for what the ABI cannot carry. The text goes on stdin: a file of a pull request is never written."""
    proc = subprocess.run([reader, "--exports", "-"], input=text, capture_output=True, text=True, timeout=120)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    if "error" in doc:
        return [], [Finding(ffi_rs, 0, f"ffi.rs cannot be read: {doc['error']}")]
    functions, findings = [], []
    for fn in doc["functions"]:
        params = []
        for p in fn["params"]:
            ctype = RUST_TO_C.get(_short(p["type"]))
            if ctype is None:
                findings.append(Finding(ffi_rs, p["line"], f"`{p['name']}: {p['type']}` is no C ABI type"))
                ctype = p["type"]
            params.append(Param(p["name"], ctype, p["line"]))
        returns = RUST_TO_C.get(fn["returns"], fn["returns"] or "void")
        functions.append(Function(fn["name"], tuple(params), returns, fn["line"]))
        if not fn["no_mangle"]:
            findings.append(
                Finding(ffi_rs, fn["line"], f"`{fn['name']}` is not exported (no `#[unsafe(no_mangle)]`)")
            )
        elif not fn["unsafe_no_mangle"]:
            findings.append(
                Finding(
                    ffi_rs,
                    fn["line"],
                    f"`{fn['name']}` uses `#[no_mangle]`: edition 2024 needs `#[unsafe(no_mangle)]`",
                )
            )
    return functions, findings


def _short(rust_type: str) -> str:
    """``*const crate::ffi_util::TensorDesc`` -> ``*const TensorDesc``; ``std::ffi::c_void`` likewise."""
    pointer, _, path = rust_type.rpartition(" ")
    name = path.rsplit("::", 1)[-1]
    return f"{pointer} {name}" if pointer else name


def wrapper_cdef(source: str) -> tuple[str, int] | None:
    """The wrapper's ``_FFI_CDEF`` text and the line it starts on; None when it has none."""
    tree = ast.parse(source)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_FFI_CDEF" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value, node.value.lineno
    return None


def cdef_functions(text: str, wrapper: Path, first_line: int) -> tuple[list[Function], list[Finding]]:
    """The functions the cdef declares, with the wrapper's line of each parameter."""
    try:
        unit = c_parser.CParser().parse(_C_PRELUDE + text, filename="<cdef>")
    except c_parser.ParseError as exc:
        return [], [Finding(wrapper, first_line, f"_FFI_CDEF does not parse as C: {exc}")]
    prelude_lines = _C_PRELUDE.count("\n")
    spell = CGenerator()
    functions = []
    for decl in unit.ext:
        if not (isinstance(decl, c_ast.Decl) and isinstance(decl.type, c_ast.FuncDecl)):
            continue
        params = []
        for p in decl.type.args.params if decl.type.args else []:
            if isinstance(p, c_ast.Typename) and spell.visit(p.type) == "void":
                continue
            line = first_line + p.coord.line - prelude_lines - 1
            params.append(Param(p.name or "", _c_type(spell, p), line))
        returns = spell.visit(decl.type.type)
        line = first_line + decl.coord.line - prelude_lines - 1
        functions.append(Function(decl.name, tuple(params), returns.strip(), line))
    return functions, []


def _c_type(spell: CGenerator, param: c_ast.Decl) -> str:
    """``const TensorDesc *``, ``int32_t``: the declaration without its name."""
    text = spell.visit(param)
    if param.name:
        text = text.rsplit(param.name, 1)[0]
    return " ".join(text.replace("*", " * ").split())


def compare(
    rust: list[Function], cdef: list[Function], symbol: str, ffi_rs: Path, wrapper: Path
) -> list[Finding]:
    """Each way the cdef's ``symbol`` differs from ffi.rs's, both sides named."""
    ours = {f.name: f for f in rust}
    theirs = {f.name: f for f in cdef}
    if symbol not in ours:
        return [
            Finding(ffi_rs, 0, f"ffi.rs exports no `{symbol}` (it exports {', '.join(ours) or 'nothing'})")
        ]
    if symbol not in theirs:
        return [
            Finding(
                wrapper, 0, f"_FFI_CDEF declares no `{symbol}` (it declares {', '.join(theirs) or 'nothing'})"
            )
        ]
    r, c = ours[symbol], theirs[symbol]
    found = []
    if _norm(r.returns) != _norm(c.returns):
        found.append(
            Finding(wrapper, c.line, f"`{symbol}` returns {c.returns} in the cdef, {r.returns} in ffi.rs")
        )
    if len(r.params) != len(c.params):
        found.append(
            Finding(
                wrapper,
                c.line,
                f"`{symbol}` takes {len(c.params)} parameters in the cdef, {len(r.params)} in ffi.rs",
            )
        )
    for i, (rp, cp) in enumerate(zip(r.params, c.params, strict=False), start=1):
        if _norm(rp.ctype) != _norm(cp.ctype):
            found.append(
                Finding(
                    wrapper,
                    cp.line,
                    f"parameter {i} `{cp.name}` is `{cp.ctype}` in the cdef, "
                    f"`{rp.name}: {rp.ctype}` in ffi.rs (line {rp.line})",
                )  # fmt: skip
            )
        elif rp.name != cp.name:
            found.append(
                Finding(
                    wrapper,
                    cp.line,
                    f"parameter {i} is `{cp.name}` in the cdef, `{rp.name}` in ffi.rs "
                    f"(line {rp.line}): the same type, so a swap would pass unseen",
                )  # fmt: skip
            )
    return found


def _norm(ctype: str) -> str:
    return "".join(ctype.split())
