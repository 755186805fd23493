"""Stage "targets": which kernels a change adds, read from a git diff with ``unidiff``.

A target is an added ``src/tilegym/ops/cutile_rs/<op>_kernel/kernel.rs``; ``<op>`` must be a
plain identifier because it becomes a Rust module, a C symbol and a Python module name.
``KERNEL_PATH`` and ``check_name`` are the one rule for both the local CLI and the GitHub
side (bot/github/kernels.py, ``/agent-d rerun <op>``); ``OP_NAME`` is also the ``ops``
pattern of the port artifact (bot/github/artifact.py).
"""

from __future__ import annotations

import difflib
import re
import subprocess
from pathlib import Path

from unidiff import PatchSet

from bot.errors import UsageError
from bot.targets.types import Target

KERNEL_PATH = re.compile(r"^src/tilegym/ops/cutile_rs/(?P<op>[^/]+)_kernel/kernel\.rs$")
OP_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
RESERVED = {"ffi_util", "cutile_kernels", "mod", "crate", "self", "super", "lib"}


def check_name(op: str) -> str:
    if not OP_NAME.fullmatch(op) or op in RESERVED:
        raise UsageError(
            f"kernel name {op!r} is not a plain identifier (a lowercase letter, then up to 63 lowercase "
            f"letters, digits or underscores; not {', '.join(sorted(RESERVED))})"
        )
    return op


def added_kernels(diff_text: str) -> list[str]:
    """Ops whose kernel.rs the diff adds (renames into place count as added)."""
    ops: list[str] = []
    for patched in PatchSet.from_string(diff_text):
        if not (patched.is_added_file or patched.is_rename):
            continue
        m = KERNEL_PATH.match(patched.path)
        if m:
            ops.append(m.group("op"))
    return ops


def git_diff(repo: Path, base: str) -> str:
    proc = subprocess.run(
        ["git", "diff", "--no-color", "--find-renames", f"{base}...HEAD", "--", "src/tilegym/ops/cutile_rs"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise UsageError(
            f"git diff {base}...HEAD failed in {repo}: {proc.stderr.strip() or 'not a git repository?'}"
        )
    return proc.stdout


def existing_dir(path: Path, flag: str) -> Path:
    """``path`` resolved, or a usage error naming ``flag`` when it is not a directory."""
    path = Path(path).resolve()
    if not path.is_dir():
        raise UsageError(f"{flag} {path}: no such directory; pass the TileGym checkout")
    return path


def kernels_in(repo: Path) -> list[str]:
    """The ops whose ``kernel.rs`` the checkout has, sorted."""
    base = repo / "src" / "tilegym" / "ops" / "cutile_rs"
    found = base.glob("*_kernel/kernel.rs") if base.is_dir() else []
    return sorted(p.parent.name.removesuffix("_kernel") for p in found)


def unknown_kernel(repo: Path, op: str) -> UsageError:
    """A typo'd ``--kernel``: say where it was looked for and the closest names the checkout has."""
    known = kernels_in(repo)
    close = difflib.get_close_matches(op, known, n=3, cutoff=0.6)
    if close:
        hint = f"did you mean {' or '.join(close)}?"
    elif known:
        hint = f"this checkout has: {', '.join(known[:12])}" + (" ..." if len(known) > 12 else "")
    else:
        hint = "this checkout has no kernel.rs under src/tilegym/ops/cutile_rs/"
    return UsageError(f"unknown kernel {op!r}: no src/tilegym/ops/cutile_rs/{op}_kernel/kernel.rs; {hint}")


def find_targets(repo: Path, kernel: str | list[str] | None = None, base: str | None = None) -> list[Target]:
    """The named kernel(s), in the order named, each once; else the kernels added since ``base``."""
    repo = existing_dir(repo, "--repo")
    names = [kernel] if isinstance(kernel, str) else list(dict.fromkeys(kernel or []))
    if not (repo / ".git").exists() and not names:
        raise UsageError(f"{repo} is not a git checkout; name the kernel with --kernel")
    if names:
        targets = [Target(repo, check_name(name)) for name in names]
        for name, target in zip(names, targets, strict=True):
            if not target.kernel_rs.is_file():
                raise unknown_kernel(repo, name)
        return targets
    ops = added_kernels(git_diff(repo, base or "HEAD~1"))
    if not ops:
        raise UsageError(
            f"no kernel.rs added between {base or 'HEAD~1'} and HEAD under src/tilegym/ops/cutile_rs/"
        )
    return [Target(repo, check_name(op)) for op in ops]
