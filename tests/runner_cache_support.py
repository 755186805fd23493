"""Helpers shared by the test_runner_cache_* modules (no tests here): a fake rustc/cargo that print
fixed versions, a minimal crate, and a seed folder holding one key's target and a cargo home."""

from __future__ import annotations

import os
from pathlib import Path

from bot.build import runner_cache

ROOT = Path(__file__).resolve().parent.parent
RUSTC_VV = (
    "rustc 1.89.0 (29483883e 2025-08-04)\nbinary: rustc\nhost: x86_64-unknown-linux-gnu\nrelease: 1.89.0"
)
CARGO_V = "cargo 1.89.0 (c24e10642 2025-06-23)"


def fake_toolchain(bin_dir: Path, rustc: str = RUSTC_VV, cargo: str = CARGO_V, env_dump: Path | None = None):
    """``rustc`` and ``cargo`` that print fixed versions (and optionally save the environment they ran in)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("rustc", rustc), ("cargo", cargo)):
        dump = f'{{ env; echo "cwd=$(pwd -P)"; }} > "{env_dump}.{name}"\n' if env_dump else ""
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{dump}cat <<'EOF'\n{text}\nEOF\n")
        script.chmod(0o755)


def toolchain_env(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(bin_dir.parent)}


def crate(path: Path, toml: str = '[package]\nname = "cutile-kernels"\nversion = "0.1.0"\n') -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "Cargo.toml").write_text(toml)
    return path


def make_seed(seed: Path, key: str) -> None:
    target = seed / "target" / key
    deps = target / "release" / "deps"
    deps.mkdir(parents=True)
    (deps / "libtiny_dep-0123.rlib").write_bytes(b"rlib bytes")
    (target / "release" / ".fingerprint").mkdir()
    (target / "release" / ".fingerprint" / "dep-lib-tiny_dep").write_bytes(b"dep-info")
    (target / "release" / "libtiny_dep.rlib").symlink_to("deps/libtiny_dep-0123.rlib")
    registry = seed / "cargo-home" / "registry" / "cache"
    registry.mkdir(parents=True)
    (registry / "cutile-0.2.0.crate").write_bytes(b"crate bytes")
    (seed / "cargo-home" / "credentials.toml").write_text('[registry]\ntoken = "never copied"\n')
    (seed / runner_cache.ROOT_LOCK).write_text("")
    for path in [*seed.rglob("*"), seed]:  # old, distinct mtimes: a copy that drops them shows
        if not path.is_symlink():
            os.utime(path, ns=(1_000_000_000_123, 1_000_000_000_123 + len(str(path))))


def toolchain_and_crate(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A fake toolchain in ``tmp_path/bin``, the environment that finds it, and a crate beside it."""
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir)
    return bin_dir, toolchain_env(bin_dir), crate(tmp_path / "crate")
