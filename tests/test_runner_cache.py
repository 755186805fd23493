"""The runner's cargo cache: the build runs cargo with the cache's target dir and CARGO_HOME."""

from __future__ import annotations

from pathlib import Path

from bot.types import Target

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- the build's environment


def test_the_pipelines_build_runs_cargo_with_the_port_options_target_dir_and_cargo_home(
    tmp_path, monkeypatch
):
    from bot import pipeline, progress, shared_build, toolchain

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
    pipeline._build([pipeline._Job.start(target, options)], options, shared_build.LeftOut())
    env = dict(
        line.split("=", 1) for line in (tmp_path / "cargo-env").read_text().splitlines() if "=" in line
    )
    assert env["CARGO_TARGET_DIR"] == str(tmp_path / "cache" / "target" / "k")
    assert env["CARGO_HOME"] == str(tmp_path / "cache" / "cargo-home")
