"""The runner's cargo cache with a real cargo: a seed built by ``agent-d seed-cache`` at the jobs' path
keeps the build fresh after the copy; the seed-cache command's usage errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.build.runner_cache import CacheRoots, prepare
from bot.targets.types import KERNELS_CRATE


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
