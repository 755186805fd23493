"""A cargo cache kept on a self-hosted runner between port jobs, which pull request code cannot
poison for other pull requests.

A cache root, the job's own and the seed alike, holds::

    <root>/cargo-home/       CARGO_HOME of the build: the registry index and downloaded crates
    <root>/target/<key>/     CARGO_TARGET_DIR for one crate manifest and one toolchain

``<key>`` (``cache_key``) hashes the crate's Cargo.lock (its Cargo.toml when it has no lock, as
TileGym's crate has not) with what ``rustc -vV`` and ``cargo -V`` print, so a new toolchain or
new dependencies get a target dir of their own instead of rebuilding over the old one. Without a
lock cargo resolves versions at build time, so one key may see newer releases over time; cargo
rebuilds what changed.

Who may write what. A port job builds pull request code, whose build scripts and proc-macros
run at build time and can leave anything in the target dir and in CARGO_HOME. So a job's root
belongs to one pull request (the workflow mounts that pull request's volume and no other), and
what every pull request starts from is the *seed*: a root written only by a trusted job that
builds the default branch (``agent-d seed-cache``), mounted read-only into port jobs. When the
job's own ``target/<key>`` is missing and the seed has one, ``prepare`` copies it (and the seed's
cargo-home, when the job has none yet) into the job's root.

The copy keeps mtimes and symlinks, since cargo decides freshness by comparing mtimes, and
modes with the owner's write bit added (the job builds in it). And the seed must have been built
at the same absolute path the job uses: cargo's fingerprints hash the absolute source paths of
registry crates (under CARGO_HOME), so a seed built elsewhere is rebuilt from scratch. In the
workflow both the seeding job and the port job mount their root at ``/agent-d-cache``.

Concurrency: ``prepare`` holds a lock file in the root while it copies and prunes, copies into
a temporary folder renamed into place (a copy cut short is never taken for a warm target), and
takes a shared lock on the seed's lock file, which ``build_seed`` holds for its whole build.
The build itself holds its own lock in the target dir (bot/build/build.py); pruning skips a target
dir whose lock is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bot.build.build import TARGET_LOCK

T = TypeVar("T")
log = logging.getLogger(__name__)

CARGO_HOME = "cargo-home"
TARGETS = "target"
ROOT_LOCK = ".agent-d-cache.lock"
PARTIAL = ".partial-"  # prefix of a copy not yet renamed into place
DEFAULT_KEEP = 2
KEY_HEX = 16
VERSION_TIMEOUT_S = 120.0  # rustup may install the toolchain a rust-toolchain.toml names
# Never carried from one CARGO_HOME into another: registry tokens.
NOT_COPIED = ("credentials", "credentials.toml")


class CacheUnavailable(RuntimeError):
    """The cache cannot be used for this build (no toolchain to key it by, no manifest)."""


@dataclass(frozen=True)
class KeyParts:
    """What went into a cache key, so a log line can say why a target dir was (not) reused."""

    manifest: str  # "Cargo.lock" or "Cargo.toml"
    manifest_sha256: str
    rustc: str  # `rustc -vV`, whole
    cargo: str  # `cargo -V`

    @property
    def key(self) -> str:
        digest = hashlib.sha256()
        for part in (self.manifest, self.manifest_sha256, self.rustc, self.cargo):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()[:KEY_HEX]

    def describe(self) -> str:
        rustc = self.rustc.splitlines()[0] if self.rustc else "?"
        return f"{self.key} = {self.manifest} {self.manifest_sha256[:12]}, {rustc[:80]}, {self.cargo[:80]}"


def key_parts(crate_dir: Path, toolchain_env: Mapping[str, str]) -> KeyParts:
    """The parts of ``crate_dir``'s key. The versions come from running ``rustc`` and ``cargo`` in the
    crate with the build's environment: a rust-toolchain.toml there picks the toolchain, as it
    does for the build."""
    for name in ("Cargo.lock", "Cargo.toml"):
        manifest = crate_dir / name
        if manifest.is_file():
            break
    else:
        raise CacheUnavailable(f"no Cargo.lock or Cargo.toml in {crate_dir}")
    return KeyParts(
        manifest.name,
        hashlib.sha256(manifest.read_bytes()).hexdigest(),
        _version(["rustc", "-vV"], crate_dir, toolchain_env),
        _version(["cargo", "-V"], crate_dir, toolchain_env),
    )


def cache_key(crate_dir: Path, toolchain_env: Mapping[str, str]) -> str:
    return key_parts(crate_dir, toolchain_env).key


def _version(cmd: list[str], cwd: Path, env: Mapping[str, str]) -> str:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CacheUnavailable(f"`{' '.join(cmd)}` did not run: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise CacheUnavailable(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {last}")
    return proc.stdout.strip()


@dataclass(frozen=True)
class CacheRoots:
    """Where a job's cache lives: its own root (read-write) and the seed (read-only), if any."""

    root: Path
    seed: Path | None = None
    keep: int = DEFAULT_KEEP


