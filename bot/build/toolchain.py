"""What the build needs from the machine: cargo, libclang, and CUDA headers.

CUDA headers come from PyPI wheels when the machine has no toolkit, so a CPU-only machine
can build the crate: ``cuda-bindings`` only runs bindgen over ``cuda.h``/``curand.h`` and
loads libcuda at run time.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bot.errors import Blocked

# CUDA 13.0 headers: a driver of the 580 series (CUDA 13.0) accepts code built against them.
HEADER_WHEELS = ("nvidia-cuda-runtime==13.0.96", "nvidia-cuda-crt==13.0.88", "nvidia-curand==10.4.0.35")
REQUIRED_HEADERS = ("cuda.h", "curand.h", "crt/host_config.h")
# libclang itself, not libclang-cpp (which Debian ships alone with some LLVM packages; bindgen rejects it).
LIBCLANG_GLOBS = tuple(
    f"{d}/{name}"
    for d in ("/usr/lib/llvm-*/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64")
    for name in ("libclang.so*", "libclang-[0-9]*.so*")
)


@dataclass(frozen=True)
class Toolchain:
    cargo: str
    cuda_toolkit_path: Path
    libclang_dir: Path | None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CUDA_TOOLKIT_PATH"] = str(self.cuda_toolkit_path)
        if self.libclang_dir is not None and "LIBCLANG_PATH" not in env:
            env["LIBCLANG_PATH"] = str(self.libclang_dir)
        return env


def cache_dir() -> Path:
    return Path(os.environ.get("AGENT_D_CACHE") or Path.home() / ".cache" / "agent-d")


def _has_headers(root: Path) -> bool:
    return all((root / "include" / h).is_file() for h in REQUIRED_HEADERS)


def cuda_headers(cache: Path | None = None) -> Path:
    """A directory usable as CUDA_TOOLKIT_PATH (``include/cuda.h`` etc.), fetched from PyPI if needed."""
    for candidate in (os.environ.get("CUDA_TOOLKIT_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if candidate and _has_headers(Path(candidate)):
            return Path(candidate)
    root = (cache or cache_dir()) / "cuda-headers-13.0"
    if _has_headers(root):
        return root
    wheels = root.parent / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels), *HEADER_WHEELS],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise Blocked("env", f"CUDA headers unavailable: no toolkit here and pip download failed ({tail})")
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for spec in HEADER_WHEELS:
        name = spec.split("==")[0].replace("-", "_")
        version = spec.split("==")[1]
        matches = sorted(wheels.glob(f"{name}-{version}-*.whl"))
        if not matches:
            raise Blocked("env", f"CUDA headers unavailable: {spec} wheel not found after download")
        with zipfile.ZipFile(matches[0]) as zf:
            for member in zf.namelist():
                if "/include/" in member and not member.endswith("/"):
                    rel = member.split("/include/", 1)[1]
                    dest = staging / "include" / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(zf.read(member))
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    if not _has_headers(root):
        raise Blocked("env", f"CUDA headers incomplete under {root}: need {', '.join(REQUIRED_HEADERS)}")
    return root


def libclang_dir(globs: tuple[str, ...] = LIBCLANG_GLOBS) -> Path | None:
    explicit = os.environ.get("LIBCLANG_PATH")
    if explicit:
        return Path(explicit)
    for pattern in globs:
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[-1]).parent
    return None


def resolve(cache: Path | None = None) -> Toolchain:
    cargo = shutil.which("cargo")
    if not cargo:
        raise Blocked("env", "cargo is not on PATH: install a Rust toolchain (1.89 or newer)")
    clang = libclang_dir()
    if clang is None:
        raise Blocked(
            "env", "libclang not found (bindgen needs it): install Debian's libclang-dev or set LIBCLANG_PATH"
        )
    return Toolchain(cargo, cuda_headers(cache), clang)
