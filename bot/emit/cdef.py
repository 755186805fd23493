"""The cffi ``_FFI_CDEF`` text, and a mechanical cross-check of it against ``ffi.rs``.

Both files are rendered from the same plan, but the check reads the *rendered* Rust back,
so a drift between the two emitters (or a hand edit) is caught before any build.
"""

from __future__ import annotations

import re

from bot.plan.types import FfiPlan

_RUST_TO_C = {
    "*const TensorDesc": "const TensorDesc*",
    # spelled in full when kernel.rs imports another `TensorDesc` (ffi_imports.imports)
    "*const crate::ffi_util::TensorDesc": "const TensorDesc*",
    "i32": "int32_t",
    "u64": "uint64_t",
    "f32": "float",
}


def render(ffi: FfiPlan) -> str:
    params = ffi.c_params()
    lines = [f"int32_t {ffi.symbol}("]
    for i, (name, ctype) in enumerate(params):
        lines.append(f"    {ctype} {name}" + ("," if i < len(params) - 1 else ");"))
    return "\n".join(lines) + "\n"


def parse_cdef(text: str) -> tuple[str, list[tuple[str, str]]]:
    m = re.search(r"int32_t\s+(\w+)\s*\((.*?)\)\s*;", text, re.S)
    if not m:
        raise ValueError("no `int32_t <symbol>(...);` declaration in the cdef")
    params = []
    for part in m.group(2).split(","):
        part = " ".join(part.split())
        pm = re.fullmatch(r"(const TensorDesc\*|int32_t|uint64_t|float)\s*(\w+)", part)
        if not pm:
            raise ValueError(f"cdef parameter not understood: {part!r}")
        params.append((pm.group(2), pm.group(1)))
    return m.group(1), params


def parse_rust_export(text: str) -> tuple[str, list[tuple[str, str]]]:
    m = re.search(
        r"#\[unsafe\(no_mangle\)\]\s*pub unsafe extern \"C\" fn (\w+)\((.*?)\)\s*->\s*i32", text, re.S
    )
    if not m:
        raise ValueError('no `#[unsafe(no_mangle)] pub unsafe extern "C" fn ...(..) -> i32` in ffi.rs')
    params = []
    for part in m.group(2).split(","):
        part = " ".join(part.split())
        if not part or part.startswith("//"):
            continue
        name, _, rust_ty = part.partition(":")
        rust_ty = rust_ty.strip()
        if rust_ty not in _RUST_TO_C:
            raise ValueError(f"ffi.rs parameter type not in the ABI: {part!r}")
        params.append((name.strip(), _RUST_TO_C[rust_ty]))
    return m.group(1), params


def cross_check(ffi_rs: str, cdef: str) -> list[str]:
    """Differences between the Rust export and the cdef; empty when they agree exactly."""
    problems: list[str] = []
    try:
        rust_sym, rust_params = parse_rust_export(ffi_rs)
        c_sym, c_params = parse_cdef(cdef)
    except ValueError as exc:
        return [str(exc)]
    if rust_sym != c_sym:
        problems.append(f"symbol differs: ffi.rs {rust_sym} vs cdef {c_sym}")
    if len(rust_params) != len(c_params):
        problems.append(f"parameter count differs: ffi.rs {len(rust_params)} vs cdef {len(c_params)}")
    for i, (r, c) in enumerate(zip(rust_params, c_params)):
        if r != c:
            problems.append(f"parameter {i + 1} differs: ffi.rs {r[0]}: {r[1]} vs cdef {c[1]} {c[0]}")
    if rust_params[-2:] != [("device_id", "int32_t"), ("raw_stream", "uint64_t")]:
        problems.append("the last two parameters must be device_id: i32, raw_stream: u64")
    return problems
