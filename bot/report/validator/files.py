"""Where the built-in validator finds what it checks in the checkout, and how it reads a file
(never raising: an unreadable file is a missing one)."""

from __future__ import annotations

import re
from pathlib import Path

SO_NAME = "libcutile_kernels.so"


def read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def nonempty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def count_lines_with(text: str, word: str) -> int:
    """``grep -c word``: lines (split on newline only) that contain ``word``."""
    return sum(1 for line in text.split("\n") if word in line)


def default_so_path(repo: Path) -> Path:
    """Where ``cargo build --release`` in the checkout's crate puts the cdylib."""
    return (
        Path(repo)
        / "src"
        / "tilegym"
        / "ops"
        / "cutile_rs"
        / "cutile_kernels"
        / "target"
        / "release"
        / SO_NAME
    )


def find_so(repo: Path) -> Path | None:
    crs = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    first = default_so_path(repo)
    if first.is_file():
        return first
    found = sorted(p for p in crs.rglob(SO_NAME) if p.is_file()) if crs.is_dir() else []
    return found[0] if found else None


def find_wrapper(repo: Path, op: str) -> Path | None:
    """The cutile-rs wrapper of ``op``: ``<op>.py`` (or ``<op>`` without underscores) under
    ``ops/cutile_rs``, else a ``.py`` there with a ``register_impl(...<op>...)`` line."""
    crs = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    if not crs.is_dir():
        return None
    direct = crs / f"{op}.py"
    if direct.is_file():
        return direct
    names = {f"{op}.py", f"{op.replace('_', '')}.py"}
    pys = sorted(p for p in crs.rglob("*.py") if p.is_file())
    for p in pys:
        if p.name in names:
            return p
    reg = re.compile(rf"register_impl.*{re.escape(op)}")
    for p in pys:
        text = read_text(p) or ""
        if any(reg.search(line) for line in text.splitlines()):
            return p
    return None
