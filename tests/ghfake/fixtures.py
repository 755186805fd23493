"""pytest fixtures.  Enable with ``pytest_plugins = ["ghfake.fixtures"]`` (see docs/testing-github.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .assets import Assets, ensure_assets
from .fake import GitHubFake
from .spec import Spec, load_spec


@pytest.fixture(scope="session")
def ghfake_assets() -> Assets:
    """npm assets (downloaded once into $AGENT_D_CACHE/npm or ~/.cache/agent-d/npm)."""
    return ensure_assets()


@pytest.fixture(scope="session")
def ghfake_spec(ghfake_assets: Assets) -> Spec:
    """The REST description, parsed and indexed once per session."""
    return load_spec(ghfake_assets.spec_path)


@pytest.fixture
def github_fake(ghfake_spec: Spec, ghfake_assets: Assets, tmp_path: Path) -> Iterator[GitHubFake]:
    """A fresh fake GitHub per test.  Teardown fails the test on any contract violation;
    a test that provokes violations on purpose clears ``fake.violations`` itself."""
    fake = GitHubFake(ghfake_spec, ghfake_assets, tmp_path / "ghfake").start()
    try:
        yield fake
    finally:
        fake.stop()
    fake.assert_clean()
