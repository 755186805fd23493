"""Fixtures shared by the validator tests: a fake port out-folder and a tiny ELF library."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

OP = "demo_op"
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")

# A made-up launcher in the house style; only the validator's text checks matter here.
FFI_MACROS = """\
// launcher for demo_op
use crate::ffi_util::{rc, TensorDesc};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cutile_demo_op(
    out: *const TensorDesc,
    inp: *const TensorDesc,
    num_cta_in_cga: i32,
    device_id: i32,
    raw_stream: u64,
) -> i32 {
    crate::deref_descs!(out_d = out, in_d = inp);
    crate::setup_device_stream!(device, stream, device_id, raw_stream);
    let x = unsafe { borrow_tensor::<f32>(in_d) };
    rc::OK
}
"""

FFI_EXPLICIT = """\
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cutile_demo_op(x: *const TensorDesc, device_id: i32, raw_stream: u64) -> i32 {
    let device = match Device::new(device_id as usize) { Ok(d) => d, Err(_) => return -4 };
    let p = DevicePointer::<f32>::from_cu_deviceptr(xd.ptr);
    0
}
"""

WRAPPER = """\
from tilegym.backend import register_impl
from tilegym.backend.cutile_rs.utils import bind_kernel_function_cffi, check_rc, make_tensor_desc

_FFI_NAME = "cutile_demo_op"
_FFI_CDEF = "int32_t cutile_demo_op(const TensorDesc* out, const TensorDesc* inp, int32_t n, int32_t d, uint64_t s);"


@register_impl("demo_op", backend="cutile-rs")
def demo_op(x):
    ffi, fn = bind_kernel_function_cffi(_FFI_NAME, _FFI_CDEF)
    d = make_tensor_desc(ffi, x)
    check_rc(fn(d, d, -1, 0, 0), _FFI_NAME)
    return x
"""

RAW_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0 -- /usr/bin/python3
rootdir: /repo
plugins: timeout-2.3.1
collecting ... collected 2 items / 1 deselected / 1 selected

tests/ops/test_demo_op.py::Test_Demo::test_op[4-float16-cutile_rs] PASSED [100%]

======================= 1 passed, 1 deselected in 3.10s ========================
"""

SO_SOURCE = """\
extern int not_defined_here(int);
int cutile_demo_op(int x) { return not_defined_here(x) + 1; }
int cutile_other(void) { return 0; }
__attribute__((weak)) int cutile_weak(void) { return 2; }
static int cutile_hidden(void) { return 3; }
int cutile_data_object = 7;
int use_hidden(void) { return cutile_hidden(); }
"""


def build_so(dest: Path, source: str = SO_SOURCE) -> Path:
    src = dest.parent / (dest.name + ".c")
    src.write_text(source)
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(dest), str(src)], check=True, capture_output=True)
    return dest


def make_port(tmp_path: Path, *, so: bool = True) -> tuple[Path, Path, Path | None]:
    """A complete, passing out folder and checkout. Returns (out_dir, repo, so_path)."""
    out_dir = tmp_path / "out" / OP
    (out_dir / "reports" / "agent_logs").mkdir(parents=True)
    (out_dir / "reference").mkdir()
    (out_dir / "reports" / "correctness.md").write_text(
        "VERDICT: ALL_PASS\n\n# Agent D Report\n\n| Test | Config | Result | Error | known_gaps |\n"
    )
    (out_dir / "reports" / "agent_logs" / "agent_d.md").write_text("first build and first pytest passed\n")
    (out_dir / "correctness_cutile_rs.txt").write_text(RAW_LOG)
    (out_dir / "ffi.rs").write_text(FFI_MACROS)
    (out_dir / "reference" / "analysis.json").write_text(json.dumps({"op": OP, "autotune_configs": []}))

    repo = tmp_path / "repo"
    crs = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    crs.mkdir(parents=True)
    (crs / f"{OP}.py").write_text(WRAPPER)
    (repo / "src" / "tilegym" / "ops" / "__init__.py").write_text(
        "try:\n    from . import cutile_rs\nexcept ImportError:\n    pass\n"
    )
    (repo / "src" / "tilegym" / "backend").mkdir(parents=True)
    (repo / "src" / "tilegym" / "backend" / "selector.py").write_text('BACKENDS = ["cutile", "cutile-rs"]\n')
    (repo / "tests" / "ops").mkdir(parents=True)
    (repo / "tests" / "ops" / f"test_{OP}.py").write_text('_backends = ["cutile", "cutile-rs"]\n')
    so_path = None
    if so:
        rel = crs / "cutile_kernels" / "target" / "release"
        rel.mkdir(parents=True)
        so_path = build_so(rel / "libcutile_kernels.so")
    return out_dir, repo, so_path


def fails(run) -> list[str]:
    return [ln for ln in run.output.splitlines() if ln.startswith("FAIL: ") and "issue(s)" not in ln]
