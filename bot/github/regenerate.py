"""The finalizer's own generated files: the port's start tree plus what agent-d writes for it.

The untrusted port job says what it tested (a tree hash); this module computes, without the
port job's help and without running anything from the PR, what that tree must be. The start
is the base commit's files plus each kernel's ``kernel.rs`` from the head
(bot/github/base_tree.py). Generation is pure (the syn reader, the planner, the emitters,
ruff/rustfmt as formatters), so the same start gives the same files; finalize pushes only
when the two trees are equal.

The start is copied out of git as regular files only: symlinks, submodules and anything that
would land outside the copy are left out, so reading the PR's files never follows a link
planted by the PR.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bot.github import gitops
from bot.github.artifact import is_allowed

# generate(checkout, op) writes one op's generated files into the checkout; returns why it
# wrote nothing ("" when it wrote them). It must not run code from the checkout.
Generator = Callable[[Path, str], str]


class RegenerationError(RuntimeError):
    """The finalizer could not compute the generated files itself."""


def materialize(gitdir: Path, rev: str, dest: Path) -> Path:
    """The regular files of ``rev`` (a commit or a tree) under ``dest`` (no links, no submodules,
    no git metadata).

    Read with ls-tree and cat-file rather than ``git archive``, whose export-subst and
    export-ignore attributes would let the PR's .gitattributes change what is copied.
    """
    files = {
        name: entry.sha
        for name, entry in gitops.tree_entries(gitdir, rev).items()
        if entry.kind == "blob" and entry.mode in ("100644", "100755") and ".." not in name.split("/")
    }
    blobs = gitops.read_blobs(gitdir, list(files.values()))
    for name, sha in files.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blobs[sha])
    return dest


def _allowed_files(root: Path, ops: list[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if not full.is_symlink() and full.is_file() and is_allowed(rel, ops=ops):
                found[rel] = full.read_bytes()
    return found


def regenerated_tree(gitdir: Path, head: str, ops: list[str], generate: Generator) -> tuple[str, list[str]]:
    """(tree of ``head`` plus the generated files of ``ops``, why-notes of ops that generated nothing).

    ``head``: a commit or a tree; finalize gives the port's start tree (bot/github/base_tree.py).

    Only the generated and wiring paths of ``ops`` are taken from the copy, the same rule the
    port job's snapshot applies, so both sides describe the same set of files.
    """
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agent-d-regen-") as tmp:
        root = materialize(gitdir, head, Path(tmp) / "head")
        before = _allowed_files(root, ops)
        for op in ops:
            why = generate(root, op)
            if why:
                notes.append(f"{op}: {why}")
        after = _allowed_files(root, ops)
        removed = sorted(set(before) - set(after))
        if removed:
            raise RegenerationError(f"generation removed files: {', '.join(removed)}")
        changed = sorted(p for p, data in after.items() if before.get(p) != data)
        with gitops.temp_index() as env:
            gitops.git(gitdir, "read-tree", head, bare=True, env=env)
            for rel in changed:
                blob = gitops.git(
                    gitdir, "hash-object", "-w", "--no-filters", str(root / rel), bare=True
                ).strip()
                gitops.git(
                    gitdir, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", bare=True, env=env
                )
            tree = gitops.git(gitdir, "write-tree", bare=True, env=env).strip()
        shutil.rmtree(root, ignore_errors=True)
    return tree, notes
