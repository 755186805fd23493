"""The runner's cargo cache (bot/build/runner_cache.py): its key, the copy from the read-only seed, pruning,
a real cargo build that stays fresh after the copy, the port-job and seed-cache commands, and the
workflow that mounts it."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_github_support import git, make_local_repo
from workflow_support import run_dispatch_guard, workflow

from bot.build import runner_cache
from bot.build.build import TARGET_LOCK
from bot.build.runner_cache import CacheRoots, CacheUnavailable, cache_key, key_parts, prepare, prune
from bot.classify.types import Verdict, VerdictKind
from bot.github.artifact import read_artifact
from bot.report.types import PortResult
from bot.targets.types import KERNELS_CRATE, Target

ROOT = Path(__file__).resolve().parent.parent
RUSTC_VV = (
    "rustc 1.89.0 (29483883e 2025-08-04)\nbinary: rustc\nhost: x86_64-unknown-linux-gnu\nrelease: 1.89.0"
)
CARGO_V = "cargo 1.89.0 (c24e10642 2025-06-23)"
CANARY = "ghs_CanaryTokenValue0123456789abcdefXYZ"


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


# --------------------------------------------------------------------------- the build's environment


def test_the_pipelines_build_runs_cargo_with_the_port_options_target_dir_and_cargo_home(
    tmp_path, monkeypatch
):
    from bot import pipeline, progress
    from bot.build import shared_build, toolchain
    from bot.job import Job

    cargo = tmp_path / "cargo"  # records its environment, builds "the library" where cargo would
    cargo.write_text(
        "#!/bin/sh\n"
        f'env > "{tmp_path}/cargo-env"\n'
        'mkdir -p "$CARGO_TARGET_DIR/release" && : > "$CARGO_TARGET_DIR/release/libcutile_kernels.so"\n'
    )
    cargo.chmod(0o755)
    monkeypatch.setattr(
        toolchain, "resolve", lambda cache=None: toolchain.Toolchain(str(cargo), tmp_path, None)
    )
    target = Target(tmp_path / "repo", "x")
    target.crate_dir.mkdir(parents=True)
    options = pipeline.PortOptions(
        repo=target.repo,
        cargo_target_dir=tmp_path / "cache" / "target" / "k",
        cargo_home=tmp_path / "cache" / "cargo-home",
        out_root=tmp_path / "out",
        echo=progress.silent,
    )
    pipeline._build([Job.start(target, options)], options, shared_build.LeftOut())
    env = dict(
        line.split("=", 1) for line in (tmp_path / "cargo-env").read_text().splitlines() if "=" in line
    )
    assert env["CARGO_TARGET_DIR"] == str(tmp_path / "cache" / "target" / "k")
    assert env["CARGO_HOME"] == str(tmp_path / "cache" / "cargo-home")


# --------------------------------------------------------------------------- the key


def test_the_key_follows_the_lock_or_manifest_and_the_toolchain_and_nothing_else(tmp_path):
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir)
    env = toolchain_env(bin_dir)
    c = crate(tmp_path / "crate")
    first = cache_key(c, env)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert cache_key(c, env) == first  # stable
    (c / "src").mkdir()
    (c / "src" / "lib.rs").write_text("pub fn f() {}\n")  # sources are cargo's business, not the key's
    os.utime(c / "Cargo.toml", (1, 1))  # nor are mtimes
    assert cache_key(c, env) == first
    assert key_parts(c, env).manifest == "Cargo.toml"

    (c / "Cargo.toml").write_text((c / "Cargo.toml").read_text() + '\n[dependencies]\nlibc = "0.2"\n')
    by_toml = cache_key(c, env)
    assert by_toml != first

    (c / "Cargo.lock").write_text("version = 4\n")
    by_lock = cache_key(c, env)
    assert by_lock != by_toml and key_parts(c, env).manifest == "Cargo.lock"
    (c / "Cargo.toml").write_text((c / "Cargo.toml").read_text() + "# a comment\n")
    assert cache_key(c, env) == by_lock  # with a lock, the lock decides
    (c / "Cargo.lock").write_text('version = 4\n\n[[package]]\nname = "libc"\n')
    assert cache_key(c, env) != by_lock
    by_lock = cache_key(c, env)

    fake_toolchain(bin_dir, rustc=RUSTC_VV.replace("1.89.0", "1.90.0"))
    by_rustc = cache_key(c, env)
    assert by_rustc != by_lock
    fake_toolchain(bin_dir, rustc=RUSTC_VV.replace("1.89.0", "1.90.0"), cargo=CARGO_V.replace("c24e", "d00d"))
    assert cache_key(c, env) not in (by_rustc, by_lock)
    fake_toolchain(bin_dir)
    assert cache_key(c, env) == by_lock  # back to the first toolchain, back to its key
    parts = key_parts(c, env)
    assert parts.rustc == RUSTC_VV and parts.cargo == CARGO_V
    assert parts.describe().startswith(f"{by_lock} = Cargo.lock ")
    assert "rustc 1.89.0 (29483883e 2025-08-04)" in parts.describe()


def test_the_versions_come_from_the_crate_folder_with_the_given_environment(tmp_path):
    # a rust-toolchain.toml in the crate picks the toolchain: rustc must run there, as the build does
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rustc").write_text('#!/bin/sh\necho "rustc run in $(pwd -P) with X=$X"\n')
    (bin_dir / "cargo").write_text("#!/bin/sh\necho cargo 1.89.0\n")
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    env = {**toolchain_env(bin_dir), "X": "one"}
    a, b = crate(tmp_path / "a"), crate(tmp_path / "b")
    assert key_parts(a, env).rustc == f"rustc run in {a.resolve()} with X=one"
    assert cache_key(a, env) != cache_key(b, env)


def test_no_toolchain_or_no_manifest_means_no_cache(tmp_path):
    c = crate(tmp_path / "crate")
    with pytest.raises(CacheUnavailable, match="rustc -vV"):
        cache_key(c, {"PATH": str(tmp_path / "empty")})
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir)
    (bin_dir / "cargo").write_text("#!/bin/sh\necho 'error: no such toolchain' >&2\nexit 1\n")
    with pytest.raises(CacheUnavailable, match=r"cargo -V. failed \(exit 1\): error: no such toolchain"):
        cache_key(c, toolchain_env(bin_dir))
    with pytest.raises(CacheUnavailable, match="no Cargo.lock or Cargo.toml"):
        cache_key(tmp_path / "bin", toolchain_env(bin_dir))


# --------------------------------------------------------------------------- seed, warm, prune


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
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir)
    env = toolchain_env(bin_dir)
    c = crate(tmp_path / "crate")
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
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir)
    env = toolchain_env(bin_dir)
    c = crate(tmp_path / "crate")
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


# --------------------------------------------------------------------------- a real cargo build


def tiny_checkout(repo: Path) -> Path:
    """A TileGym-shaped checkout whose crate is a cdylib with a path dependency, no crates.io."""
    kernels = repo / KERNELS_CRATE
    dep = kernels.parent / "tiny_dep"
    (dep / "src").mkdir(parents=True)
    (dep / "Cargo.toml").write_text('[package]\nname = "tiny-dep"\nversion = "0.1.0"\nedition = "2021"\n')
    (dep / "src" / "lib.rs").write_text("pub fn answer() -> i32 { 42 }\n")
    (kernels / "src").mkdir(parents=True)
    (kernels / "Cargo.toml").write_text(
        '[package]\nname = "cutile-kernels"\nversion = "0.1.0"\nedition = "2021"\n\n'
        '[lib]\nname = "cutile_kernels"\ncrate-type = ["cdylib"]\n\n'
        '[dependencies]\ntiny-dep = { path = "../tiny_dep" }\n'
    )
    (kernels / "src" / "lib.rs").write_text(
        '#[no_mangle]\npub extern "C" fn cutile_answer() -> i32 { tiny_dep::answer() }\n'
    )
    return kernels


def fresh_by_package(crate_dir: Path, target_dir: Path, cargo_home: Path) -> dict[str, bool]:
    """cargo's own word, per package, on whether it reused the build (``fresh``)."""
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir), "CARGO_HOME": str(cargo_home)}
    proc = subprocess.run(
        ["cargo", "build", "--release", "--offline", "--message-format=json"],
        cwd=crate_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    artifacts = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {a["target"]["name"]: a["fresh"] for a in artifacts if a.get("reason") == "compiler-artifact"}


def test_a_seed_built_at_the_jobs_path_keeps_a_real_cargo_build_fresh_after_the_copy(
    tmp_path, monkeypatch, capsys
):
    from bot.build import toolchain
    from bot.cli import main

    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.fail("cargo is part of the test environment")
    image_home = tmp_path / "image-cargo"  # stands in for the image's CARGO_HOME
    image_home.mkdir()
    (image_home / "config.toml").write_text("[net]\noffline = true\n")  # nothing here may reach crates.io
    monkeypatch.setenv("CARGO_HOME", str(image_home))
    monkeypatch.setenv("CARGO_NET_OFFLINE", "true")
    monkeypatch.setattr(toolchain, "resolve", lambda cache=None: toolchain.Toolchain(cargo, tmp_path, None))
    checkout = tmp_path / "checkout"
    kernels = tiny_checkout(checkout)
    cache_path = tmp_path / "agent-d-cache"  # the one absolute path both jobs use

    assert main(["seed-cache", "--repo", str(checkout), "--cargo-cache", str(cache_path)]) == 0, (
        capsys.readouterr()
    )
    out = capsys.readouterr()
    assert "agent-d: seed cargo cache cold" in out.err and "seed ready" in out.out
    [key] = [p.name for p in (cache_path / "target").iterdir()]
    assert (cache_path / "target" / key / "release" / "libcutile_kernels.so").is_file()
    assert (cache_path / "cargo-home" / "config.toml").is_file()

    # The seed moves to where the port job mounts it read-only; the job's own root takes the path.
    seed = tmp_path / "agent-d-seed"
    cache_path.rename(seed)
    (kernels / "Cargo.lock").unlink()  # a fresh checkout has none: the key is the Cargo.toml's again
    got = prepare(CacheRoots(cache_path, seed), kernels, dict(os.environ))
    assert (got.state, got.parts.key) == ("seeded", key)
    mtimes = {
        p.relative_to(seed / "target" / key): p.lstat().st_mtime_ns
        for p in (seed / "target" / key).rglob("*")
    }
    assert {p.relative_to(got.target_dir): p.lstat().st_mtime_ns for p in got.target_dir.rglob("*")} == mtimes

    assert fresh_by_package(kernels, got.target_dir, got.cargo_home) == {
        "tiny_dep": True,
        "cutile_kernels": True,
    }
    # the check above can fail: a dependency whose source changed is not fresh, nor what uses it
    os.utime(kernels.parent / "tiny_dep" / "src" / "lib.rs")
    assert fresh_by_package(kernels, got.target_dir, got.cargo_home) == {
        "tiny_dep": False,
        "cutile_kernels": False,
    }


def test_seed_cache_usage_errors(tmp_path, monkeypatch, capsys):
    from bot.cli import main

    monkeypatch.delenv("AGENT_D_CARGO_CACHE", raising=False)
    (tmp_path / "repo").mkdir()
    assert main(["seed-cache", "--repo", str(tmp_path / "repo")]) == 2
    assert "--cargo-cache DIR (or $AGENT_D_CARGO_CACHE) is required" in capsys.readouterr().err
    assert main(["seed-cache", "--repo", str(tmp_path / "repo"), "--cargo-cache", str(tmp_path / "c")]) == 2
    assert f"no {KERNELS_CRATE}/Cargo.toml" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()  # a usage error writes nothing


# --------------------------------------------------------------------------- port-job


@pytest.fixture
def port_repo(tmp_path):
    """A checkout at its head with the kernels crate's Cargo.toml, and rustc/cargo that record their env."""
    repo = tmp_path / "repo"
    make_local_repo(repo)
    crate(repo / KERNELS_CRATE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "crate manifest")
    return repo, git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def captured_options(monkeypatch):
    """The PortOptions the pipeline gets from port-job (the pipeline itself does not run)."""
    from bot import pipeline

    seen = []

    def port_all(targets, options):
        seen.append(options)
        return [PortResult(t, Verdict(VerdictKind.BLOCKED, "env", "no GPU here"), [], "") for t in targets]

    monkeypatch.setattr(pipeline, "port_all", port_all)
    return seen


def port_job(repo: Path, head: str, artifact: Path, *extra: str) -> int:
    from bot.cli import main

    # the base is the head itself: its crate manifest is the base branch's in these tests
    return main(["port-job", "--repo", str(repo), "--head-sha", head, "--base-sha", head,
                 "--kernel", "silu_and_mul", "--artifact", str(artifact), *extra])  # fmt: skip


def test_port_job_builds_in_the_cache_it_prepared_with_the_jobs_own_environment(
    port_repo, captured_options, tmp_path, monkeypatch, caplog
):
    repo, head = port_repo
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir, env_dump=tmp_path / "env")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("GITHUB_TOKEN", CANARY)
    monkeypatch.setenv("NPM_AUTH", CANARY)
    key = cache_key(repo / KERNELS_CRATE, toolchain_env(bin_dir))
    seed = tmp_path / "seed"
    make_seed(seed, key)
    cache = tmp_path / "cache"
    caplog.set_level(logging.INFO)  # as the job's own logging (redact.install) is
    assert port_job(repo, head, tmp_path / "art", "--cargo-cache", str(cache), "--cargo-seed", str(seed)) == 0
    [options] = captured_options
    assert options.cargo_target_dir == cache / "target" / key
    assert options.cargo_home == cache / "cargo-home"
    assert (cache / "target" / key / "release" / "libtiny_dep.rlib").is_symlink()  # the seed's copy
    [line] = [r.getMessage() for r in caplog.records if "cargo cache" in r.getMessage()]
    assert line.startswith(f"cargo cache seeded: key {key} = Cargo.toml ")
    assert line in read_artifact(tmp_path / "art").logs["silu_and_mul.txt"]  # why, kept with the verdict
    # rustc ran in the checkout (PR code may pick it) with the job's allow-listed environment only
    for name in ("rustc", "cargo"):
        dumped = Path(f"{tmp_path / 'env'}.{name}").read_text()
        assert CANARY not in dumped and "GITHUB_TOKEN" not in dumped and "NPM_AUTH" not in dumped
        assert f"cwd={(repo / KERNELS_CRATE).resolve()}" in dumped


