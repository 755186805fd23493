"""tests/cargo_warm.py: the one cold build of the cutile crates that conftest runs before any test."""

from __future__ import annotations

import cargo_warm

from bot.errors import Blocked


def _fake_wheel(tmp_path):
    wheel = tmp_path / "wheel"
    (wheel / cargo_warm.CRATE).mkdir(parents=True)
    (wheel / cargo_warm.CRATE / "Cargo.toml").write_text('[package]\nname = "cutile-kernels"\n')
    return wheel


def test_warm_builds_the_wheels_crate_with_no_kernel_into_the_shared_target(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    wheel = _fake_wheel(tmp_path)
    stale_lock = cache / "cargo-warm/src/tilegym/ops/cutile_rs/cutile_kernels/Cargo.lock"
    stale_lock.parent.mkdir(parents=True)
    stale_lock.write_text("# resolved long ago\n")
    calls = []
    monkeypatch.setattr(cargo_warm, "tilegym_wheel", lambda c, v: wheel)
    monkeypatch.setattr(cargo_warm.toolchain, "resolve", lambda c: "toolchain")
    monkeypatch.setattr(cargo_warm.build, "build", lambda target, tc, target_dir, **kw: calls.append(
        (target.crate_dir, tc, target_dir, kw["timeout"])))  # fmt: skip
    lines = []
    assert cargo_warm.warm(cache, lines.append)
    ((crate, tc, target_dir, timeout),) = calls
    assert (crate / "Cargo.toml").read_text() == '[package]\nname = "cutile-kernels"\n'
    assert (crate / "src" / "lib.rs").read_text() == ""  # the dependencies only
    assert not stale_lock.exists()  # resolved now, as the tests' fresh checkouts are
    assert tc == "toolchain" and target_dir == cache / "cargo-target"
    assert timeout > 900  # longer than a test's limit: a loaded machine is slow, not broken
    assert lines[-1].startswith("[tests] cutile crates built in ")


def test_a_failed_warm_build_is_one_line_and_does_not_stop_the_session(tmp_path, monkeypatch):
    wheel = _fake_wheel(tmp_path)
    monkeypatch.setattr(cargo_warm, "tilegym_wheel", lambda c, v: wheel)

    def no_libclang(cache):
        raise Blocked("env", "libclang not found (bindgen needs it)\nmore detail")

    monkeypatch.setattr(cargo_warm.toolchain, "resolve", no_libclang)
    lines = []
    assert cargo_warm.warm(tmp_path / "cache", lines.append) is False
    assert lines[-1] == (
        "[tests] the cutile crates did not build (libclang not found (bindgen needs it)); "
        "the slow tests will say why"
    )
