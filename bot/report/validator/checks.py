"""The built-in validator's checks, one function each, in ``CHECKS`` in the order their lines are
printed; the rules over ffi.rs's and the wrapper's text are tables (``FFI_RULES``,
``WRAPPER_RULES``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.report.validator.elf import exported_functions
from bot.report.validator.files import SO_NAME, count_lines_with, find_so, find_wrapper, nonempty, read_text
from bot.report.validator.output import Output
from bot.targets.discover import discover
from bot.targets.types import Target

_VERDICT_FIRST_LINE = re.compile(r"^VERDICT: (ALL_PASS|FAIL)$")
_BLOCK_CLASS = re.compile(r"^block_class: (env|host|kernel)\s*$", re.MULTILINE)  # report.py, BLOCKED runs
_HEADER_MARKERS = re.compile(r"^platform [a-z]+ -- Python|^rootdir:|^plugins:", re.MULTILINE)
_HAND_THRESHOLD = re.compile(r"FAILED - max_diff=.*> 1e-2$|if diff > 1e-2", re.MULTILINE)
_TENSOR_DESC_ARG = re.compile(r"\*const\s+TensorDesc")
_UNPACK = re.compile(r"borrow_tensor|DevicePointer(?:::<[^>]*>)?::from_cu_deviceptr")
_BANNED_FFI = re.compile(r"from_raw_parts|mem::forget|transmute")
_UNSAFE_NO_MANGLE = re.compile(r"#\[unsafe\(no_mangle\)\]")
_DEVICE_NEW_ARG = re.compile(r"Device::new\(\s*device_id")
_DEVICE_NEW_ZERO = re.compile(r"Device::new\(\s*0\s*[,)]")
_SETUP_MACRO = re.compile(r"setup_device_stream!\s*[(\[{](?P<args>[^)\]}]*)[)\]}]")
_CDEF = re.compile(r"_FFI_CDEF|bind_kernel_function_cffi")
_MAKE_DESC = re.compile(r"\bmake_tensor_desc\b")
_CHECK_RC = re.compile(r"\bcheck_rc\b")
_CTYPES_ARGTYPES = re.compile(r"_FFI_ARGTYPES|\.argtypes\s*=")
_OPS_INIT_IMPORT = re.compile(r"from\s+\.\s+import\s+cutile_rs|import.*cutile_rs")
_MENTIONS_BACKEND = re.compile(r'"cutile-rs"|cutile_rs')


@dataclass
class Inputs:
    """What the checks read; a check may leave what it found for a later one (``ffi_text``)."""

    base: Path  # <out root>/<op>
    op: str
    repo: Path
    so_path: Path | None
    test_files: list[str] | None
    ffi_text: str | None = None
    analysis: object | None = None
    wired: bool = True  # the checkout has src/tilegym, so its wiring can be checked


def device_from_argument(ffi_text: str) -> bool:
    """True when ffi.rs builds its device from the ``device_id`` argument.

    Either literally ``Device::new(device_id ...)`` or through the checkout's
    ``setup_device_stream!(dev, stream, device_id, raw_stream)`` macro, whose arguments must
    include an expression starting with ``device_id`` (a literal ``0`` there does not count).
    """
    if _DEVICE_NEW_ARG.search(ffi_text):
        return True
    for m in _SETUP_MACRO.finditer(ffi_text):
        args = [a.strip() for a in m.group("args").split(",")]
        if any(re.match(r"device_id\b", a) for a in args):
            return True
    return False


def _load_analysis(path: Path, out: Output) -> object | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        out.warn(f"reference/analysis.json unreadable ({exc.__class__.__name__}); its checks skipped")
        return None


def _correctness_report(i: Inputs, out: Output) -> None:
    report = i.base / "reports" / "correctness.md"
    text = read_text(report) if nonempty(report) else None
    if text is None:
        out.fail("correctness.md missing or empty")
        return
    blocked = _BLOCK_CLASS.search(text)
    out.blocked = blocked.group(1) if blocked else ""
    first = text.split("\n", 1)[0]
    out.check(
        bool(_VERDICT_FIRST_LINE.match(first)),
        f"verdict line: {first}",
        f"first line must be 'VERDICT: ALL_PASS' or 'VERDICT: FAIL', got: {first}",
    )
    out.check("| Test " in text, "has results table", "missing results table")


def _pytest_log(i: Inputs, out: Output) -> None:
    raw = i.base / "correctness_cutile_rs.txt"
    if not raw.is_file():
        out.missing("correctness_cutile_rs.txt missing (pytest did not run)")
        return
    if not nonempty(raw):
        out.fail("correctness_cutile_rs.txt empty")
        return
    log = read_text(raw) or ""
    n_lines = log.count("\n")  # as wc -l counts
    n_pass, n_fail, n_skip = (count_lines_with(log, w) for w in ("PASSED", "FAILED", "SKIPPED"))
    out.ok(f"correctness_cutile_rs.txt ({n_lines} lines, passed={n_pass} failed={n_fail} skipped={n_skip})")
    # On a blocked run pytest may have stopped before its session began (no torch for conftest):
    # then there is no result or header to check, which `missing` reports as not run.
    if n_pass + n_fail + n_skip == 0:
        out.missing("correctness_cutile_rs.txt has no PASSED/FAILED/SKIPPED lines: not pytest output")
    if _HEADER_MARKERS.search(log):
        out.ok("correctness_cutile_rs.txt contains real-pytest framework markers")
    else:
        out.missing(
            "correctness_cutile_rs.txt has no real-pytest framework markers",
            "(no 'platform <os> -- Python ...', 'rootdir: ...' or 'plugins: ...' line;",
            " a hand-made runner or --no-header)",
        )
    if _HAND_THRESHOLD.search(log):
        out.fail(
            "correctness_cutile_rs.txt contains a hand-made absolute-threshold judgment",
            "('max_diff > 1e-2' / 'if diff > 1e-2'): the tests' own comparison must decide",
        )


def _decision_log(i: Inputs, out: Output) -> None:
    out.check(
        nonempty(i.base / "reports" / "agent_logs" / "agent_d.md"),
        "agent_d.md log",
        "agent_d.md log missing (reports/agent_logs/agent_d.md)",
    )


def _ffi_present(i: Inputs, out: Output) -> None:
    ffi = i.base / "ffi.rs"
    if nonempty(ffi):
        out.ok("ffi.rs present (Agent D)")
    else:
        out.missing(f"ffi.rs missing: the C-ABI host launcher belongs at {ffi}")
    i.ffi_text = read_text(ffi) if ffi.is_file() else None


# One row per rule of ffi.rs's text: (holds, OK line, FAIL line, FAIL detail lines).
FFI_RULES: tuple[tuple[Callable[[str], bool], str, str, tuple[str, ...]], ...] = (
    (
        lambda t: bool(_TENSOR_DESC_ARG.search(t)),
        "ffi.rs takes tensors as *const TensorDesc",
        "ffi.rs does not take tensors as '*const TensorDesc'",
        ("(tensors cross the boundary as descriptors, not raw pointer + loose shape/stride args)",),
    ),
    (
        lambda t: bool(_UNPACK.search(t)),
        "ffi.rs unpacks descriptors via borrow_tensor / DevicePointer::from_cu_deviceptr",
        "ffi.rs unpacks no descriptor via borrow_tensor::<E> or DevicePointer::from_cu_deviceptr",
        (),
    ),
    (
        lambda t: not _BANNED_FFI.search(t),
        "no op-level from_raw_parts / mem::forget / transmute in ffi.rs",
        "ffi.rs uses op-level {banned}",
        (
            "(only ffi_util::borrow_tensor may build a Tensor from raw parts; its ManuallyDrop",
            " already keeps PyTorch's memory alive)",
        ),
    ),
    (
        lambda t: bool(_UNSAFE_NO_MANGLE.search(t)),
        "ffi.rs uses #[unsafe(no_mangle)] (Rust 2024 export)",
        "ffi.rs does not use #[unsafe(no_mangle)] (plain #[no_mangle] does not build in edition 2024)",
        (),
    ),
    (
        device_from_argument,
        "ffi.rs builds Device from device_id (multi-GPU correct)",
        "ffi.rs does not build its device from device_id",
        ("(expected Device::new(device_id ...) or setup_device_stream!(.., .., device_id, raw_stream))",),
    ),
)


def _ffi_rules(i: Inputs, out: Output) -> None:
    if i.ffi_text is None:
        return
    banned = " / ".join(sorted(set(_BANNED_FFI.findall(i.ffi_text))))
    for holds, ok, fail, detail in FFI_RULES:
        out.check(holds(i.ffi_text), ok, fail.format(banned=banned), *detail)
    if _DEVICE_NEW_ZERO.search(i.ffi_text):
        out.warn("ffi.rs contains a hard-coded Device::new(0)")


def _exports_symbol(i: Inputs, out: Output) -> None:
    symbol = f"cutile_{i.op}"
    so = Path(i.so_path) if i.so_path is not None else find_so(i.repo)
    if so is None or not so.is_file():
        out.missing(
            f"{SO_NAME} missing (looked {'at ' + str(so) if so else 'under ' + str(i.repo)})",
            f"register mod {i.op} in cutile_kernels/src/lib.rs and run cargo build --release",
        )
        return
    try:
        funcs, err = exported_functions(so), ""
    except (OSError, ValueError) as exc:
        funcs, err = [], str(exc)
    out.check(
        symbol in funcs,
        f"{so.name} ({so}) exports symbol {symbol}",
        f"{so.name} ({so}) does not export {symbol}" + (f": {err}" if err else ""),
        f"(no defined global FUNC {symbol} in its .dynsym; register mod {i.op} in lib.rs and rebuild)",
    )


def _analysis_rules(i: Inputs, out: Output) -> None:
    i.analysis = _load_analysis(i.base / "reference" / "analysis.json", out)
    if i.analysis is None or i.ffi_text is None:
        return
    dumped = json.dumps(i.analysis)
    if "num_cta_in_cga" in dumped or "num_ctas" in dumped:
        out.check(
            "num_cta_in_cga" in i.ffi_text,
            "ffi.rs exposes/applies num_cta_in_cga compile-option",
            "analysis.json tunes num_cta_in_cga/num_ctas but ffi.rs does not apply it",
            "(expected: if num_cta_in_cga > 0 { opts = opts.num_cta_in_cga(v); })",
        )


# One row per rule of the wrapper's text: (pattern that must appear, OK line, FAIL line).
WRAPPER_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        _CDEF,
        "wrapper uses cffi (_FFI_CDEF + bind_kernel_function_cffi)",
        "wrapper has no cffi boundary (_FFI_CDEF / bind_kernel_function_cffi)",
    ),
    (
        _MAKE_DESC,
        "wrapper packs tensors with make_tensor_desc",
        "wrapper does not pack tensors with make_tensor_desc (const TensorDesc* boundary)",
    ),
    (
        _CHECK_RC,
        "wrapper checks the FFI return code with check_rc",
        "wrapper does not call check_rc(rc, _FFI_NAME) after the launch",
    ),
)


def _wrapper(i: Inputs, out: Output) -> None:
    wrapper = find_wrapper(i.repo, i.op)
    text = read_text(wrapper) if wrapper is not None else None
    if text is None:
        out.missing(f"cutile_rs wrapper for {i.op} not found under ops/cutile_rs/")
        return
    out.ok(f"cutile_rs wrapper present ({wrapper})")
    for pattern, ok, fail in WRAPPER_RULES:
        out.check(bool(pattern.search(text)), ok, fail)
    if _CTYPES_ARGTYPES.search(text):
        out.fail("wrapper still declares ctypes _FFI_ARGTYPES/.argtypes (old pattern)")
    if i.analysis is None:
        return
    tuned = isinstance(i.analysis, dict) and bool(
        i.analysis.get("autotune_configs") or i.analysis.get("autotune_backends")
    )
    if tuned:
        out.check(
            "autotune_launch" in text,
            "wrapper uses autotune_launch (autotune_configs present)",
            "analysis.json has autotune configs but the wrapper does not use autotune_launch",
        )
    else:
        out.ok("no autotune required (analysis.json has no autotune_configs)")


def _package_wiring(i: Inputs, out: Output) -> None:
    if not (i.repo / "src" / "tilegym").is_dir():
        out.warn(f"{i.repo} has no src/tilegym: backend registration checks skipped")
        i.wired = False
        return
    ops_init = read_text(i.repo / "src" / "tilegym" / "ops" / "__init__.py") or ""
    out.check(
        bool(_OPS_INIT_IMPORT.search(ops_init)),
        "ops/__init__.py imports cutile_rs",
        "ops/__init__.py does not import cutile_rs ('from . import cutile_rs' missing)",
    )
    selector = read_text(i.repo / "src" / "tilegym" / "backend" / "selector.py") or ""
    out.check(
        bool(_MENTIONS_BACKEND.search(selector)),
        "backend/selector.py references cutile-rs",
        "backend/selector.py does not register cutile-rs",
    )


def _test_wiring(i: Inputs, out: Output) -> None:
    if not i.wired:
        return
    test_files = i.test_files
    if test_files is None:
        test_files = [site.path for site in discover(Target(i.repo, i.op)).test_sites]
    if not test_files:
        out.fail(f"no test file under tests/ reaches {i.op} (nothing to parametrize)")
    for rel in test_files:
        out.check(
            bool(_MENTIONS_BACKEND.search(read_text(i.repo / rel) or "")),
            f"{rel} includes cutile-rs backend",
            f"{rel} does not include cutile-rs in its parametrization",
        )


# The checks, in the order their lines are printed (as the upstream validate_agent_d.sh reads).
CHECKS: tuple[Callable[[Inputs, Output], None], ...] = (
    _correctness_report,
    _pytest_log,
    _decision_log,
    _ffi_present,
    _ffi_rules,
    _exports_symbol,
    _analysis_rules,
    _wrapper,
    _package_wiring,
    _test_wiring,
)
