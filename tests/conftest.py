"""Shared fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cargo_warm import TILEGYM_VERSION, cargo_target, warm

from bot.wheel import WheelUnavailable, default_cache_dir
from bot.wheel import tilegym_wheel as _fetch_tilegym_wheel

# scripts/gpu_proof.py's package `gpu` (standard library only), imported by the test_gpu_* files
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The cold build of the cutile crates, once, before the first test's timeout starts."""
    if session.config.option.collectonly or not any(i.get_closest_marker("slow") for i in session.items):
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    if capture is None:  # -p no:capture
        warm(default_cache_dir())
        return
    with capture.global_and_fixture_disabled():  # its heartbeat must reach the terminal
        warm(default_cache_dir())


@pytest.fixture(scope="session")
def tilegym_wheel() -> Path:
    """Root of the unpacked ``tilegym==1.5.1`` wheel (the folder holding ``tilegym/``).

    The wheel is fetched with ``pip download --no-deps`` into ``$AGENT_D_CACHE/wheels`` (default
    ``~/.cache/agent-d/wheels``) on first use and reused afterwards. Tests that need it fail
    when it can be neither found nor downloaded (PyPI is part of the test environment).
    """
    try:
        return _fetch_tilegym_wheel(default_cache_dir(), TILEGYM_VERSION)
    except WheelUnavailable as exc:
        pytest.fail(f"tilegym=={TILEGYM_VERSION} wheel unavailable: {str(exc).splitlines()[0]}")


@pytest.fixture(scope="session")
def cargo_target_dir() -> Path:
    """One cargo target folder for every test build: the cutile crates compile once per machine."""
    path = cargo_target(default_cache_dir())
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture()
def carrying_gives_way(monkeypatch):
    """Plans as they are when the reference cannot be carried: the plan's own wrapper half, which a
    row kernel (silu_and_mul, swiglu) still has without a contract (its row defaults need only the
    reference's output columns), and which renders a porter's contract that states the wrapper."""
    import bot.plan

    monkeypatch.setattr(bot.plan, "carry_into", lambda *args, **kwargs: (None, None))
