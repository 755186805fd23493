"""bot.validator: the built-in Agent D checks, the ELF symbol reader and the repo-script runner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from bot import validator as V

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


# --------------------------------------------------------------------------- ELF


@needs_cc
def test_exported_functions_reads_dynsym(tmp_path):
    so = build_so(tmp_path / "libx.so")
    names = V.exported_functions(so)
    assert "cutile_demo_op" in names and "cutile_other" in names
    assert "not_defined_here" not in names  # undefined reference, an import
    assert "cutile_data_object" not in names  # an object, not a function
    assert "cutile_weak" not in names  # nm -D prints "W", not "T"
    assert "cutile_hidden" not in names  # static: not in .dynsym
    assert names == sorted(names)
    # nm agrees, where it is installed
    nm = shutil.which("nm")
    if nm:
        listing = subprocess.run([nm, "-D", str(so)], capture_output=True, text=True, check=True).stdout
        t_syms = sorted(ln.split()[-1] for ln in listing.splitlines() if " T " in ln)
        assert names == t_syms


def test_exported_functions_errors(tmp_path):
    bad = tmp_path / "not_elf.so"
    bad.write_text("hello")
    with pytest.raises(ValueError):
        V.exported_functions(bad)
    with pytest.raises(OSError):
        V.exported_functions(tmp_path / "absent.so")


# --------------------------------------------------------------------------- validate: passing


@needs_cc
def test_complete_port_passes(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 0, run.output
    lines = run.output.splitlines()
    assert lines[-2:] == ["---", "PASS"]
    assert not fails(run)
    assert all(ln.startswith(("OK: ", "WARN: ", "---", "PASS")) for ln in lines)
    assert "OK: ffi.rs builds Device from device_id (multi-GPU correct)" in lines
    assert any(ln.startswith("OK: libcutile_kernels.so") and "cutile_demo_op" in ln for ln in lines)
    assert (
        run.command == f"agent-d validate {OP} --repo {repo} --out {out_dir.parent}"
    )  # default .so: no --so
    other = tmp_path / "elsewhere" / "libcutile_kernels.so"
    other.parent.mkdir()
    shutil.copyfile(so, other)
    assert V.validate(out_dir, OP, repo, other).command.endswith(f" --so {other}")


@needs_cc
def test_so_found_in_checkout_when_not_given(tmp_path):
    out_dir, repo, _ = make_port(tmp_path)
    run = V.validate(out_dir, OP, repo, None)
    assert run.exit_code == 0, run.output
    assert "--so" not in run.command


@needs_cc
def test_explicit_style_ffi_passes(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "ffi.rs").write_text(FFI_EXPLICIT)
    (out_dir / "reference" / "analysis.json").write_text("{}")
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 0, run.output


@needs_cc
def test_output_is_deterministic(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    assert V.validate(out_dir, OP, repo, so) == V.validate(out_dir, OP, repo, so)


# --------------------------------------------------------------------------- validate: ffi.rs


@needs_cc
@pytest.mark.parametrize(
    "bad", ["std::mem::forget(t);", "let s = std::slice::from_raw_parts(p, n);", "transmute"]
)
def test_banned_calls_in_ffi_fail(tmp_path, bad):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "ffi.rs").write_text(FFI_MACROS + bad + "\n")
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 1
    assert len(fails(run)) == 1 and "ffi.rs uses op-level" in fails(run)[0]
    assert run.output.rstrip().endswith("FAIL: 1 issue(s)")


@needs_cc
@pytest.mark.parametrize(
    "old, new, expect",
    [
        ("*const TensorDesc", "*const u8", "'*const TensorDesc'"),
        ("borrow_tensor::<f32>(in_d)", "make(in_d)", "unpacks no descriptor"),
        ("#[unsafe(no_mangle)]", "#[no_mangle]", "#[unsafe(no_mangle)]"),
        (
            "setup_device_stream!(device, stream, device_id, raw_stream)",
            "setup_device_stream!(device, stream, 0, raw_stream)",
            "device from device_id",
        ),
    ],
)
def test_ffi_text_checks(tmp_path, old, new, expect):
    out_dir, repo, so = make_port(tmp_path)
    text = FFI_MACROS.replace(old, new)
    assert text != FFI_MACROS
    (out_dir / "ffi.rs").write_text(text)
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 1
    assert len(fails(run)) == 1 and expect in fails(run)[0], run.output


@needs_cc
@pytest.mark.parametrize(
    "call",
    [
        "DevicePointer::from_cu_deviceptr(x_d.ptr)",
        "DevicePointer::<$E>::from_cu_deviceptr(x_d.ptr)",
        "DevicePointer::<f32>::from_cu_deviceptr(x_d.ptr)",
        "borrow_tensor::<i32>(idx_d)",
    ],
)
def test_unpack_forms_accepted(tmp_path, call):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "ffi.rs").write_text(FFI_MACROS.replace("borrow_tensor::<f32>(in_d)", call))
    assert V.validate(out_dir, OP, repo, so).exit_code == 0


def test_device_from_argument_forms():
    assert V.device_from_argument("let d = Device::new(device_id as usize);")
    assert V.device_from_argument("Device::new( device_id.max(0) as usize)")
    assert V.device_from_argument("crate::setup_device_stream!(dev, strm, device_id, raw_stream);")
    assert V.device_from_argument("setup_device_stream!(dev, strm, device_id.max(0), raw_stream)")
    assert not V.device_from_argument("crate::setup_device_stream!(dev, strm, 0, raw_stream);")
    assert not V.device_from_argument("Device::new(0)")
    assert not V.device_from_argument("let my_device_id = 3; Device::new(my_device_id)")


@needs_cc
def test_hard_coded_device_zero_is_a_warning(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "ffi.rs").write_text(FFI_MACROS + "// fallback: Device::new(0)\n")
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 0
    assert "WARN: ffi.rs contains a hard-coded Device::new(0)" in run.output


@needs_cc
def test_missing_ffi_copy_fails(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "ffi.rs").unlink()
    run = V.validate(out_dir, OP, repo, so)
    assert [f.split(":")[1].strip() for f in fails(run)] == ["ffi.rs missing"]


@needs_cc
def test_num_cta_in_cga_needed_when_analysis_tunes_it(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "reference" / "analysis.json").write_text(json.dumps({"configs": [{"num_ctas": 2}]}))
    (out_dir / "ffi.rs").write_text(FFI_MACROS.replace("num_cta_in_cga", "ctas"))
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 1 and "does not apply it" in fails(run)[0]
    (out_dir / "ffi.rs").write_text(FFI_MACROS)
    assert V.validate(out_dir, OP, repo, so).exit_code == 0


# --------------------------------------------------------------------------- validate: reports and log


@needs_cc
@pytest.mark.parametrize(
    "first", ["VERDICT: BLOCKED", "VERDICT: PASS", "verdict: ALL_PASS", "VERDICT: ALL_PASS ", "# Report"]
)
def test_bad_first_line(tmp_path, first):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "reports" / "correctness.md").write_text(first + "\n| Test | x |\n")
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 1
    assert fails(run) == [f"FAIL: first line must be 'VERDICT: ALL_PASS' or 'VERDICT: FAIL', got: {first}"]


@needs_cc
def test_crlf_first_line_fails_like_head(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "reports" / "correctness.md").write_bytes(b"VERDICT: FAIL\r\n| Test |\r\n")
    assert V.validate(out_dir, OP, repo, so).exit_code == 1


@needs_cc
def test_missing_report_does_not_stop_the_other_checks(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "reports" / "correctness.md").write_text("")
    (out_dir / "reports" / "agent_logs" / "agent_d.md").unlink()
    run = V.validate(out_dir, OP, repo, so)
    assert fails(run) == [
        "FAIL: correctness.md missing or empty",
        "FAIL: agent_d.md log missing (reports/agent_logs/agent_d.md)",
    ]
    assert "OK: ffi.rs present (Agent D)" in run.output
    assert run.output.rstrip().endswith("FAIL: 2 issue(s)")


@needs_cc
def test_missing_table(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "reports" / "correctness.md").write_text("VERDICT: FAIL\n\n|Test|Config|\n")
    assert fails(V.validate(out_dir, OP, repo, so)) == ["FAIL: missing results table"]


@needs_cc
@pytest.mark.parametrize(
    "log, expect",
    [
        (None, "correctness_cutile_rs.txt missing"),
        ("", "correctness_cutile_rs.txt empty"),
        (RAW_LOG.replace("PASSED", "OK"), "no PASSED/FAILED/SKIPPED"),
        (
            "\n".join(
                ln for ln in RAW_LOG.splitlines() if not ln.startswith(("platform", "rootdir", "plugins"))
            ),
            "no real-pytest framework markers",
        ),
        (RAW_LOG + "tests/ops/test_demo_op.py::t[1] FAILED - max_diff=0.5 > 1e-2\n", "hand-made"),
        (RAW_LOG + "    if diff > 1e-2: print('FAILED')\n", "hand-made"),
    ],
)
def test_raw_log_checks(tmp_path, log, expect):
    out_dir, repo, so = make_port(tmp_path)
    raw = out_dir / "correctness_cutile_rs.txt"
    if log is None:
        raw.unlink()
    else:
        raw.write_text(log)
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 1
    assert len(fails(run)) == 1 and expect in fails(run)[0], run.output


@needs_cc
def test_raw_log_counts_in_ok_line(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    run = V.validate(out_dir, OP, repo, so)
    assert "OK: correctness_cutile_rs.txt (9 lines, passed=1 failed=0 skipped=0)" in run.output


# --------------------------------------------------------------------------- validate: the .so


@needs_cc
def test_symbol_missing_from_so(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    build_so(so, "int cutile_something_else(void) { return 0; }\n")
    run = V.validate(out_dir, OP, repo, so)
    assert len(fails(run)) == 1 and "does not export cutile_demo_op" in fails(run)[0]


@needs_cc
def test_symbol_only_imported_is_not_exported(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    build_so(so, "extern int cutile_demo_op(int);\nint caller(int x) { return cutile_demo_op(x); }\n")
    run = V.validate(out_dir, OP, repo, so)
    assert len(fails(run)) == 1 and "does not export cutile_demo_op" in fails(run)[0]


def test_no_so_anywhere(tmp_path):
    out_dir, repo, _ = make_port(tmp_path, so=False)
    run = V.validate(out_dir, OP, repo, None)
    assert len(fails(run)) == 1 and "libcutile_kernels.so missing" in fails(run)[0]


def test_so_not_elf(tmp_path):
    out_dir, repo, _ = make_port(tmp_path, so=False)
    fake = tmp_path / "libcutile_kernels.so"
    fake.write_text("not an elf")
    run = V.validate(out_dir, OP, repo, fake)
    assert len(fails(run)) == 1 and "not a readable ELF file" in fails(run)[0]


# --------------------------------------------------------------------------- validate: wrapper and wiring


@needs_cc
def test_wrapper_found_by_register_impl(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    crs = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    (crs / f"{OP}.py").rename(crs / "other_name.py")
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 0, run.output
    assert "other_name.py" in run.output
    (crs / "other_name.py").write_text(WRAPPER.replace("demo_op", "unrelated"))
    run = V.validate(out_dir, OP, repo, so)
    assert fails(run) == [f"FAIL: cutile_rs wrapper for {OP} not found under ops/cutile_rs/"]


@needs_cc
def test_wrapper_without_underscores_found(tmp_path):
    _, repo, _ = make_port(tmp_path)
    crs = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    (crs / "sub").mkdir()
    (crs / f"{OP}.py").rename(crs / "sub" / "demoop.py")
    assert V.find_wrapper(repo, OP) == crs / "sub" / "demoop.py"


@needs_cc
@pytest.mark.parametrize(
    "old, new, expect",
    [
        ("_FFI_CDEF", "_SIG", None),  # bind_kernel_function_cffi alone is enough (the script's OR)
        ("make_tensor_desc", "pack", "make_tensor_desc"),
        ("check_rc", "verify", "check_rc"),
        ("return x", "fn.argtypes = []\n    return x", "ctypes"),
        ("return x", "_FFI_ARGTYPES = []\n    return x", "ctypes"),
    ],
)
def test_wrapper_checks(tmp_path, old, new, expect):
    out_dir, repo, so = make_port(tmp_path)
    w = repo / "src" / "tilegym" / "ops" / "cutile_rs" / f"{OP}.py"
    w.write_text(WRAPPER.replace(old, new))
    run = V.validate(out_dir, OP, repo, so)
    if expect is None:
        assert run.exit_code == 0, run.output
    else:
        assert len(fails(run)) == 1 and expect in fails(run)[0], run.output


@needs_cc
def test_wrapper_without_any_cffi_marker(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    w = repo / "src" / "tilegym" / "ops" / "cutile_rs" / f"{OP}.py"
    w.write_text(WRAPPER.replace("_FFI_CDEF", "_SIG").replace("bind_kernel_function_cffi", "bind"))
    run = V.validate(out_dir, OP, repo, so)
    assert len(fails(run)) == 1 and "cffi boundary" in fails(run)[0]


@needs_cc
@pytest.mark.parametrize(
    "analysis, uses, ok",
    [
        ({"autotune_configs": [{"TILE": 64}]}, False, False),
        ({"autotune_backends": ["cutile"]}, False, False),
        ({"autotune_configs": [{"TILE": 64}]}, True, True),
        ({"autotune_configs": [], "autotune_backends": []}, False, True),
        ({"autotune_configs": None}, False, True),
    ],
)
def test_autotune_requirement(tmp_path, analysis, uses, ok):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "reference" / "analysis.json").write_text(json.dumps(analysis))
    if uses:
        w = repo / "src" / "tilegym" / "ops" / "cutile_rs" / f"{OP}.py"
        w.write_text(WRAPPER + "\nfrom tilegym.backend.cutile_rs.autotuner import autotune_launch\n")
    run = V.validate(out_dir, OP, repo, so)
    assert (run.exit_code == 0) is ok, run.output
    if not ok:
        assert "autotune_launch" in fails(run)[0]


@needs_cc
def test_broken_analysis_json_is_a_warning(tmp_path):
    out_dir, repo, so = make_port(tmp_path)
    (out_dir / "reference" / "analysis.json").write_text("{not json")
    run = V.validate(out_dir, OP, repo, so)
    assert run.exit_code == 0 and "WARN: reference/analysis.json unreadable" in run.output


@needs_cc
@pytest.mark.parametrize(
    "rel, text, expect",
    [
        ("src/tilegym/ops/__init__.py", "from . import cutile\n", "ops/__init__.py"),
        ("src/tilegym/backend/selector.py", "BACKENDS = ['cutile']\n", "selector.py"),
        (f"tests/ops/test_{OP}.py", "_backends = ['cutile']\n", f"test_{OP}.py"),
    ],
)
def test_wiring_checks(tmp_path, rel, text, expect):
    out_dir, repo, so = make_port(tmp_path)
    (repo / rel).write_text(text)
    run = V.validate(out_dir, OP, repo, so)
    assert len(fails(run)) == 1 and expect in fails(run)[0], run.output
    (repo / rel).unlink()
    assert len(fails(V.validate(out_dir, OP, repo, so))) == 1


@needs_cc
def test_no_checkout_warns_and_fails_wrapper(tmp_path):
    out_dir, _, so = make_port(tmp_path)
    run = V.validate(out_dir, OP, tmp_path / "nowhere", so)
    assert "WARN: " in run.output and "registration checks skipped" in run.output
    assert fails(run) == [f"FAIL: cutile_rs wrapper for {OP} not found under ops/cutile_rs/"]


def test_validate_never_raises_on_empty_dirs(tmp_path):
    run = V.validate(tmp_path / "nothing", OP, tmp_path / "norepo", None)
    assert run.exit_code == 1
    assert run.output.splitlines()[-2] == "---"
    assert run.output.splitlines()[-1].startswith("FAIL: ")


# --------------------------------------------------------------------------- the repo's own script


def _fake_script(repo: Path, body: str, under: str = ".agents/skills") -> Path:
    path = repo / under / V.SKILL / "scripts" / "validate_agent_d.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def test_repo_validator_absent(tmp_path):
    assert V.run_repo_validator(tmp_path, tmp_path / "out", OP) is None


@pytest.mark.parametrize("under", [".agents/skills", "skills"])
def test_repo_validator_runs_with_env(tmp_path, under):
    repo = tmp_path / "repo"
    _fake_script(
        repo,
        textwrap.dedent(
            """\
            echo "kernel=$1"
            echo "out=$CUTILE_KERNEL_OUT_ROOT"
            echo "tg=$TILEGYM_PATH"
            echo "cwd=$(pwd)"
            echo "to stderr" >&2
            exit 3
            """
        ),
        under,
    )
    run = V.run_repo_validator(repo, tmp_path / "out", OP)
    assert run is not None and run.exit_code == 3
    r = repo.resolve()
    assert run.output.splitlines() == [
        f"kernel={OP}",
        f"out={(tmp_path / 'out').resolve()}",
        f"tg={r}",
        f"cwd={r}",
        "to stderr",
    ]
    assert f"bash {under}/{V.SKILL}/scripts/validate_agent_d.sh {OP} 2>&1" in run.command
    assert f"CUTILE_KERNEL_OUT_ROOT={(tmp_path / 'out').resolve()}" in run.command


def test_repo_validator_prefers_agents_dir(tmp_path):
    _fake_script(tmp_path, "echo agents\n", ".agents/skills")
    _fake_script(tmp_path, "echo plain\n", "skills")
    run = V.run_repo_validator(tmp_path, tmp_path, OP)
    assert run.output == "agents\n" and run.exit_code == 0


def test_repo_validator_timeout_kills_the_group(tmp_path):
    marker = tmp_path / "late"
    _fake_script(tmp_path, f"echo started\n(sleep 5; touch {marker}) &\nsleep 30\n")
    t0 = time.monotonic()
    run = V.run_repo_validator(tmp_path, tmp_path, OP, timeout_s=1)
    assert time.monotonic() - t0 < 10
    assert run.exit_code == 124
    assert run.output.startswith("started\n") and "timed out after 1 s" in run.output
    time.sleep(5.5)
    assert not marker.exists()  # the background child died with the group


# --------------------------------------------------------------------------- parity with the real script

UPSTREAM = os.environ.get("AGENT_D_UPSTREAM_VALIDATOR", "")


@needs_cc
@pytest.mark.skipif(
    not (UPSTREAM and Path(UPSTREAM).is_file() and shutil.which("nm")),
    reason="set AGENT_D_UPSTREAM_VALIDATOR to a local validate_agent_d.sh",
)
@pytest.mark.parametrize(
    "mutate",
    [
        "none",
        "forget",
        "turbofish_only",
        "macro_only",
        "no_header",
        "no_table",
        "bad_first",
        "no_symbol",
        "no_wrapper",
        "ctypes",
        "autotune",
        "cga",
        "no_selector",
        "no_test_wiring",
    ],
)
def test_same_verdict_as_the_upstream_script(tmp_path, mutate):
    """Same exit code and FAIL count as TileGym's own script on the same folders (a copy of the
    script is made in tmp only for the run; it is never part of this repository)."""
    out_dir, repo, so = make_port(tmp_path)
    plain = FFI_EXPLICIT.replace("DevicePointer::<f32>::", "DevicePointer::")  # the script's literal form
    (out_dir / "ffi.rs").write_text(plain + "// num_cta_in_cga\n")
    w = repo / "src" / "tilegym" / "ops" / "cutile_rs" / f"{OP}.py"
    if mutate == "forget":
        (out_dir / "ffi.rs").write_text(plain + "std::mem::forget(x);\n")
    elif mutate == "turbofish_only":  # the one known difference: ours accepts, the script does not
        (out_dir / "ffi.rs").write_text(FFI_EXPLICIT + "// num_cta_in_cga\n")
    elif mutate == "macro_only":  # the other known difference: setup_device_stream! hides Device::new
        (out_dir / "ffi.rs").write_text(FFI_MACROS)
    elif mutate == "no_header":
        (out_dir / "correctness_cutile_rs.txt").write_text("t.py::a PASSED\n")
    elif mutate == "no_table":
        (out_dir / "reports" / "correctness.md").write_text("VERDICT: ALL_PASS\n")
    elif mutate == "bad_first":
        (out_dir / "reports" / "correctness.md").write_text("VERDICT: BLOCKED\n| Test |\n")
    elif mutate == "no_symbol":
        build_so(so, "int cutile_zzz(void) { return 0; }\n")
    elif mutate == "no_wrapper":
        w.unlink()
    elif mutate == "ctypes":
        w.write_text(WRAPPER + "lib.fn.argtypes = []\n")
    elif mutate == "autotune":
        (out_dir / "reference" / "analysis.json").write_text(json.dumps({"autotune_configs": [{"T": 1}]}))
    elif mutate == "cga":
        (out_dir / "reference" / "analysis.json").write_text(json.dumps({"num_ctas": 2}))
        (out_dir / "ffi.rs").write_text(plain)
    elif mutate == "no_selector":
        (repo / "src" / "tilegym" / "backend" / "selector.py").write_text("x = 1\n")
    elif mutate == "no_test_wiring":
        (repo / "tests" / "ops" / f"test_{OP}.py").write_text("x = 1\n")
    script = repo / ".agents" / "skills" / V.SKILL / "scripts" / "validate_agent_d.sh"
    script.parent.mkdir(parents=True)
    shutil.copyfile(UPSTREAM, script)
    theirs = V.run_repo_validator(repo, out_dir.parent, OP)
    ours = V.validate(out_dir, OP, repo, so)
    assert theirs is not None
    if mutate in ("turbofish_only", "macro_only"):
        assert (ours.exit_code, theirs.exit_code) == (0, 1), (ours.output, theirs.output)
        return
    assert ours.exit_code == theirs.exit_code, (ours.output, theirs.output)
    assert ours.output.splitlines()[-1] == theirs.output.splitlines()[-1], (ours.output, theirs.output)


def test_repo_validator_nm_pipe_does_not_fake_a_missing_symbol(tmp_path):
    """TileGym's script pipes `nm -D` into `grep -q` under pipefail; early grep exit must not fail it."""
    import shutil as _shutil

    from bot.validator import run_repo_validator

    if not _shutil.which("cc") or not _shutil.which("nm"):
        pytest.fail("cc and nm are needed (binutils, a C compiler)")
    src = tmp_path / "many.c"
    # The wanted symbol sorts first; thousands after it keep nm writing when grep has already quit.
    src.write_text("int aaa_wanted(void){return 1;}\n" + "".join(f"int f{i}(void){{return {i};}}\n" for i in range(20000)))
    so = tmp_path / "libmany.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    repo = tmp_path / "repo"
    script = repo / "skills/tilegym-converting-cutile-triton-to-cutile-rs/scripts/validate_agent_d.sh"
    script.parent.mkdir(parents=True)
    script.write_text(
        "set -uo pipefail\n"
        f'if nm -D "{so}" | grep -q " T aaa_wanted$"; then echo OK; exit 0; else echo "FAIL: missing"; exit 1; fi\n'
    )
    runs = [run_repo_validator(repo, tmp_path / "out", "x") for _ in range(5)]
    assert [r.exit_code for r in runs] == [0] * 5, [r.output for r in runs]
    assert "PATH=" in runs[0].command  # the shim is part of the command shown in the block
