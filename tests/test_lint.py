"""The action, the workflows, the Dockerfile and the shell scripts pass their linters (actionlint,
hadolint, shellcheck)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    found = shutil.which(name)
    gopath = Path(os.environ.get("GOPATH") or Path.home() / "go") / "bin" / name
    if not found and gopath.is_file():
        found = str(gopath)
    if not found:
        pytest.fail(f"{name} is not installed: run scripts/setup.sh --test")
    return found


def test_workflows_pass_actionlint():
    files = sorted(str(p) for p in [*ROOT.glob(".github/workflows/*.yml"), *ROOT.glob("docs/examples/*.yml")])
    assert files, "no workflow files found"
    proc = subprocess.run([_tool("actionlint"), *files], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_passes_hadolint():
    proc = subprocess.run([_tool("hadolint"), "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shell_scripts_pass_shellcheck():
    files = [str(p) for p in sorted(ROOT.glob("scripts/*.sh"))] + [str(ROOT / ".ci" / "run")]
    assert len(files) >= 4, files  # setup.sh, tile_home.sh, image_demo.sh, .ci/run
    proc = subprocess.run([_tool("shellcheck"), *files], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_action_yml_declares_documented_inputs():
    import yaml

    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    for name, spec in action["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"
    for name, spec in action.get("outputs", {}).items():
        assert spec.get("description"), f"output {name} has no description"
