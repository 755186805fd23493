"""Stage "apply": format generated files with the checkout's own tools and write what changed.

Generated Python goes through ``ruff format`` run from the checkout, so its ruff settings
apply; generated Rust through ``rustfmt --edition 2024``. Wiring edits are written as
rendered. A file whose bytes would not change is not touched, so a re-run changes nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from bot.errors import Blocked
from bot.types import ApplyResult, GeneratedFiles


def format_python(text: str, rel_path: str, repo: Path) -> str:
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    proc = subprocess.run(
        [*cmd, "format", "--stdin-filename", rel_path, "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=repo,
    )
    if proc.returncode != 0:
        raise Blocked(
            "env" if "No module named" in proc.stderr else "host",
            f"ruff format failed on {rel_path}: {_first_line(proc.stderr)}",
        )
    return proc.stdout


def format_rust(text: str, rel_path: str) -> str:
    rustfmt = shutil.which("rustfmt")
    if not rustfmt:
        raise Blocked("env", "rustfmt is not on PATH (install the Rust toolchain's rustfmt component)")
    proc = subprocess.run(
        [rustfmt, "--edition", "2024", "--emit", "stdout"], input=text, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise Blocked("host", f"rustfmt rejected generated {rel_path}: {_first_line(proc.stderr)}")
    return proc.stdout


def formatted(files: GeneratedFiles, repo: Path) -> GeneratedFiles:
    for f in files.files:
        if f.kind != "new":
            continue
        if f.path.endswith(".py"):
            f.content = format_python(f.content, f.path, repo)
        elif f.path.endswith(".rs"):
            f.content = format_rust(f.content, f.path)
    return files


def apply(files: GeneratedFiles, repo: Path) -> ApplyResult:
    changed, unchanged = [], []
    for f in files.files:
        path = repo / f.path
        data = f.content.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            unchanged.append(f.path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        changed.append(f.path)
    return ApplyResult(changed, unchanged)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return "(no message)"
