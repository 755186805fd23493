"""Stage "build": ``cargo build --release`` of the aggregated crate, diagnostics by file, the export check.

Cargo's JSON messages say which file each error is in, which decides the fault: our
``ffi.rs``/``lib.rs`` is a host fault, the op's ``kernel.rs`` a kernel fault, a failing
build script (headers, libclang) an environment problem. With ``cargo_target_dir`` the
compiled dependencies are reused across checkouts; the library is then copied to where the
TileGym runtime looks for it (``cutile_kernels/target/release``). ``cargo_home`` moves cargo's
registry downloads too (a runner's cargo cache, bot/build/runner_cache.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot import children, progress, sandbox
from bot.build import annotations, compiler_output
from bot.build.toolchain import Toolchain
from bot.build.types import BuildResult
from bot.errors import Blocked, Failed, OwnBug
from bot.targets.types import Target

SO_NAME = "libcutile_kernels.so"
LOG_TAIL = 60
# A cold build of the cutile crates on a GPU runner takes minutes; a kernel whose compile-time
# evaluation never ends would hold the runner for ever. $AGENT_D_BUILD_TIMEOUT (seconds) overrides.
DEFAULT_BUILD_TIMEOUT_S = 1800.0
# Held (flock) in a target dir for the whole build; bot/build/runner_cache.py prunes only dirs it can take.
TARGET_LOCK = ".agent-d.lock"


def build_timeout() -> float:
    raw = os.environ.get("AGENT_D_BUILD_TIMEOUT", "")
    try:
        return float(raw) if raw else DEFAULT_BUILD_TIMEOUT_S
    except ValueError:
        return DEFAULT_BUILD_TIMEOUT_S


@dataclass
class CrateBuild:
    """One ``cargo build --release`` of the aggregated crate, whatever kernels it holds."""

    crate: Path
    command: str  # as shown in reports
    code: int | None  # None: stopped at the time limit
    seconds: float
    log: str  # rendered diagnostics and cargo's status lines, ANSI stripped
    errors_by_file: dict[str, list[str]]  # error messages by file, relative to the crate's parent
    stderr: str
    so_path: Path  # where the TileGym runtime looks for the library
    limit: float
    error_lines: dict[str, list[int]] = field(default_factory=dict)  # the line of each message above
    errors: list[compiler_output.CompileError] = field(default_factory=list)  # each error, file and span

    @property
    def ok(self) -> bool:
        return self.code == 0

    def log_text(self) -> str:
        end = f"stopped after {self.limit:.0f} s" if self.code is None else f"exit={self.code}"
        return f"$ (cd {self.crate}) {self.command}\n{self.log}\n{end}\n"


def build(
    target: Target,
    toolchain: Toolchain,
    cargo_target_dir: Path | None = None,
    log_path: Path | None = None,
    exported: Callable[[Path], list[str]] | None = None,
    echo: progress.Echo = progress.silent,
    timeout: float | None = None,
) -> BuildResult:
    """Build the crate and judge the result for ``target``: its kernel or host fault, its export."""
    crate_build = compile_crate(target.crate_dir, toolchain, cargo_target_dir, echo, timeout)
    if log_path is not None:
        write_log(crate_build, log_path)
    return judge(target, crate_build, exported)


def compile_crate(
    crate: Path,
    toolchain: Toolchain,
    cargo_target_dir: Path | None = None,
    echo: progress.Echo = progress.silent,
    timeout: float | None = None,
    cargo_home: Path | None = None,
) -> CrateBuild:
    """Run cargo once; ``echo`` gets a heartbeat at least every 15 s, naming the crate cargo is compiling."""
    limit = build_timeout() if timeout is None else timeout
    env = toolchain.env()
    if cargo_target_dir is not None:
        env["CARGO_TARGET_DIR"] = str(cargo_target_dir)
    if cargo_home is not None:
        env["CARGO_HOME"] = str(cargo_home)
    cmd = [toolchain.cargo, "build", "--release", "--message-format=json-diagnostic-rendered-ansi"]
    start = time.monotonic()
    # CARGO_TARGET_DIR (ours, or one exported to us) moves cargo's output: follow it to find the library.
    target_dir = Path(env.get("CARGO_TARGET_DIR") or crate / "target")
    runtime_so = crate / "target" / "release" / SO_NAME
    with exclusive(target_dir, echo):
        # Several crates named cutile_kernels may share one target dir: hold it until our copy is made.
        _forget_other_checkout(target_dir, crate, toolchain.cargo, env)
        if sandbox.current() is not None:  # the registry filled out here: no network inside
            _fetch(toolchain.cargo, crate, env, limit)
        code, stdout, stderr = _cargo(
            sandbox.wrap(cmd, crate, env, writable=(target_dir,)), crate, env, echo, limit
        )
        built = target_dir / "release" / SO_NAME
        if code == 0 and built != runtime_so:
            runtime_so.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, runtime_so)
    root = _checkout_of(crate)
    rendered, errors = _diagnostics(stdout, crate, root)
    errors_by_file, error_lines = _by_file(errors)
    return CrateBuild(
        crate,
        "cargo build --release",
        code,
        time.monotonic() - start,
        # no quoted lines of files outside the checkout (a hostile kernel may point there)
        compiler_output.redact_outside(_strip_ansi("\n".join(rendered) + "\n" + stderr), root, crate),
        errors_by_file,
        stderr,
        runtime_so,
        limit,
        error_lines,
        errors,
    )


def _fetch(cargo: str, crate: Path, env: dict[str, str], limit: float) -> None:
    """``cargo fetch``: the crate's dependencies downloaded, no build script or macro run. A failure
    is left to the sandboxed build, whose offline error then says what was missing."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([cargo, "fetch"], cwd=crate, env=env, capture_output=True, timeout=limit, check=False)


