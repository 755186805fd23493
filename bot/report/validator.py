"""The built-in Agent D validator, and a runner for the checkout's own validator script.

:func:`validate` checks a finished port the way TileGym's ``validate_agent_d.sh`` does (the
list is in docs/domain.md, section 9): the reports and the raw pytest log in the per-kernel
out folder, the out-folder copy of ``ffi.rs``, the exported symbol of the built cdylib, the
wrapper, and the three wiring points. It prints one ``OK:`` / ``FAIL:`` / ``WARN:`` /
``NOT RUN:`` line per check, then ``---`` and ``PASS`` (exit 0), ``FAIL: N issue(s)`` (exit 1) or
``NOT RUN: N check(s): ...`` (exit 3).

Where ours differs from the shell script, on purpose:

- when ``correctness.md`` says the run was BLOCKED (its ``block_class:`` line), an input that
  the run never produced (the raw pytest log or the test results and header in it, ffi.rs, the
  library, the wrapper) is a ``NOT RUN:`` line, not a FAIL: the checks that could not run are named, and the block does not read as a
  failure above ``VERDICT: BLOCKED``. Anything present is still checked, and a wrong one fails;
- it goes on after a missing ``correctness.md`` (the script stops there), so one run lists
  every problem; the exit code is the same;
- the device check also accepts the ``crate::setup_device_stream!(dev, stream, device_id, ...)``
  macro style, whose body calls ``Device::new`` with the argument (the script's literal grep
  for ``Device::new(device_id`` misses it); a hard-coded ``Device::new(0`` is a WARN;
- the unpack check also accepts the turbofish form ``DevicePointer::<E>::from_cu_deviceptr``
  (the script's grep wants ``DevicePointer::from_cu_deviceptr`` literally, so a launcher that
  only uses raw pointers written that way fails there and passes here);
- the symbol check reads the ELF dynamic symbol table with pyelftools instead of ``nm -D``:
  a defined (not ``SHN_UNDEF``), GLOBAL, ``STT_FUNC`` symbol, which is what ``nm`` prints as
  `` T ``;
- when several files could be the wrapper or the ``.so``, the choice is by sorted path, not
  by directory order, so it is repeatable.

Text checks on ``ffi.rs`` and the wrapper are plain searches over the whole file, comments
included, exactly as the script's ``grep`` is.

:func:`run_repo_validator` runs the checkout's script itself when it has one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot import sandbox
from bot.classify.types import verdict_headline
from bot.report.types import ValidatorRun
from bot.targets.discover import discover
from bot.targets.types import Target

SKILL = "tilegym-converting-cutile-triton-to-cutile-rs"
SCRIPT_CANDIDATES = (
    f".agents/skills/{SKILL}/scripts/validate_agent_d.sh",
    f"skills/{SKILL}/scripts/validate_agent_d.sh",
)
REPO_VALIDATOR_TIMEOUT_S = 120
SO_NAME = "libcutile_kernels.so"

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


# --------------------------------------------------------------------------- ELF


def exported_functions(so_path: Path | str) -> list[str]:
    """Names of the functions a shared object exports, sorted.

    Read from the ELF ``.dynsym`` section: symbols of type ``STT_FUNC`` with GLOBAL binding
    that are defined in the object (section index not ``SHN_UNDEF``), i.e. what ``nm -D``
    lists with `` T ``. Imports (undefined references) are not listed.

    Raises ``OSError`` when the file cannot be read and ``ValueError`` when it is not an ELF
    file or has no dynamic symbol table.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    names: set[str] = set()
    with open(so_path, "rb") as fh:
        try:
            elf = ELFFile(fh)
            dynsym = elf.get_section_by_name(".dynsym")
            if dynsym is None or dynsym["sh_type"] != "SHT_DYNSYM":
                raise ValueError(f"{so_path}: no .dynsym section (not a shared object?)")
            for sym in dynsym.iter_symbols():
                if (
                    sym.name
                    and sym["st_info"]["type"] == "STT_FUNC"
                    and sym["st_info"]["bind"] == "STB_GLOBAL"
                    and sym["st_shndx"] != "SHN_UNDEF"
                ):
                    names.add(sym.name)
        except ELFError as exc:
            raise ValueError(f"{so_path}: not a readable ELF file: {exc}") from exc
    return sorted(names)


