"""bot.report.validator: the built-in Agent D checks, the ELF symbol reader and the repo-script runner."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from validator_support import (
    FFI_EXPLICIT,
    FFI_MACROS,
    OP,
    RAW_LOG,
    WRAPPER,
    build_so,
    fails,
    make_port,
    needs_cc,
)

from bot.report import validator as V

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