def _checkout_of(crate: Path) -> Path:
    """The checkout a crate at ``src/tilegym/ops/cutile_rs/cutile_kernels`` belongs to."""
    parts = crate.resolve().parts
    return (
        Path(*parts[:-5])
        if len(parts) > 5 and parts[-5:-1] == ("src", "tilegym", "ops", "cutile_rs")
        else crate.parent
    )


def write_log(crate_build: CrateBuild, log_path: Path) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text(crate_build.log_text(), encoding="utf-8")


def judge(
    target: Target, crate_build: CrateBuild, exported: Callable[[Path], list[str]] | None = None
) -> BuildResult:
    """``target``'s build result: raises the fault a failed build means for it, or a missing export."""
    if crate_build.code is None:
        _stopped(target, crate_build.limit)
    tail = "\n".join(crate_build.log.strip().splitlines()[-LOG_TAIL:])
    result = BuildResult(
        crate_build.ok, "", crate_build.command, crate_build.seconds, tail, crate_build.errors_by_file
    )
    if not crate_build.ok:
        _raise_for_failure(target, crate_build)
    runtime_so = crate_build.so_path
    result.so_path = str(runtime_so)
    if exported is not None:
        result.symbols = exported(runtime_so)
        result.symbol_found = target.symbol in result.symbols
        if not result.symbol_found:
            raise Failed(
                "host",
                f"{runtime_so.name} does not export {target.symbol} (ELF .dynsym); is `mod {target.op}` in lib.rs?",
            )
    return result


_OP_FILE = re.compile(r"(?:^|/)(?P<op>[A-Za-z_]\w*)_kernel/(?P<file>kernel|ffi)\.rs$")


def faulty_ops(errors_by_file: dict[str, list[str]]) -> set[str]:
    """The ops whose own files (``<op>_kernel/kernel.rs`` or ``ffi.rs``) hold a compile error."""
    return {m["op"] for f in errors_by_file if (m := _OP_FILE.search(f))}


_COMPILING = re.compile(r"^\s*Compiling (\S+ v\S+)")


