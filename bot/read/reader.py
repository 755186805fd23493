"""Stage: read a cutile-rs ``kernel.rs`` into a :class:`~bot.read.types.KernelSignature`.

The parsing is done by the Rust binary ``kernel-reader`` (``crate/``, built on ``syn``), which
prints one JSON document per file (format: ``docs/reader-schema.md``). This module finds or
builds that binary, runs it, and turns the JSON into the typed values of ``bot/read/types.py``.

Where the binary comes from, first match wins:

1. ``$AGENT_D_READER`` (path to a built ``kernel-reader``);
2. in a source checkout, ``<repo>/crate/target/release/kernel-reader`` when it is newer than
   every file of the crate; otherwise it is built once with
   ``cargo build --release --locked --quiet``;
3. outside a checkout (installed package), ``kernel-reader`` on ``PATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from bot.read.types import BlockUse, Entry, FileUse, Generic, KernelSignature, Param

SCHEMA_VERSION = 1
BINARY_NAME = "kernel-reader"
CRATE_DIR = Path(__file__).resolve().parents[2] / "crate"
BUILD_TIMEOUT_S = 900
RUN_TIMEOUT_S = 120

_build_lock = threading.Lock()
_built: Path | None = None


class ReaderError(Exception):
    """The kernel file could not be read: unreadable, a Rust syntax error, no cutile module,
    or an error-level diagnostic (e.g. ``#[cutile::entry]`` without parentheses)."""

    def __init__(self, message: str, line: int = 0, column: int = 0, path: str = ""):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.path = path

    def __str__(self) -> str:
        return f"kernel.rs:{self.line}:{self.column}: {self.message}"


class KernelRefused(ReaderError):
    """``kernel.rs`` holds what a kernel may not (the reader's allow-list, ``crate/src/allow.rs``)."""

    def __init__(self, found: list[dict[str, Any]], path: str = ""):
        self.found = [f"line {f.get('line', 0)}: {f.get('what', '')}" for f in found]
        # (line, column, what) of each, for the check run's annotations
        self.refusals = [
            (int(f.get("line", 0)), int(f.get("column", 0)), str(f.get("what", ""))) for f in found
        ]
        first = found[0] if found else {}
        super().__init__("; ".join(self.found), int(first.get("line", 0)), int(first.get("column", 0)), path)


class ReaderUnavailable(Exception):
    """The ``kernel-reader`` binary cannot be found, built or run."""


# --------------------------------------------------------------------------- locating the binary


def _crate_inputs(crate: Path) -> list[Path]:
    files = [crate / "Cargo.toml", crate / "Cargo.lock"]
    files += sorted(p for p in (crate / "src").rglob("*") if p.is_file())
    return [p for p in files if p.exists()]


def _is_fresh(binary: Path, crate: Path) -> bool:
    if not binary.is_file():
        return False
    built = binary.stat().st_mtime
    return all(p.stat().st_mtime < built for p in _crate_inputs(crate))


def _build(crate: Path) -> Path:
    cargo = shutil.which("cargo")
    if cargo is None:
        raise ReaderUnavailable(
            f"cargo not found on PATH: install Rust (rustup) to build {crate}, "
            f"or set AGENT_D_READER to a built {BINARY_NAME}"
        )
    manifest, target_dir = str(crate / "Cargo.toml"), str(crate / "target")  # ignore $CARGO_TARGET_DIR
    cmd = [cargo, "build", "--release", "--quiet", "--locked", "--manifest-path", manifest]
    cmd += ["--target-dir", target_dir]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReaderUnavailable(f"could not run `{' '.join(cmd)}`: {exc}") from exc
    binary = crate / "target" / "release" / BINARY_NAME
    if proc.returncode != 0 or not binary.is_file():
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.lstrip().startswith("error")]
        detail = (errors or lines or ["no output"])[0].strip()
        raise ReaderUnavailable(f"building {BINARY_NAME} failed (exit {proc.returncode}): {detail}")
    # cargo leaves an up-to-date binary untouched; mark it fresh so the next process skips cargo.
    os.utime(binary)
    return binary


def reader_binary() -> Path:
    """Path of a usable ``kernel-reader``, building it from ``crate/`` when needed (once per process)."""
    global _built
    env = os.environ.get("AGENT_D_READER", "").strip()
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ReaderUnavailable(f"AGENT_D_READER={env} is not a file")
        return path
    # AGENT_D_CRATE: the crate of an installed agent-d (the action's own checkout), built on first need
    crate = Path(os.environ.get("AGENT_D_CRATE", "").strip() or CRATE_DIR)
    if (crate / "Cargo.toml").is_file():
        binary = crate / "target" / "release" / BINARY_NAME
        with _build_lock:
            if _built is not None and _built.is_file():
                return _built
            if not _is_fresh(binary, crate):
                binary = _build(crate)
            _built = binary
            return binary
    found = shutil.which(BINARY_NAME)
    if found:
        return Path(found)
    raise ReaderUnavailable(
        f"{BINARY_NAME} not found: set AGENT_D_READER to its path, or build it from an agent-d "
        f"checkout with `cargo build --release --locked --manifest-path crate/Cargo.toml` "
        f"and put crate/target/release on PATH"
    )