@dataclass(frozen=True)
class Prepared:
    parts: KeyParts
    target_dir: Path
    cargo_home: Path
    state: str  # "warm": the job's own target dir; "seeded": copied from the seed; "cold": new
    why: str
    pruned: tuple[str, ...] = ()

    def log_line(self) -> str:
        line = f"cargo cache {self.state}: key {self.parts.describe()}; {self.why}"
        if self.pruned:
            line += f"; pruned older keys {', '.join(self.pruned)}"
        return line


def prepare(roots: CacheRoots, crate_dir: Path, toolchain_env: Mapping[str, str]) -> Prepared:
    """The target dir and CARGO_HOME for building ``crate_dir`` in ``roots.root``: the job's own
    when it has one for this key, else a copy of the seed's, else a new one. Older keys beyond
    the newest ``roots.keep`` are deleted. The seed is only read."""
    parts = key_parts(crate_dir, toolchain_env)  # before any lock: it may run a rustup install
    roots.root.mkdir(parents=True, exist_ok=True)
    with _locked(roots.root / ROOT_LOCK, fcntl.LOCK_EX):
        return _prepare_locked(roots, parts, toolchain_env)


def build_seed(
    root: Path,
    crate_dir: Path,
    toolchain_env: Mapping[str, str],
    compile_into: Callable[[Path, Path], T],
    keep: int = DEFAULT_KEEP,
) -> tuple[Prepared, T]:
    """Fill ``root`` as a seed: ``compile_into(target_dir, cargo_home)`` runs while the root's lock is
    held, so a port job never copies a seed halfway through its build."""
    parts = key_parts(crate_dir, toolchain_env)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ROOT_LOCK, fcntl.LOCK_EX):
        prepared = _prepare_locked(CacheRoots(root, None, keep), parts, toolchain_env)
        return prepared, compile_into(prepared.target_dir, prepared.cargo_home)


def _prepare_locked(roots: CacheRoots, parts: KeyParts, env: Mapping[str, str]) -> Prepared:
    root, seed, key = roots.root, roots.seed, parts.key
    for left in root.glob(f"{PARTIAL}*"):  # a copy cut short by a killed job; we hold the lock
        shutil.rmtree(left, ignore_errors=True)
    target = root / TARGETS / key
    cargo_home = root / CARGO_HOME
    if target.is_dir():
        state, why = "warm", "built here with the same key before"
    elif seed is None:
        state, why = "cold", "no seed given"
    else:
        # looked at under the seed's lock: a seeding build may be replacing or pruning it
        with _locked(seed / ROOT_LOCK, fcntl.LOCK_SH, missing_ok=True):
            state, why = _from_seed(seed, key, target, cargo_home, root)
    target.mkdir(parents=True, exist_ok=True)
    if not cargo_home.exists():
        _start_cargo_home(cargo_home, env, root)
    os.utime(target)  # pruning keeps the most recently used
    pruned = prune(root / TARGETS, roots.keep, keep_also=target)
    return Prepared(parts, target, cargo_home, state, why, tuple(pruned))


