"""Which kernels a pull request adds, from the API's file list.

Each file entry is turned into a unified diff with proper headers (the API's ``patch``
field lacks them) and parsed with ``unidiff``; a file counts when it matches the
config's kernel globs and the diff (or, when GitHub omitted the patch, the ``status``)
says it was added.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from bot.github.commands import KERNEL_NAME_RE
from bot.github.config import Config


@dataclass(frozen=True)
class AddedKernel:
    op: str
    path: str


def _as_diff(filename: str, status: str, patch: str) -> str:
    source = "/dev/null" if status == "added" else f"a/{filename}"
    head = f"diff --git a/{filename} b/{filename}\n"
    if status == "added":
        head += "new file mode 100644\n"
    return f"{head}--- {source}\n+++ b/{filename}\n{patch.rstrip()}\n"


def is_added(filename: str, status: str, patch: str | None) -> bool:
    if not patch:
        return status == "added"
    try:
        parsed = PatchSet.from_string(_as_diff(filename, status, patch))
    except UnidiffParseError:
        return status == "added"
    return len(parsed) == 1 and parsed[0].is_added_file


def op_name(path: str) -> str:
    parent = PurePosixPath(path).parent.name
    return re.sub(r"_kernel$", "", parent)


def added_kernels(files, cfg: Config) -> list[AddedKernel]:
    """``files``: PyGithub File objects (``filename``, ``status``, ``patch``) of a PR."""
    found: dict[str, AddedKernel] = {}
    for f in files:
        if not cfg.is_kernel_path(f.filename):
            continue
        if not is_added(f.filename, f.status, f.patch):
            continue
        op = op_name(f.filename)
        if KERNEL_NAME_RE.match(op):
            found.setdefault(op, AddedKernel(op, f.filename))
    return [found[k] for k in sorted(found)]