# --------------------------------------------------------------------------- the built-in checks


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.fails = 0
        self.not_run = 0
        self.blocked = ""  # the block_class correctness.md states; "" when the run was not blocked

    def missing(self, msg: str, *detail: str) -> None:
        """An input the run never produced: a FAIL, unless the port says it was blocked before
        that stage (then the check is listed as not run, since nothing was there to check)."""
        if self.blocked:
            self.lines.append(f"NOT RUN: {msg}")
            self.not_run += 1
        else:
            self.fail(msg, *detail)

    def tail(self) -> tuple[str, int]:
        """The line after ``---`` and the exit code: PASS 0, FAIL 1, checks not run 3 (as BLOCKED)."""
        if self.fails:
            extra = f"; {self.not_run} check(s) not run" if self.not_run else ""
            return f"FAIL: {self.fails} issue(s){extra}", 1
        if self.not_run:
            why = f"the port was {verdict_headline('BLOCKED', self.blocked)} before their inputs existed"
            return f"NOT RUN: {self.not_run} check(s): {why}", 3
        return "PASS", 0

    def ok(self, msg: str) -> None:
        self.lines.append(f"OK: {msg}")

    def fail(self, msg: str, *detail: str) -> None:
        self.lines.append(f"FAIL: {msg}")
        self.lines.extend(f"      {d}" for d in detail)
        self.fails += 1

    def warn(self, msg: str) -> None:
        self.lines.append(f"WARN: {msg}")

    def check(self, cond: bool, ok: str, fail: str, *detail: str) -> None:
        if cond:
            self.ok(ok)
        else:
            self.fail(fail, *detail)


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def _nonempty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def _count_lines_with(text: str, word: str) -> int:
    """``grep -c word``: lines (split on newline only) that contain ``word``."""
    return sum(1 for line in text.split("\n") if word in line)


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


def _load_analysis(path: Path, out: _Out) -> object | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        out.warn(f"reference/analysis.json unreadable ({exc.__class__.__name__}); its checks skipped")
        return None


def default_so_path(repo: Path) -> Path:
    """Where ``cargo build --release`` in the checkout's crate puts the cdylib."""
    return (
        Path(repo)
        / "src"
        / "tilegym"
        / "ops"
        / "cutile_rs"
        / "cutile_kernels"
        / "target"
        / "release"
        / SO_NAME
    )


def _find_so(repo: Path) -> Path | None:
    crs = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    first = default_so_path(repo)
    if first.is_file():
        return first
    found = sorted(p for p in crs.rglob(SO_NAME) if p.is_file()) if crs.is_dir() else []
    return found[0] if found else None


def find_wrapper(repo: Path, op: str) -> Path | None:
    """The cutile-rs wrapper of ``op``: ``<op>.py`` (or ``<op>`` without underscores) under
    ``ops/cutile_rs``, else a ``.py`` there with a ``register_impl(...<op>...)`` line."""
    crs = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    if not crs.is_dir():
        return None
    direct = crs / f"{op}.py"
    if direct.is_file():
        return direct
    names = {f"{op}.py", f"{op.replace('_', '')}.py"}
    pys = sorted(p for p in crs.rglob("*.py") if p.is_file())
    for p in pys:
        if p.name in names:
            return p
    reg = re.compile(rf"register_impl.*{re.escape(op)}")
    for p in pys:
        text = _read(p) or ""
        if any(reg.search(line) for line in text.splitlines()):
            return p
    return None


