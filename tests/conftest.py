"""Shared fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.wheel import WheelUnavailable, default_cache_dir
from bot.wheel import tilegym_wheel as _fetch_tilegym_wheel

TILEGYM_VERSION = "1.5.1"

# scripts/gpu_proof.py's package `gpu` (standard library only), imported by the test_gpu_* files
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


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
    path = default_cache_dir() / "cargo-target"
    path.mkdir(parents=True, exist_ok=True)
    return path
