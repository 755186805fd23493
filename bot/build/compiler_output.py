"""Compiler output without the text of files outside the checkout.

rustc and clang quote the source lines around an error. When the error sits in a file outside
the checkout (a dependency's source in the cargo registry, a system header, anything a hostile
kernel made the compiler read), those lines would be copied into the build log, the reports
and the review. The location keeps its line but not its path, and the quoted lines are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

OUTSIDE = "<a file outside the checkout>"
# rustc: "  --> src/lib.rs:3:5" / "  ::: path:3:5"; clang/gcc: "path:3:5: error: ..."
_RUSTC_AT = re.compile(r"^(?P<lead>\s*(?:-->|:::)\s+)(?P<path>.+?)(?P<pos>:\d+(?::\d+)?)\s*$")
_CLANG_AT = re.compile(r"^(?P<lead>\s*)(?P<path>[^\s:][^:\n]*?)(?P<pos>:\d+(?::\d+)?:\s.*)$")
_QUOTED = re.compile(r"^\s*(?:\d+\s*)?\|")  # "12 |     let x = ...", "   |     ^^^", "  |"


@dataclass(frozen=True)
class CompileError:
    """One error of cargo's JSON diagnostics, at its primary span (out of any macro expansion)."""

    file: str  # relative to the crate's parent; OUTSIDE for a file outside the checkout
    source: Path | None  # the file, resolved; None outside the checkout
    line: int
    end_line: int
    column: int
    end_column: int
    message: str
    code: str = ""  # rustc's error code ("E0308"), when it has one
    label: str = ""  # what the primary span's label says ("expected `u8`, found `&str`")


def location(line: str) -> tuple[str, int, int] | None:
    """(path, line, column) of a ``  --> path:line:col`` pointer line, as rustc and the cutile JIT
    print them (column 0 when absent); None for any other line."""
    at = _RUSTC_AT.match(line)
    if at is None or "-->" not in at["lead"]:
        return None
    numbers = [int(n) for n in at["pos"].strip(":").split(":")]
    return at["path"], numbers[0], numbers[1] if len(numbers) > 1 else 0


def inside(path: str, root: Path, base: Path) -> bool:
    """Whether ``path`` (relative ones to ``base``) is an existing file under ``root``."""
    try:
        resolved = (base / path).resolve()
        return resolved.is_file() and resolved.is_relative_to(root.resolve())
    except (OSError, ValueError):
        return False


def redact_outside(text: str, root: Path, base: Path) -> str:
    """``text`` with the paths of outside files hidden and the lines they quote dropped.

    ``root``: the checkout; ``base``: the folder relative paths start from (the crate).
    """
    out: list[str] = []
    hiding = False
    for line in text.splitlines():
        at = _RUSTC_AT.match(line) or _CLANG_AT.match(line)
        if at and not inside(at["path"], root, base):
            out.append(f"{at['lead']}{OUTSIDE}{at['pos']}")
            hiding = True
            continue
        if at:
            hiding = False
        elif hiding and _QUOTED.match(line):
            continue
        else:
            hiding = False
        out.append(line)
    return "\n".join(out)
