"""Stage "build": ``cargo build --release`` of the aggregated crate, diagnostics by file, the export check.

Cargo's JSON messages say which file each error is in, which decides the fault: our
``ffi.rs``/``lib.rs`` is a host fault, the op's ``kernel.rs`` a kernel fault, a failing
build script (headers, libclang) an environment problem. With ``cargo_target_dir`` the
compiled dependencies are reused across checkouts; the library is then copied to where the
TileGym runtime looks for it (``cutile_kernels/target/release``).
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
from pathlib import Path

from bot import compiler_output, progress
from bot.errors import Blocked, Failed
from bot.toolchain import Toolchain
from bot.types import BuildResult, Target

SO_NAME = "libcutile_kernels.so"
LOG_TAIL = 60
# A cold build of the cutile crates on a GPU runner takes minutes; a kernel whose compile-time
# evaluation never ends would hold the runner for ever. $AGENT_D_BUILD_TIMEOUT (seconds) overrides.
DEFAULT_BUILD_TIMEOUT_S = 1800.0


def build_timeout() -> float:
    raw = os.environ.get("AGENT_D_BUILD_TIMEOUT", "")
    try:
        return float(raw) if raw else DEFAULT_BUILD_TIMEOUT_S
    except ValueError:
        return DEFAULT_BUILD_TIMEOUT_S


def build(
    target: Target,
    toolchain: Toolchain,
    cargo_target_dir: Path | None = None,
    log_path: Path | None = None,
    exported: Callable[[Path], list[str]] | None = None,
    echo: progress.Echo = progress.silent,
    timeout: float | None = None,
) -> BuildResult:
    """``echo`` gets a heartbeat at least every 15 s, naming the crate cargo is compiling."""
    crate = target.crate_dir
    limit = build_timeout() if timeout is None else timeout
    env = toolchain.env()
    if cargo_target_dir is not None:
        env["CARGO_TARGET_DIR"] = str(cargo_target_dir)
    cmd = [toolchain.cargo, "build", "--release", "--message-format=json-diagnostic-rendered-ansi"]
    shown = "cargo build --release"
    start = time.monotonic()
    # CARGO_TARGET_DIR (ours, or one exported to us) moves cargo's output: follow it to find the library.
    target_dir = Path(env.get("CARGO_TARGET_DIR") or crate / "target")
    with _exclusive(target_dir, echo):
        # Several crates named cutile_kernels may share one target dir: hold it until our copy is made.
        _forget_other_checkout(target_dir, crate, toolchain.cargo, env)
        code, stdout, stderr = _cargo(cmd, crate, env, echo, limit)
        seconds = time.monotonic() - start
        if code is None:
            _stopped(target, log_path, crate, shown, stdout, stderr, limit)
        proc = subprocess.CompletedProcess(cmd, code, stdout, stderr)
        built = target_dir / "release" / SO_NAME
        runtime_so = crate / "target" / "release" / SO_NAME
        if proc.returncode == 0 and built != runtime_so:
            runtime_so.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, runtime_so)
    rendered, errors_by_file = _diagnostics(proc.stdout, crate, target.repo)
    log = _log_text(rendered, proc.stderr, target, crate)
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(f"$ (cd {crate}) {shown}\n{log}\nexit={proc.returncode}\n", encoding="utf-8")
    tail = "\n".join(log.strip().splitlines()[-LOG_TAIL:])
    result = BuildResult(proc.returncode == 0, "", shown, seconds, tail, errors_by_file)
    if proc.returncode != 0:
        _raise_for_failure(target, crate, errors_by_file, proc.stderr, result)
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
    with progress.heartbeat(echo, "cargo build", status=doing):
        for line in proc.stderr:
            err.append(line)
            m = _COMPILING.match(line)
            if m:
                started.append(m.group(1))
        reader.join()
        code = proc.wait()
    timer.cancel()
    return (None if stopped else code), "".join(out), "".join(err)


def _stopped(target: Target, log_path, crate: Path, shown: str, stdout: str, stderr: str, limit: float):
    rendered, _ = _diagnostics(stdout, crate, target.repo)
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        text = _log_text(rendered, stderr, target, crate)
        log_path.write_text(
            f"$ (cd {crate}) {shown}\n{text}\nstopped after {limit:.0f} s\n", encoding="utf-8"
        )
    raise Failed(
        "kernel",
        f"cargo build did not finish within {limit:.0f} s (the build time limit, AGENT_D_BUILD_TIMEOUT) and "
        "was stopped; a kernel whose compile-time evaluation does not end can do this",
        followup=f"check {target.op}_kernel/kernel.rs for const evaluation or macro expansion that never ends",
    )


def _log_text(rendered: list[str], stderr: str, target: Target, crate: Path) -> str:
    """The build log as reports carry it: no quoted lines of files outside the checkout."""
    return compiler_output.redact_outside(
        _strip_ansi("\n".join(rendered) + "\n" + stderr), target.repo, crate
    )


def _diagnostics(stdout: str, crate: Path, root: Path) -> tuple[list[str], dict[str, list[str]]]:
    rendered: list[str] = []
    by_file: dict[str, list[str]] = {}
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
        if diag.get("level") not in ("error", "error: internal compiler error"):
            continue
        spans = [s for s in diag.get("spans", []) if s.get("is_primary")] or diag.get("spans", [])
        where = _source_file(spans, crate, root) if spans else "(no file)"
        by_file.setdefault(where, []).append(diag.get("message", "").strip())
    return rendered, by_file


def _source_file(spans: list[dict], crate: Path, root: Path) -> str:
    span = spans[0]
    # A macro expansion points into the macro's caller; the outermost expansion holds the op file.
    while span.get("expansion") and span["expansion"].get("span"):
        span = span["expansion"]["span"]
    name = span.get("file_name", "")
    if not compiler_output.inside(name, root, crate):
        return compiler_output.OUTSIDE  # neither its path nor its text leaves the runner
    path = (crate / name).resolve()
    try:
        return str(path.relative_to(crate.parent.resolve()))
    except ValueError:
        return str(path.relative_to(root.resolve()))


def _raise_for_failure(
    target: Target, crate: Path, by_file: dict[str, list[str]], stderr: str, result
) -> None:
    summary = "; ".join(
        f"{f}: {msgs[0]}" + (f" (+{len(msgs) - 1})" if len(msgs) > 1 else "")
        for f, msgs in sorted(by_file.items())
    )
    kernel = f"{target.op}_kernel/kernel.rs"
    ours = (f"{target.op}_kernel/ffi.rs", "cutile_kernels/src/lib.rs")
    if any(f.endswith(kernel) for f in by_file):
        raise Failed(
            "kernel",
            f"cargo error in kernel.rs: {summary}",
            followup=f"fix the compile error in {kernel}: {by_file[next(f for f in by_file if f.endswith(kernel))][0]}",
        )
    if any(f.endswith(ours) for f in by_file):
        raise Failed(
            "host", f"cargo error in the host code: {summary}", host_fix="the generated ffi.rs must compile"
        )
    if by_file:
        raise Blocked("host", f"the crate does not build for reasons outside {target.op}: {summary}")
    if "failed to run custom build command" in stderr:
        line = next((x.strip() for x in stderr.splitlines() if "error:" in x and "fatal" in x), "")
        raise Blocked(
            "env",
            "a dependency's build script failed (CUDA headers / libclang?)" + (f": {line}" if line else ""),
        )
    last = next((x for x in reversed(stderr.strip().splitlines()) if x.strip()), "cargo failed")
    raise Blocked("env", f"cargo build failed without a compiler diagnostic: {_strip_ansi(last)}")


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
def _exclusive(target_dir: Path, echo: progress.Echo = progress.silent):
    target_dir.mkdir(parents=True, exist_ok=True)
    with open(target_dir / ".agent-d.lock", "w") as lock:
        # another build holding the shared target dir can take minutes: say that we wait for it
        with progress.heartbeat(echo, f"waiting for the cargo target {target_dir}"):
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
