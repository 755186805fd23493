"""Stage "apply": format generated files with the checkout's own tools and write what changed.

Generated Python goes through ``ruff format`` run from the checkout, so its ruff settings
apply; generated Rust through ``rustfmt --edition 2024``. Wiring edits are written as
rendered. A file whose bytes would not change is not touched, so a re-run changes nothing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from bot.apply import local_edits
from bot.apply.types import ApplyResult
from bot.emit import wiring
from bot.emit.types import GeneratedFiles
from bot.errors import Blocked
from bot.ruff import ruff_command
from bot.targets.types import Target


def format_python(text: str, rel_path: str, repo: Path) -> str:
    proc = subprocess.run(
        [*ruff_command(), "format", "--stdin-filename", rel_path, "-"],
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


def apply(files: GeneratedFiles, repo: Path, force: bool = False) -> ApplyResult:
    """Write what changed; refuse (``Blocked`` host, nothing written) when that would overwrite a
    person's uncommitted edit of a file agent-d writes whole, unless ``force`` (``local_edits``)."""
    mine = [] if force else local_edits.endangered(files, repo)
    if mine:
        raise Blocked(
            "host",
            f"your uncommitted changes to {', '.join(mine)} would be overwritten by the generated "
            "files; nothing was written",
            host_fix="commit or stash them (or move them aside), or run again with --force to overwrite them",
        )
    result = ApplyResult([], [])
    for f in files.files:
        path = repo / f.path
        data = f.content.encode("utf-8")
        before = path.read_bytes() if path.is_file() else None
        if before == data:
            result.unchanged.append(f.path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        result.changed.append(f.path)
        result.previous[f.path] = before
    local_edits.remember(result.changed + result.unchanged, files, repo)
    return result


def withdraw(target: Target, applied: ApplyResult, alone: bool) -> list[str]:
    """Take back what ``apply`` wrote for ``target`` (the build faulted a file agent-d generated).

    The kernel's own files go back to their bytes before; its ``lib.rs`` block and package import
    are taken out, leaving other kernels' wiring; the wiring every cutile-rs op shares (selector,
    package imports, test parametrization) goes back only when ``alone`` (no other kernel of the
    change keeps its files). Returns the paths written."""
    repo = target.repo
    rel = lambda p: str(p.relative_to(repo))  # noqa: E731
    own = {rel(target.ffi_rs), rel(target.wrapper_py)}
    cut = {rel(path): without for path, without in wiring.own_wiring(target.crate_dir, target.ops_dir)}
    written = []
    for path in applied.changed:
        full = repo / path
        if path in cut and full.is_file():
            full.write_text(cut[path](full.read_text(encoding="utf-8"), target.op), encoding="utf-8")
        elif path in own or alone:
            before = applied.previous.get(path)
            if before is None:
                full.unlink(missing_ok=True)
            else:
                full.write_bytes(before)
        else:
            continue
        written.append(path)
    return written


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return "(no message)"
