"""Shared pytest fixtures and hooks for the demo test suite."""

import os

import pytest
import torch

# tilegym picks its start-up backend at import ("cutile" unless CUTILE_TUTORIALS_BACKEND says
# otherwise) and refuses to import when that backend is missing.  Without cuda.tile, start on
# "triton" instead; every test still selects its own backend explicitly.
try:
    import cuda.tile.tune  # noqa: F401
except ImportError:
    os.environ.setdefault("CUTILE_TUTORIALS_BACKEND", "triton")


@pytest.fixture
def arch():
    """Compute capability of the current CUDA device, spelled like ``sm90``."""
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise RuntimeError("no CUDA device: these tests need an NVIDIA GPU visible to torch")
    major, minor = torch.cuda.get_device_capability()
    return f"sm{major}{minor}"


def pytest_make_parametrize_id(config, val, argname):
    """Readable auto ids; a "-" inside a value becomes "_" (``cutile-rs`` -> ``cutile_rs``).

    Explicit ``ids=`` given to ``parametrize`` do not pass through this hook.
    """
    if isinstance(val, (str, int, float, bool)) or val is None:
        return str(val).replace("-", "_")
    if isinstance(val, torch.dtype):
        return str(val)
    return None