def validate(
    out_dir: Path, op: str, repo: Path, so_path: Path | None, test_files: list[str] | None = None
) -> ValidatorRun:
    """Run every Agent D check on ``out_dir`` (``<out root>/<op>``) and the checkout ``repo``.

    ``so_path`` is the built ``libcutile_kernels.so``; when None it is looked for under the
    checkout's ``ops/cutile_rs`` (the crate's ``target/release`` first). ``test_files``: the op's
    test files when a port already discovered them (otherwise discovered here). Never raises.
    """
    out_dir, repo = Path(out_dir), Path(repo)
    out = _Out()
    try:
        _run_checks(out, out_dir, op, repo, so_path, test_files)
    except Exception as exc:
        out.fail(f"validator error: {exc.__class__.__name__}: {exc}")
    last, exit_code = out.tail()
    lines = [*out.lines, "---", last]
    # The same check from the command line: `--out` takes the out root (the folder holding <op>/).
    cmd = ["agent-d", "validate", op, "--repo", str(repo), "--out", str(out_dir.parent)]
    if so_path is not None and Path(so_path) != default_so_path(repo):
        cmd += ["--so", str(so_path)]
    return ValidatorRun(command=shlex.join(cmd), output="\n".join(lines) + "\n", exit_code=exit_code)


@dataclass
class _Inputs:
    """What the checks read; a check may leave what it found for a later one (``ffi_text``)."""

    base: Path  # <out root>/<op>
    op: str
    repo: Path
    so_path: Path | None
    test_files: list[str] | None
    ffi_text: str | None = None
    analysis: object | None = None
    wired: bool = True  # the checkout has src/tilegym, so its wiring can be checked


def _run_checks(
    out: _Out, base: Path, op: str, repo: Path, so_path: Path | None, test_files: list[str] | None
) -> None:
    inputs = _Inputs(base, op, repo, so_path, test_files)
    for check in CHECKS:
        check(inputs, out)


def _correctness_report(i: _Inputs, out: _Out) -> None:
    report = i.base / "reports" / "correctness.md"
    text = _read(report) if _nonempty(report) else None
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


def _pytest_log(i: _Inputs, out: _Out) -> None:
    raw = i.base / "correctness_cutile_rs.txt"
    if not raw.is_file():
        out.missing("correctness_cutile_rs.txt missing (pytest did not run)")
        return
    if not _nonempty(raw):
        out.fail("correctness_cutile_rs.txt empty")
        return
    log = _read(raw) or ""
    n_lines = log.count("\n")  # as wc -l counts
    n_pass, n_fail, n_skip = (_count_lines_with(log, w) for w in ("PASSED", "FAILED", "SKIPPED"))
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


def _decision_log(i: _Inputs, out: _Out) -> None:
    out.check(
        _nonempty(i.base / "reports" / "agent_logs" / "agent_d.md"),
        "agent_d.md log",
        "agent_d.md log missing (reports/agent_logs/agent_d.md)",
    )


def _ffi_present(i: _Inputs, out: _Out) -> None:
    ffi = i.base / "ffi.rs"
    if _nonempty(ffi):
        out.ok("ffi.rs present (Agent D)")
    else:
        out.missing(f"ffi.rs missing: the C-ABI host launcher belongs at {ffi}")
    i.ffi_text = _read(ffi) if ffi.is_file() else None


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


def _ffi_rules(i: _Inputs, out: _Out) -> None:
    if i.ffi_text is None:
        return
    banned = " / ".join(sorted(set(_BANNED_FFI.findall(i.ffi_text))))
    for holds, ok, fail, detail in FFI_RULES:
        out.check(holds(i.ffi_text), ok, fail.format(banned=banned), *detail)
    if _DEVICE_NEW_ZERO.search(i.ffi_text):
        out.warn("ffi.rs contains a hard-coded Device::new(0)")


