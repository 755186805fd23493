"""The runner's cargo cache (bot/build/runner_cache.py): a job's copy from the read-only seed (mtimes,
links, no tokens, nothing half copied, one copy for two jobs), warm reuse, cold starts, pruning, and the
seeding build's lock."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from runner_cache_support import (
    ROOT,
    RUSTC_VV,
    crate,
    fake_toolchain,
    make_seed,
    toolchain_and_crate,
    toolchain_env,
)

from bot.build import runner_cache
from bot.build.build import TARGET_LOCK
from bot.build.runner_cache import CacheRoots, cache_key, prepare, prune


def snapshot(folder: Path, modes: bool = True) -> dict[str, tuple]:
    """Every entry under ``folder``: kind, mtime, content (or link target) and, with ``modes``, mode."""
    out: dict[str, tuple] = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        if path.is_symlink():
            what = ("link", os.readlink(path))
        elif path.is_dir():
            what = ("dir",)
        else:
            what = ("file", path.read_bytes())
        mode = (stat.S_IMODE(st.st_mode),) if modes else ()
        out[str(path.relative_to(folder))] = (*what, *mode, st.st_mtime_ns)
    out["."] = ("dir", *((stat.S_IMODE(folder.stat().st_mode),) if modes else ()), folder.stat().st_mtime_ns)
    return out


def read_only(folder: Path) -> None:
    for path in [*folder.rglob("*"), folder]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~0o222)


def writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


@pytest.fixture
def job(tmp_path):
    """A crate, a fake toolchain, its key, a read-only seed holding that key, and a job root."""
    bin_dir, env, c = toolchain_and_crate(tmp_path)
    key = cache_key(c, env)
    seed = tmp_path / "seed"
    make_seed(seed, key)
    before = snapshot(seed)
    read_only(seed)
    yield c, env, key, seed, tmp_path / "job"
    writable(seed)
    assert snapshot(seed) == before, "the seed was written"


def test_a_job_without_its_target_copies_the_seed_with_mtimes_and_links_and_never_writes_it(job):
    c, env, key, seed, root = job
    got = prepare(CacheRoots(root, seed), c, env)
    assert got.state == "seeded" and got.target_dir == root / "target" / key
    assert got.cargo_home == root / "cargo-home"
    assert f"cargo cache seeded: key {key} = Cargo.toml" in got.log_line()
    copied = snapshot(got.target_dir, modes=False)
    original = snapshot(seed / "target" / key, modes=False)
    copied.pop("."), original.pop(".")  # the job's own dir is touched: pruning keeps the newest
    assert copied == original  # bytes, mtimes to the nanosecond, the symlink as a symlink
    assert (got.target_dir / "release" / "libtiny_dep.rlib").is_symlink()
    # the seed is read-only; its copy is the job's to build in
    assert all(p.lstat().st_mode & stat.S_IWUSR for p in got.target_dir.rglob("*") if not p.is_symlink())
    home = snapshot(got.cargo_home, modes=False)
    crate_file = "registry/cache/cutile-0.2.0.crate"
    assert home[crate_file] == snapshot(seed / "cargo-home", modes=False)[crate_file]
    assert "credentials.toml" not in home  # a registry token never travels
    assert not list(root.glob(".partial-*"))


def test_a_job_with_its_own_target_uses_it_and_copies_nothing(job):
    c, env, key, seed, root = job
    prepare(CacheRoots(root, seed), c, env)
    own = root / "target" / key
    (own / "release" / "deps" / "libtiny_dep-0123.rlib").unlink()  # the job's own state, whatever it is
    (own / "built-by-this-pr").write_text("")
    again = prepare(CacheRoots(root, seed), c, env)
    assert again.state == "warm" and again.target_dir == own
    assert "same key before" in again.why
    assert not (own / "release" / "deps" / "libtiny_dep-0123.rlib").exists()  # not copied again
    assert (own / "built-by-this-pr").exists()


def test_a_seed_without_the_key_is_a_cold_start_that_says_why(job, tmp_path):
    c, env, key, seed, root = job
    fake_toolchain(tmp_path / "bin", rustc=RUSTC_VV.replace("1.89.0", "1.91.0"))
    got = prepare(CacheRoots(root, seed), c, env)
    assert got.state == "cold" and got.target_dir.is_dir() and not any(got.target_dir.iterdir())
    assert f"the seed has no target/{got.parts.key} (it has {key}: another manifest or toolchain)" in got.why
    fake_toolchain(tmp_path / "bin")
    assert prepare(CacheRoots(tmp_path / "job2"), c, env).why == "no seed given"
    empty = prepare(CacheRoots(tmp_path / "job3", tmp_path / "no-seed-here"), c, env)
    assert empty.state == "cold" and "the seed is empty" in empty.why
    assert not (tmp_path / "no-seed-here").exists()  # reading a seed creates nothing


def test_a_copy_cut_short_leaves_nothing_that_looks_warm(job, monkeypatch):
    c, env, key, seed, root = job
    real_copy2 = shutil.copy2
    calls = []

    def copy2_then_disk_full(src, dst, **kw):
        calls.append(src)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_copy2(src, dst, **kw)

    monkeypatch.setattr(shutil, "copy2", copy2_then_disk_full)
    with pytest.raises(OSError):
        prepare(CacheRoots(root, seed), c, env)
    assert not (root / "target" / key).exists() and not list(root.glob(".partial-*"))
    monkeypatch.setattr(shutil, "copy2", real_copy2)
    (root / ".partial-left-by-a-killed-job").mkdir()
    assert prepare(CacheRoots(root, seed), c, env).state == "seeded"
    assert not list(root.glob(".partial-*"))


def test_two_jobs_preparing_at_once_copy_the_seed_once(job):
    c, env, key, seed, root = job
    code = (
        "import sys, json; from pathlib import Path; from bot.build.runner_cache import CacheRoots, prepare;"
        "print(prepare(CacheRoots(Path(sys.argv[1]), Path(sys.argv[2])), Path(sys.argv[3]),"
        " json.loads(sys.argv[4])).state)"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(root), str(seed), str(c), json.dumps(env)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for _ in range(2)
    ]
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sorted(out.strip() for out, _ in outs) == ["seeded", "warm"]


def test_pruning_keeps_the_newest_and_any_target_a_build_holds(tmp_path):
    targets = tmp_path / "target"
    for n, name in enumerate(["oldest", "old", "newer", "newest"]):
        (targets / name).mkdir(parents=True)
        (targets / name / TARGET_LOCK).write_text("")
        os.utime(targets / name, (1_000_000 + n, 1_000_000 + n))
    assert sorted(prune(targets, keep=2)) == ["old", "oldest"]
    assert sorted(p.name for p in targets.iterdir()) == ["newer", "newest"]

    for n, name in enumerate(["a", "b", "c"]):
        (targets / name).mkdir()
        (targets / name / TARGET_LOCK).write_text("")
        os.utime(targets / name, (n, n))  # older than newer/newest
    with open(targets / "a" / TARGET_LOCK) as held:  # a build of another job is using "a"
        fcntl.flock(held, fcntl.LOCK_EX)
        assert sorted(prune(targets, keep=2)) == ["b", "c"]
    assert sorted(p.name for p in targets.iterdir()) == ["a", "newer", "newest"]
    assert prune(targets, keep=3) == []


def test_prepare_touches_the_target_it_uses_and_prunes_the_rest(job):
    c, env, key, seed, root = job
    for n, old in enumerate(["k-old-1", "k-old-2", "k-old-3"]):
        (root / "target" / old).mkdir(parents=True)
        os.utime(root / "target" / old, (100 + n, 100 + n))
    got = prepare(CacheRoots(root, seed, keep=2), c, env)
    assert sorted(got.pruned) == ["k-old-1", "k-old-2"]
    assert sorted(p.name for p in (root / "target").iterdir()) == sorted([key, "k-old-3"])
    assert "pruned older keys" in got.log_line()


def test_the_seeding_build_holds_the_seed_so_no_job_copies_it_half_built(tmp_path):
    bin_dir, env, c = toolchain_and_crate(tmp_path)
    seen = []

    def compile_into(target_dir: Path, cargo_home: Path) -> str:
        # the lock a port job takes before it copies the seed
        with open(tmp_path / "seed" / runner_cache.ROOT_LOCK) as lock, pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        seen.append((target_dir, cargo_home))
        return "built"

    prepared, result = runner_cache.build_seed(tmp_path / "seed", c, env, compile_into)
    assert result == "built" and seen == [(prepared.target_dir, prepared.cargo_home)]
    assert prepared.target_dir == tmp_path / "seed" / "target" / cache_key(c, env)
    with open(tmp_path / "seed" / runner_cache.ROOT_LOCK) as lock:
        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free again


def test_a_new_cargo_home_starts_from_the_environments_registry_and_config_not_its_tokens(tmp_path):
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir)
    image_home = tmp_path / "opt-cargo"  # the image's CARGO_HOME, with the crates it fetched
    (image_home / "registry" / "cache" / "index.crates.io-x").mkdir(parents=True)
    (image_home / "registry" / "cache" / "index.crates.io-x" / "cutile-0.2.0.crate").write_bytes(b"c")
    (image_home / "registry" / "index").mkdir()
    (image_home / "bin").mkdir()
    (image_home / "bin" / "cargo").write_text("a rustup proxy")
    (image_home / "config.toml").write_text("[net]\noffline = true\n")
    (image_home / "credentials.toml").write_text('token = "secret"\n')
    env = {**toolchain_env(bin_dir), "CARGO_HOME": str(image_home)}
    got = prepare(CacheRoots(tmp_path / "job"), crate(tmp_path / "crate"), env)
    home = sorted(str(p.relative_to(got.cargo_home)) for p in got.cargo_home.rglob("*"))
    assert home == [
        "config.toml",
        "registry",
        "registry/cache",
        "registry/cache/index.crates.io-x",
        "registry/cache/index.crates.io-x/cutile-0.2.0.crate",
        "registry/index",
    ]