def _from_seed(seed: Path, key: str, target: Path, cargo_home: Path, root: Path) -> tuple[str, str]:
    if not (seed / TARGETS / key).is_dir():
        others = _keys(seed / TARGETS)
        if others:
            return (
                "cold",
                f"the seed has no target/{key} (it has {', '.join(others)}: another manifest or toolchain)",
            )
        return "cold", "the seed is empty (has the seeding job run on this runner?)"
    _copy_into_place(seed / TARGETS / key, target, root)
    if not cargo_home.exists() and (seed / CARGO_HOME).is_dir():
        _copy_into_place(seed / CARGO_HOME, cargo_home, root)
    return "seeded", f"copied the seed's target/{key}"


def prune(targets: Path, keep: int, keep_also: Path | None = None) -> list[str]:
    """Delete all but the newest ``keep`` target dirs (by mtime); a dir whose build lock is held is
    left alone. The names of the deleted ones."""
    dirs = sorted(_dirs(targets), key=lambda d: d.stat().st_mtime_ns, reverse=True)
    removed = []
    for old in dirs[keep:]:
        if keep_also is not None and old == keep_also:
            continue
        with _try_lock(old / TARGET_LOCK) as got:
            if got:
                shutil.rmtree(old)
                removed.append(old.name)
    return removed


def _dirs(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return [d for d in folder.iterdir() if d.is_dir() and not d.is_symlink() and not d.name.startswith(".")]


def _keys(targets: Path) -> list[str]:
    return sorted(d.name for d in _dirs(targets))


def _copy_into_place(source: Path, dest: Path, root: Path) -> None:
    """``source`` copied to ``dest`` with mtimes and symlinks kept, all or nothing."""
    partial = root / f"{PARTIAL}{dest.name}-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        shutil.copytree(
            source,
            partial,
            symlinks=True,
            copy_function=shutil.copy2,
            ignore=shutil.ignore_patterns(*NOT_COPIED),
        )
        _owner_writable(partial)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(partial, dest)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _owner_writable(folder: Path) -> None:
    """The copy is the job's to build in, whatever the seed's modes were (a chmod keeps mtimes)."""
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            if not mode & stat.S_IWUSR:
                path.chmod(stat.S_IMODE(mode) | stat.S_IWUSR)


def _start_cargo_home(cargo_home: Path, env: Mapping[str, str], root: Path) -> None:
    """A new CARGO_HOME starts from the environment's own registry and config (the image's
    /opt/cargo holds the cutile crates it fetched), so moving CARGO_HOME costs no downloads."""
    inherited = Path(env.get("CARGO_HOME") or Path(env.get("HOME", "~")).expanduser() / ".cargo")
    partial = root / f"{PARTIAL}{CARGO_HOME}-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        if inherited.is_dir() and inherited.resolve() != cargo_home.resolve():
            for name in ("config.toml", "config"):
                if (inherited / name).is_file():
                    shutil.copy2(inherited / name, partial / name)
            for sub in ("registry/index", "registry/cache"):
                if (inherited / sub).is_dir():
                    shutil.copytree(inherited / sub, partial / sub, symlinks=True, copy_function=shutil.copy2)
        _owner_writable(partial)
        os.rename(partial, cargo_home)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path, how: int, missing_ok: bool = False) -> Iterator[None]:
    """flock ``path`` for the block, saying so when that means waiting (a seeding build holds its
    seed for minutes). ``missing_ok``: a lock file that does not exist (a seed on a read-only
    mount, never seeded) is no lock, and nothing is created."""
    try:
        fd = os.open(path, os.O_RDONLY if missing_ok else os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        if not missing_ok:
            raise
        yield
        return
    try:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("cargo cache: waiting for %s, held by another job", path.parent)
            fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def _try_lock(path: Path) -> Iterator[bool]:
    """Whether ``path``'s lock could be taken at once (a dir with no lock file is free)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