def _exports_symbol(i: _Inputs, out: _Out) -> None:
    symbol = f"cutile_{i.op}"
    so = Path(i.so_path) if i.so_path is not None else _find_so(i.repo)
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


def _analysis_rules(i: _Inputs, out: _Out) -> None:
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


def _wrapper(i: _Inputs, out: _Out) -> None:
    wrapper = find_wrapper(i.repo, i.op)
    text = _read(wrapper) if wrapper is not None else None
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


def _package_wiring(i: _Inputs, out: _Out) -> None:
    if not (i.repo / "src" / "tilegym").is_dir():
        out.warn(f"{i.repo} has no src/tilegym: backend registration checks skipped")
        i.wired = False
        return
    ops_init = _read(i.repo / "src" / "tilegym" / "ops" / "__init__.py") or ""
    out.check(
        bool(_OPS_INIT_IMPORT.search(ops_init)),
        "ops/__init__.py imports cutile_rs",
        "ops/__init__.py does not import cutile_rs ('from . import cutile_rs' missing)",
    )
    selector = _read(i.repo / "src" / "tilegym" / "backend" / "selector.py") or ""
    out.check(
        bool(_MENTIONS_BACKEND.search(selector)),
        "backend/selector.py references cutile-rs",
        "backend/selector.py does not register cutile-rs",
    )


def _test_wiring(i: _Inputs, out: _Out) -> None:
    if not i.wired:
        return
    test_files = i.test_files
    if test_files is None:
        test_files = [site.path for site in discover(Target(i.repo, i.op)).test_sites]
    if not test_files:
        out.fail(f"no test file under tests/ reaches {i.op} (nothing to parametrize)")
    for rel in test_files:
        out.check(
            bool(_MENTIONS_BACKEND.search(_read(i.repo / rel) or "")),
            f"{rel} includes cutile-rs backend",
            f"{rel} does not include cutile-rs in its parametrization",
        )


