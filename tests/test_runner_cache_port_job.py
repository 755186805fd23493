"""``agent-d port-job`` with the runner's cargo cache: it builds in the cache it prepared, with the job's
own environment; the cache from the environment; an unusable cache; a seed without a cache."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from runner_cache_support import crate, fake_toolchain, make_seed, toolchain_env
from test_github_support import git, make_local_repo

from bot.build.runner_cache import cache_key
from bot.classify.types import Verdict, VerdictKind
from bot.github.artifact import read_artifact
from bot.report.types import PortResult
from bot.targets.types import KERNELS_CRATE

CANARY = "ghs_CanaryTokenValue0123456789abcdefXYZ"


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
