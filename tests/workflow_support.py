"""The reusable workflow's dispatch job, read as data, and its input guards run with bash."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "agent-d.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def run_dispatch_guard(variable: str, value: str) -> tuple[int, subprocess.CompletedProcess]:
    """The dispatch step that checks the input passed as ``variable``: its position among the
    steps, and what its script does with ``value``."""
    steps = workflow()["jobs"]["dispatch"]["steps"]
    [guard] = [s for s in steps if variable in s.get("env", {})]
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", guard["run"]],
        env={"PATH": os.environ["PATH"], variable: value},
        capture_output=True,
        text=True,
    )
    return steps.index(guard), proc
