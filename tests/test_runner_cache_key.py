"""The runner's cargo cache (bot/build/runner_cache.py): the environment the pipeline's build runs cargo
with, and the cache key (lock or manifest and toolchain, nothing else)."""

from __future__ import annotations

import os
import re

import pytest
from runner_cache_support import CARGO_V, RUSTC_VV, crate, fake_toolchain, toolchain_and_crate, toolchain_env

from bot.build.runner_cache import CacheUnavailable, cache_key, key_parts
from bot.targets.types import Target


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


def test_the_key_follows_the_lock_or_manifest_and_the_toolchain_and_nothing_else(tmp_path):
    bin_dir, env, c = toolchain_and_crate(tmp_path)
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