# --------------------------------------------------------------------------- running it


def read_kernel_json(path: Path) -> dict[str, Any]:
    """The reader's JSON document for ``path``, as printed (also for ``agent-d plan --json``).

    Raises :class:`ReaderError` when the document is an error object.
    """
    binary = reader_binary()
    try:
        proc = subprocess.run(
            [str(binary), str(path)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReaderUnavailable(f"could not run {binary}: {exc}") from exc
    if proc.returncode < 0:  # killed by a signal (a stack overflow aborts): the input did it, not the machine
        raise ReaderError(
            f"kernel-reader was killed by signal {-proc.returncode} while reading this file", path=str(path)
        )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReaderUnavailable(f"{binary} exited {proc.returncode} without JSON: {tail}") from None
    if not isinstance(doc, dict):
        raise ReaderUnavailable(f"{binary} printed JSON that is not an object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ReaderUnavailable(
            f"{binary} speaks schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}: rebuild it"
        )
    err = doc.get("error")
    if err is not None or proc.returncode != 0:
        err = err or {"message": f"kernel-reader exited {proc.returncode}"}
        raise ReaderError(
            str(err.get("message", "")), int(err.get("line", 0)), int(err.get("column", 0)), str(path)
        )
    if doc.get("refused"):
        raise KernelRefused(list(doc["refused"]), str(path))
    return doc


def read_kernel(path: Path, *, strict: bool = True) -> KernelSignature:
    """Read ``path`` (a cutile-rs ``kernel.rs``) into a :class:`KernelSignature`.

    With ``strict`` (the default), an error-level diagnostic in the document's ``warnings``
    (an entry the cutile macro would silently skip) raises :class:`ReaderError`; warnings are
    otherwise not carried by the typed value (see :func:`read_kernel_json`).
    """
    doc = read_kernel_json(path)
    if strict:
        for w in doc.get("warnings", []):
            if w.get("level") == "error":
                raise ReaderError(
                    f"{w.get('function', '')}: {w.get('message', '')}".lstrip(": "),
                    int(w.get("line", 0)),
                    int(w.get("column", 0)),
                    str(path),
                )
    return signature_from_json(doc)


# --------------------------------------------------------------------------- JSON -> types


def _generic(g: dict[str, Any]) -> Generic:
    return Generic(name=g["name"], kind=g["kind"], ty=g.get("ty", ""), bounds=tuple(g.get("bounds", ())))


def _param(p: dict[str, Any]) -> Param:
    return Param(
        name=p["name"],
        kind=p["kind"],
        elem=p.get("elem", ""),
        rank=p.get("rank"),
        ty=p.get("ty", ""),
        mutable=bool(p.get("mutable", False)),
        partition_type=p.get("partition_type", ""),
    )


def _file_use(u: dict[str, Any]) -> FileUse:
    return FileUse(
        name=u["name"], path=u["path"], glob=bool(u.get("glob", False)), line=int(u.get("line", 0))
    )


def _entry(e: dict[str, Any]) -> Entry:
    block = e.get("block", {})
    return Entry(
        name=e["name"],
        unsafe=bool(e["unsafe"]),
        public=bool(e["public"]),
        attr_args=dict(e.get("attr_args", {})),
        generics=tuple(_generic(g) for g in e.get("generics", [])),
        params=tuple(_param(p) for p in e.get("params", [])),
        outputs=tuple(e.get("outputs", [])),
        output_evidence=dict(e.get("output_evidence", {})),
        block=BlockUse(
            axes=int(block.get("axes", 0)),
            grid_stride=bool(block.get("grid_stride", False)),
            evidence=str(block.get("evidence", "")),
        ),
        line=int(e.get("line", 0)),
    )


def signature_from_json(doc: dict[str, Any]) -> KernelSignature:
    """Convert a reader document (schema_version 1, no ``error``) to the typed signature."""
    return KernelSignature(
        module=doc["module"],
        entries=tuple(_entry(e) for e in doc.get("entries", [])),
        path=str(doc.get("path", "")),
        file_uses=tuple(_file_use(u) for u in doc.get("file_uses", [])),
    )
