"""How agent-d runs ruff (its formatter for the generated Python, its linter for the check)."""

from __future__ import annotations

import shutil
import sys


def ruff_command() -> list[str]:
    """ruff on PATH, else the one installed beside agent-d's Python."""
    ruff = shutil.which("ruff")
    return [ruff] if ruff else [sys.executable, "-m", "ruff"]