def test_port_job_takes_the_cache_from_the_environment_and_builds_as_before_without_one(
    port_repo, captured_options, tmp_path, monkeypatch
):
    repo, head = port_repo
    bin_dir = tmp_path / "bin"
    fake_toolchain(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv("AGENT_D_CARGO_SEED", raising=False)
    monkeypatch.delenv("AGENT_D_CARGO_CACHE", raising=False)
    assert port_job(repo, head, tmp_path / "a1") == 0
    assert (captured_options[-1].cargo_target_dir, captured_options[-1].cargo_home) == (None, None)
    monkeypatch.setenv("AGENT_D_CARGO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AGENT_D_CARGO_SEED", "")  # the workflow's "no seed"
    assert port_job(repo, head, tmp_path / "a2") == 0
    key = cache_key(repo / KERNELS_CRATE, toolchain_env(bin_dir))
    assert captured_options[-1].cargo_target_dir == tmp_path / "cache" / "target" / key


def test_port_job_with_an_unusable_cache_says_so_and_builds_without_it(
    port_repo, captured_options, tmp_path, monkeypatch, caplog
):
    repo, head = port_repo
    fake_toolchain(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    (tmp_path / "not-a-dir").write_text("")  # as a volume docker made for root would be: unwritable
    assert port_job(repo, head, tmp_path / "a", "--cargo-cache", str(tmp_path / "not-a-dir")) == 0
    assert (captured_options[-1].cargo_target_dir, captured_options[-1].cargo_home) == (None, None)
    [line] = [r.getMessage() for r in caplog.records if "cargo cache" in r.getMessage()]
    assert line.startswith("cargo cache off: ") and line.endswith("; building without it")


def test_port_job_refuses_a_seed_without_a_cache(port_repo, tmp_path, capsys):
    repo, head = port_repo
    assert port_job(repo, head, tmp_path / "a", "--cargo-seed", str(tmp_path)) == 2
    assert "give --cargo-cache too" in capsys.readouterr().err


# --------------------------------------------------------------------------- the workflow


def test_the_port_job_mounts_its_own_pull_requests_volume_and_the_seed_read_only():
    wf = workflow()
    assert wf[True]["workflow_call"]["inputs"]["runner-cache"]["default"] == ""  # YAML 1.1: `on` is True
    port = wf["jobs"]["port"]
    options = port["container"]["options"]
    sandbox = "--security-opt seccomp=unconfined --security-opt apparmor=unconfined"  # bwrap's namespaces
    assert options.startswith("${{ inputs.runner-cache != '' && format(") and options.endswith(
        f"|| '--gpus all {sandbox}' }}}}"
    )  # empty input: the options of before, no mount
    args = "inputs.runner-cache, github.repository_id, needs.dispatch.outputs.pr"
    mounts = re.search(rf"format\('([^']*)', {args}\)", options)
    assert mounts, options
    assert mounts.group(1) == (
        f"--gpus all {sandbox} -v {{0}}-{{1}}-pr-{{2}}:/agent-d-cache -v {{0}}-{{1}}-seed:/agent-d-seed:ro"
    )
    [step] = [s for s in port["steps"] if "agent-d port-job" in s.get("run", "")]
    assert step["env"]["AGENT_D_CARGO_CACHE"] == "${{ inputs.runner-cache != '' && '/agent-d-cache' || '' }}"
    assert step["env"]["AGENT_D_CARGO_SEED"] == "${{ inputs.runner-cache != '' && '/agent-d-seed' || '' }}"


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("", True),
        ("agent-d-cargo", True),
        ("tilegym.cache_2", True),
        ("agent-d-cargo --privileged", False),  # a second docker option
        ("/srv/cache", False),  # a host path would be a bind mount docker creates owned by root
        ("cache:/etc", False),
        ("-v", False),
    ],
)
def test_the_runner_cache_input_must_be_a_volume_name(name, accepted):
    index, proc = run_dispatch_guard("RUNNER_CACHE", name)
    assert index == 1, "checked before anything of the event is read"
    assert (proc.returncode == 0) == accepted, proc.stdout + proc.stderr


def test_the_seed_workflow_in_the_docs_is_the_linted_example():
    example = (ROOT / "docs/examples/tilegym-agent-d-seed.yml").read_text()
    docs = (ROOT / "docs/github.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", docs, re.S)
    assert example in blocks
    seed = yaml.safe_load(example)["jobs"]["seed"]
    # the port jobs' seed volume (prefix agent-d-cargo), at the path they build at
    assert seed["container"]["options"] == "-v agent-d-cargo-${{ github.repository_id }}-seed:/agent-d-cache"
    assert "pull_request" not in str(yaml.safe_load(example)[True]) and "issue_comment" not in example
