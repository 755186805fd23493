"""What a generated file may hold: an allow-list per file kind, checked before anything is applied.

The typed contract (``bot/infer/contract/typed.py``) keeps contract text from becoming code; this
check holds the output itself to what the emitters write, so a way around the first (a name of
kernel.rs, a reference's line carried over, a bug of ours) is still stopped. It runs in the port
and again in the finalizer, whose regeneration goes through the same stage before it pushes.

- ``ffi.rs`` (read as tokens by ``kernel-reader --contents``, macro bodies included): the macros
  of ``RUST_MACROS``, paths rooted in ``RUST_ROOTS`` or the kernel's own modules (of ``std`` and
  ``core`` only ``STD_MODULES``), the attributes of ``RUST_ATTRIBUTES``, no ``mod x;``, no
  ``extern crate``, no ``extern`` block;
- a generated ``.py`` (Python's own parser): imports rooted in ``PY_IMPORT_ROOTS`` (what TileGym's
  references import), no call of ``PY_REFUSED_CALLS``, no dunder attribute but ``PY_DUNDERS``, none
  of ``PY_REFUSED_ATTRIBUTES`` (loaders of code or pickles).

A finding is ``BLOCKED (host)`` naming the file, the line and what was found; nothing is applied.
"""

from __future__ import annotations

import ast
import json
import subprocess
from dataclasses import dataclass

from bot.errors import Blocked

RUST_MACROS = {"eprintln", "vec", "stringify", "macro_rules", "dispatch", "matches"}
RUST_MACROS |= {
    f"crate::{m}" for m in ("compile_options", "deref_descs", "dispatch_by_dtype", "resolve_dtype")
}
RUST_ROOTS = {"rc", "crate", "cutile", "cuda_async", "cuda_core", "std", "core", "Self", "self", "super"}
RUST_ROOTS |= {"CompileOptions", "Device", "DevicePointer", "ManuallyDrop", "Stream", "TensorDesc"}
RUST_ROOTS |= {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "usize", "isize", "f32", "f64", "bool"}
STD_MODULES = {"panic", "ffi", "mem", "ptr", "sync", "cmp", "convert", "num", "slice", "marker", "fmt"}
RUST_ATTRIBUTES = {"doc", "allow", "unsafe(no_mangle)", "inline", "repr", "macro_export", "rustfmt::skip"}

PY_IMPORT_ROOTS = {"torch", "math", "types", "typing", "collections", "functools", "dataclasses", "operator"}
PY_IMPORT_ROOTS |= {"itertools", "contextlib", "warnings", "enum", "numbers", "numpy", "transformers"}
PY_IMPORT_ROOTS |= {"tilegym", "cffi", "__future__"}
PY_REFUSED_CALLS = {"eval", "exec", "compile", "__import__", "open", "breakpoint", "input", "globals"}
PY_REFUSED_CALLS |= {"memoryview", "setattr", "delattr"}
PY_DUNDERS = {
    "__name__",
    "__qualname__",
    "__doc__",
    "__init__",
    "__call__",
    "__enter__",
    "__exit__",
    "__repr__",
}
PY_REFUSED_ATTRIBUTES = {
    "torch.load", "torch.save", "torch.hub", "torch.package", "torch.ops.load_library",
    "torch.classes.load_library", "torch.jit.load", "torch.utils.cpp_extension", "numpy.load",
    "numpy.save", "numpy.fromfile", "numpy.ctypeslib",
}  # fmt: skip
MAX_SHOWN = 3


@dataclass(frozen=True)
class Outside:
    """One thing a generated file holds that its kind may not."""

    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def check(files: list[tuple[str, str]], kernel_modules: set[str], reader: str | None = None) -> None:
    """Raise ``Blocked`` (host) when a generated file (``(path, text)``) holds what its kind may not."""
    found: list[Outside] = []
    for path, text in files:
        if path.endswith(".py"):
            found += python_outside(path, text)
        elif path.endswith(".rs"):
            found += rust_outside(path, text, kernel_modules, reader)
    if found:
        shown = "; ".join(str(x) for x in found[:MAX_SHOWN])
        more = f" (+{len(found) - MAX_SHOWN} more)" if len(found) > MAX_SHOWN else ""
        raise Blocked(
            "host",
            f"a generated file holds what agent-d's files never do: {shown}{more}; nothing was applied",
            host_fix="if the line comes from the reference op's host code, it is carried into the wrapper as "
            "written: keep the reference to what a host function needs; otherwise report it to agent-d's "
            "maintainers",
        )


def python_outside(path: str, text: str) -> list[Outside]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return [Outside(path, exc.lineno or 0, f"does not parse ({exc.msg})")]
    found: list[Outside] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            for module in _imported(node):
                if module.split(".")[0] not in PY_IMPORT_ROOTS:
                    found.append(Outside(path, line, f"imports {module}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in PY_REFUSED_CALLS
        ):
            found.append(Outside(path, line, f"calls {node.func.id}()"))
        elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id not in PY_DUNDERS:
            found.append(Outside(path, line, f"reads {node.id}"))
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if node.attr.startswith("__") and node.attr not in PY_DUNDERS:
                found.append(Outside(path, line, f"reads .{node.attr}"))
            elif dotted in PY_REFUSED_ATTRIBUTES:
                found.append(Outside(path, line, f"reads {dotted}"))
    return found


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        return ["tilegym"]  # relative: a module of the package itself
    return [node.module or ""]


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def rust_outside(path: str, text: str, kernel_modules: set[str], reader: str | None = None) -> list[Outside]:
    held = _rust_contents(text, reader)
    if "error" in held:
        return [Outside(path, 0, f"not read as Rust tokens ({held['error']})")]
    found = [
        Outside(path, line, f"invokes {name}!") for name, line in held["macros"] if name not in RUST_MACROS
    ]
    for name, line in held["paths"]:
        root, _, rest = name.partition("::")
        second = rest.split("::")[0]
        if root not in RUST_ROOTS | kernel_modules or (root in ("std", "core") and second not in STD_MODULES):
            found.append(Outside(path, line, f"names {name}"))
    found += [
        Outside(path, line, f"has the attribute #[{name}]")
        for name, line in held["attributes"]
        if name not in RUST_ATTRIBUTES
    ]
    found += [
        Outside(path, line, f"has an item that reaches outside it: {kind}") for kind, line in held["items"]
    ]
    return found


def _rust_contents(text: str, reader: str | None) -> dict:
    """``kernel-reader --contents`` of ``text``, given on stdin: nothing is written to disk first (a
    port with no writable disk left still gets its verdict)."""
    from bot.read.reader import reader_binary

    proc = subprocess.run(
        [reader or str(reader_binary()), "--contents", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