def _cargo(
    cmd: list[str], crate: Path, env: dict[str, str], echo: progress.Echo, limit: float
) -> tuple[int | None, str, str]:
    """Run cargo, keeping its JSON messages (stdout) and its status lines (stderr), while the
    heartbeat says how long it has run and which crate it is compiling (a cold build of the
    cutile crates is minutes of otherwise silent work). (exit code, or None when stopped at
    ``limit`` seconds with its whole process group; stdout; stderr)."""
    proc = subprocess.Popen(
        cmd,
        cwd=crate,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stopped: list[bool] = []

    def stop() -> None:
        stopped.append(True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # cargo's rustc and build-script children too

    timer = threading.Timer(limit, stop)
    timer.daemon = True
    timer.start()
    assert proc.stdout is not None and proc.stderr is not None
    out: list[str] = []
    err: list[str] = []
    started: list[str] = []  # crates cargo began compiling, in order

    def doing() -> str:
        return f"compiling {started[-1]} ({len(started)} crates started)" if started else ""

    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    with children.started(proc, "cargo build"), progress.heartbeat(echo, "cargo build", status=doing):
        for line in proc.stderr:
            err.append(line)
            m = _COMPILING.match(line)
            if m:
                started.append(m.group(1))
        reader.join()
        code = proc.wait()
    timer.cancel()
    return (None if stopped else code), "".join(out), "".join(err)


def _stopped(target: Target, limit: float) -> None:
    raise Failed(
        "kernel",
        f"cargo build did not finish within {limit:.0f} s (the build time limit, AGENT_D_BUILD_TIMEOUT) and "
        "was stopped; a kernel whose compile-time evaluation does not end can do this",
        followup=f"check {target.op}_kernel/kernel.rs for const evaluation or macro expansion that never ends",
    )


def _diagnostics(
    stdout: str, crate: Path, root: Path
) -> tuple[list[str], list[compiler_output.CompileError]]:
    """cargo's rendered messages, and its errors, each at its primary span."""
    rendered: list[str] = []
    errors: list[compiler_output.CompileError] = []
    for line in stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-message":
            continue
        diag = msg.get("message", {})
        if diag.get("rendered"):
            rendered.append(diag["rendered"])
        if diag.get("level") in ("error", "error: internal compiler error"):
            errors.append(_compile_error(diag, crate, root))
    return rendered, errors


def _by_file(errors: list[compiler_output.CompileError]) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
    """The errors' messages by file, and their lines (in the same order)."""
    by_file: dict[str, list[str]] = {}
    lines: dict[str, list[int]] = {}
    for error in errors:
        by_file.setdefault(error.file, []).append(error.message)
        lines.setdefault(error.file, []).append(error.line)
    return by_file, lines


def _compile_error(diag: dict, crate: Path, root: Path) -> compiler_output.CompileError:
    message = str(diag.get("message", "")).strip()
    code = str((diag.get("code") or {}).get("code") or "")
    spans = [s for s in diag.get("spans", []) if s.get("is_primary")] or diag.get("spans", [])
    if not spans:
        return compiler_output.CompileError("(no file)", None, 0, 0, 0, 0, message, code)
    span = spans[0]
    label = str(span.get("label") or "")
    # A macro expansion points into the macro's caller; the outermost expansion holds the op file.
    while span.get("expansion") and span["expansion"].get("span"):
        span = span["expansion"]["span"]
    where, source = _source_file(str(span.get("file_name", "")), crate, root)
    numbers = [int(span.get(k) or 0) for k in ("line_start", "line_end", "column_start", "column_end")]
    return compiler_output.CompileError(where, source, *numbers, message, code, label)


def _source_file(name: str, crate: Path, root: Path) -> tuple[str, Path | None]:
    """(the file an error is in, relative to the crate's parent; the file resolved, None outside the checkout)."""
    if not compiler_output.inside(name, root, crate):
        return compiler_output.OUTSIDE, None  # neither its path nor its text leaves the runner
    path = (crate / name).resolve()
    try:
        return str(path.relative_to(crate.parent.resolve())), path
    except ValueError:
        return str(path.relative_to(root.resolve())), path


def _raise_for_failure(target: Target, crate_build: CrateBuild) -> None:
    by_file, lines, stderr = crate_build.errors_by_file, crate_build.error_lines, crate_build.stderr
    summary = "; ".join(
        f"{f}: {msgs[0]}" + (f" (+{len(msgs) - 1})" if len(msgs) > 1 else "")
        for f, msgs in sorted(by_file.items())
    )
    kernel = f"{target.op}_kernel/kernel.rs"
    ours = (f"{target.op}_kernel/ffi.rs", "cutile_kernels/src/lib.rs")
    in_kernel = [f for f in by_file if _is(f, kernel)]
    if in_kernel:
        raise Failed(
            "kernel",
            f"cargo error in kernel.rs: {summary}",
            followup=f"fix the compile error in {kernel}: {by_file[in_kernel[0]][0]}",
            annotations=annotations.kernel_errors(target, crate_build.errors),
        )
    in_ours = [f for f in sorted(by_file) if any(_is(f, rel) for rel in ours)]
    if in_ours:
        # what agent-d generated or wired does not compile: its bug, and its files are withheld
        first = in_ours[0]
        line = lines.get(first, [0])[0]
        where = f"{first}:{line}" if line else first
        raise OwnBug(
            f"cargo build faults the generated {where}: {by_file[first][0]} ({summary})",
            annotations=annotations.generated_errors(target, crate_build.errors),
        )
    if by_file:
        raise Blocked("host", f"the crate does not build for reasons outside {target.op}: {summary}")
    failed_script = _BUILD_SCRIPT.search(stderr)
    if failed_script:
        raise Blocked("env", f"the build script of {failed_script['crate']} failed: {_script_error(stderr)}")
    last = next((x for x in reversed(stderr.strip().splitlines()) if x.strip()), "cargo failed")
    raise Blocked("env", f"cargo build failed without a compiler diagnostic: {_strip_ansi(last)}")


_BUILD_SCRIPT = re.compile(r"failed to run custom build command for `(?P<crate>[^`(]+?)\s*(?:\([^`]*\))?`")


def _script_error(stderr: str) -> str:
    """What a failed build script said: a compiler's fatal error (a missing CUDA header, libclang),
    else its panic message, else its last line of stderr."""
    lines = [_strip_ansi(x).strip() for x in stderr.splitlines()]
    fatal = next((x for x in lines if "error:" in x and "fatal" in x), "")
    if fatal:
        return f"{fatal} (CUDA headers / libclang?)"
    for i, line in enumerate(lines):
        if "panicked at" in line and i + 1 < len(lines) and lines[i + 1]:
            return f"{line.split('panicked at', 1)[1].strip()} {lines[i + 1]}"
    said = [x for x in lines if x and not x.startswith(("note:", "Caused by", "process didn't exit"))]
    return said[-1] if said else "no output"


def _is(path: str, rel: str) -> bool:
    """``path`` names the file ``rel`` (whole path components: ``mul_kernel`` is not ``silu_and_mul_kernel``)."""
    return path == rel or path.endswith("/" + rel)


def _forget_other_checkout(target_dir: Path, crate: Path, cargo: str, env: dict[str, str]) -> None:
    """Cargo fingerprints a path package by its path *relative to the workspace*, so two checkouts
    share one fingerprint in a shared target dir and an older checkout would reuse the other's
    library. When the last build here came from another checkout, drop this package's artefacts
    (its dependencies stay compiled)."""
    stamp = target_dir / ".agent-d-last-crate"
    here = str(crate.resolve())
    if stamp.is_file() and stamp.read_text(encoding="utf-8") != here:
        subprocess.run(
            [cargo, "clean", "--release", "-p", "cutile-kernels"],
            cwd=crate,
            env=env,
            capture_output=True,
            text=True,
        )
    stamp.write_text(here, encoding="utf-8")


@contextlib.contextmanager
def exclusive(target_dir: Path, echo: progress.Echo = progress.silent):
    target_dir.mkdir(parents=True, exist_ok=True)
    with open(target_dir / TARGET_LOCK, "w") as lock:
        # another build holding the shared target dir can take minutes: say that we wait for it
        with progress.heartbeat(echo, f"waiting for the cargo target {target_dir}"):
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
