"""Stage "ABI smoke": call the built symbol through the generated ``_FFI_CDEF``, no GPU needed.

The wrapper's cdef is loaded with cffi in a child process (an abort there cannot take the
bot down), every descriptor is NULL, and the launcher must answer the null-pointer code -5
before touching CUDA. That proves the symbol, the cdef and the Rust signature agree.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from bot import sandbox
from bot.emit.cdef import parse_cdef

NULL_PTR_RC = -5
# docs/specification.md, "The C ABI": the descriptor every tensor crosses as (used when the checkout has none).
SPEC_TENSORDESC_CDEF = """
typedef struct {
    uint64_t ptr;
    int32_t  ndim;
    int64_t  shape[5];
    int64_t  strides[5];
    int32_t  dtype;
} TensorDesc;
"""

_CHILD = r"""
import json, sys
from cffi import FFI
spec = json.loads(sys.argv[1])
ffi = FFI()
ffi.cdef(spec["typedef"] + spec["cdef"])
lib = ffi.dlopen(spec["so"])
args = [ffi.NULL if kind == "const TensorDesc*" else 0 for kind in spec["kinds"]]
print(json.dumps({"rc": getattr(lib, spec["symbol"])(*args)}))
"""


def module_string(path: Path, name: str) -> str | None:
    """The value of a module-level string constant, read with ``ast`` (the module is not imported)."""
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return None


def smoke(so_path: Path, wrapper: Path, runtime_utils: Path, timeout: float = 60) -> tuple[bool, str]:
    cdef = module_string(wrapper, "_FFI_CDEF")
    if cdef is None:
        return False, f"{wrapper.name} has no _FFI_CDEF string"
    try:
        symbol, params = parse_cdef(cdef)
    except ValueError as exc:
        return False, f"_FFI_CDEF: {exc}"
    typedef = module_string(runtime_utils, "_TENSORDESC_CDEF") or SPEC_TENSORDESC_CDEF
    spec = {
        "so": str(so_path),
        "cdef": cdef,
        "typedef": typedef,
        "symbol": symbol,
        "kinds": [k for _, k in params],
    }
    try:
        argv = sandbox.wrap([sys.executable, "-c", _CHILD, json.dumps(spec)], so_path.parent)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"{symbol}(NULL, ...) did not return within {timeout:.0f} s"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return False, f"calling {symbol} through cffi failed (exit {proc.returncode}): {last}"
    rc = json.loads(proc.stdout.strip().splitlines()[-1])["rc"]
    if rc != NULL_PTR_RC:
        return False, f"{symbol}(NULL descriptors) returned {rc}, expected {NULL_PTR_RC} (null descriptor)"
    return True, f"{symbol}(NULL descriptors) returned {NULL_PTR_RC} through the generated _FFI_CDEF"