# The checks, in the order their lines are printed (as the upstream validate_agent_d.sh reads).
CHECKS: tuple[Callable[[_Inputs, _Out], None], ...] = (
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


# --------------------------------------------------------------------------- the repo's own script


def repo_validator_script(repo: Path) -> Path | None:
    """The checkout's ``validate_agent_d.sh`` (``.agents/skills/...`` first), or None."""
    for rel in SCRIPT_CANDIDATES:
        p = Path(repo) / rel
        if p.is_file():
            return p
    return None


_NM_SHIM = """#!/bin/sh
# agent-d: the checkout's validator runs `nm -D "$SO" | grep -q ...` under `set -o pipefail`;
# when grep stops early, nm dies of SIGPIPE (141) and a present symbol reads as missing.
# This nm buffers its listing and ignores SIGPIPE, so only nm's own status counts.
trap '' PIPE
out=$({real} "$@")
status=$?
printf '%s\\n' "$out" 2>/dev/null
exit $status
"""


def _buffered_nm_dir() -> Path | None:
    """A folder holding the SIGPIPE-proof ``nm`` shim, or None when there is no nm to wrap."""
    real = shutil.which("nm")
    if real is None:
        return None
    folder = Path(tempfile.gettempdir()) / f"agent-d-nm-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    shim = folder / "nm"
    text = _NM_SHIM.format(real=shlex.quote(real))
    if not shim.is_file() or shim.read_text() != text:
        shim.write_text(text)
        shim.chmod(0o755)
    return folder


def run_repo_validator(
    repo: Path,
    out_root: Path,
    op: str,
    timeout_s: float = REPO_VALIDATOR_TIMEOUT_S,
    test_files: list[str] | None = None,
) -> ValidatorRun | None:
    """Run the checkout's ``validate_agent_d.sh <op>`` with bash from the repo root.

    Environment: the current one plus ``CUTILE_KERNEL_OUT_ROOT=out_root`` and
    ``TILEGYM_PATH=repo`` (both absolute). stdout and stderr are captured together, in
    order. Returns None when the checkout has no such script. Past ``timeout_s`` the script's
    whole process group is killed and the run has exit code 124 and says so.

    The script reads the op's tests from ``tests/ops/test_<op>.py`` only. When the op's tests
    live elsewhere (``tests/ops/experimental/test_mhc.py``, found by discovery), the script is
    given a view of the checkout (``TILEGYM_PATH``) where that path links to the first of
    ``test_files``, so its check reads the file the op is really tested in; the output says so.
    """
    repo = Path(repo).resolve()
    script = repo_validator_script(repo)
    if script is None:
        return None
    view, note = _tests_view(repo, op, test_files or [])
    try:
        run = _run_script(repo, script, Path(out_root).resolve(), op, timeout_s, view)
    finally:
        if view != repo:
            shutil.rmtree(view, ignore_errors=True)
    return ValidatorRun(run.command, note + run.output, run.exit_code) if note else run


def _tests_view(repo: Path, op: str, test_files: list[str]) -> tuple[Path, str]:
    """(the TILEGYM_PATH the script reads, a note when it is a view rather than ``repo``)."""
    expected = Path("tests") / "ops" / f"test_{op}.py"
    if (repo / expected).is_file() or not test_files or not (repo / test_files[0]).is_file():
        return repo, ""
    view = Path(tempfile.mkdtemp(prefix="agent-d-validator-view-"))
    (view / "src").symlink_to(repo / "src", target_is_directory=True)
    (view / expected).parent.mkdir(parents=True)
    (view / expected).symlink_to(repo / test_files[0])
    note = (
        f"agent-d: this script reads {expected.as_posix()}; {op}'s tests are {test_files[0]}, "
        "linked there in a temporary view of the checkout\n"
    )
    return view, note


def _run_script(
    repo: Path, script: Path, out_root: Path, op: str, timeout_s: float, tile: Path
) -> ValidatorRun:
    rel = script.relative_to(repo).as_posix()
    shim = _buffered_nm_dir()
    path_prefix = f"PATH={shlex.quote(str(shim))}:$PATH " if shim else ""
    command = (
        f"cd {shlex.quote(str(repo))} && {path_prefix}CUTILE_KERNEL_OUT_ROOT={shlex.quote(str(out_root))} "
        f"TILEGYM_PATH={shlex.quote(str(tile))} bash {shlex.quote(rel)} {shlex.quote(op)} 2>&1"
    )
    env = dict(os.environ, CUTILE_KERNEL_OUT_ROOT=str(out_root), TILEGYM_PATH=str(tile))
    if shim:
        env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    # the checkout's script is PR code: in a sandbox it reads the reports, it cannot change them
    readable = (out_root, *([shim] if shim else []))
    return run_script(["bash", rel, op], repo, env, command, timeout_s, readable)


def run_script(
    argv: list[str],
    repo: Path,
    env: dict[str, str],
    command: str,
    timeout_s: float,
    readable: tuple[Path, ...],
) -> ValidatorRun:
    """A validator script of the checkout, run in ``repo`` (in the sandbox when one is active, seeing
    ``readable``); past ``timeout_s`` its process group is killed and the run says so (exit 124)."""
    try:
        proc = subprocess.Popen(
            sandbox.wrap(argv, repo, env, readable=readable),
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return ValidatorRun(command=command, output=f"could not start bash: {exc}\n", exit_code=127)
    try:
        data, _ = proc.communicate(timeout=timeout_s)
        return ValidatorRun(
            command=command, output=data.decode("utf-8", errors="replace"), exit_code=proc.returncode
        )
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        data, _ = proc.communicate()
        text = data.decode("utf-8", errors="replace")
        if text and not text.endswith("\n"):
            text += "\n"
        text += f"agent-d: validator script timed out after {timeout_s:g} s and was killed\n"
        return ValidatorRun(command=command, output=text, exit_code=124)
