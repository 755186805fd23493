"""The tree a port builds and tests: the base commit's files plus the ported kernels' inputs.

A pull request reaches the build and the tests only through the ``kernel.rs`` of each kernel
being ported (and the ``host_contract.yaml`` beside it, which only agent-d's generation reads;
path_classes.py). Everything else it changes (the crate's ``lib.rs``, ``Cargo.toml``,
``Cargo.lock``, ``build.rs``, sibling ``.rs`` files, the tests, any ``conftest.py``, the
runtime under ``src/``) is put back to the base's bytes, and files it adds are removed, before
agent-d generates anything. The port job does this to its checkout (``reset_worktree``);
finalize computes the same tree in its bare repository (``source_tree``) and requires the
artifact to name it, so both sides describe the same build.

All of it is git plumbing on commits with temporary index files: the checkout's own index is
never touched, and no file is written through a link the pull request planted.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bot.github import gitops
from bot.github.path_classes import ClassedPaths, kernel_inputs
from bot.targets.targets import check_name

REGULAR, EXECUTABLE, SYMLINK, GITLINK = "100644", "100755", "120000", "160000"


class BaseTreeError(RuntimeError):
    """The source tree cannot be made (a kernel missing at the head, a path that cannot be written)."""


@dataclass(frozen=True)
class SourceTree:
    """What a port of ``ops`` at ``head_sha`` starts from."""

    base_sha: str
    head_sha: str
    ops: tuple[str, ...]
    tree: str  # the base commit's tree with each op's kernel.rs (and contract) from the head
    reset: ClassedPaths  # every path where the head differs from ``tree``, by class


def changed_paths(gitdir: Path, old: str, new: str, bare: bool = True) -> list[str]:
    """Every file path that differs between two tree-ishes (git's diff-tree, renames not detected)."""
    out = gitops.git_bytes(
        gitdir, "diff-tree", "-r", "-z", "--no-renames", "--name-only", old, new, bare=bare
    )
    return sorted({p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p})


def _kernel_index_info(gitdir: Path, head_sha: str, ops: list[str], bare: bool) -> str:
    """``update-index --index-info`` lines that give each op's inputs as the head has them: its
    kernel.rs (required) and its contract (removed when the head has none)."""
    pairs = [kernel_inputs(check_name(op)) for op in ops]
    found = gitops.tree_entries(gitdir, head_sha, [p for pair in pairs for p in pair], bare=bare)
    lines = []
    for kernel, contract in pairs:
        for path in (kernel, contract):
            entry = found.get(path)
            if entry is not None and entry.mode != REGULAR:
                raise BaseTreeError(f"{path} is not a regular file in {head_sha}")
            if entry is None and path == kernel:
                raise BaseTreeError(f"{path} is not in {head_sha}")
            # mode 0 takes the path out of the index
            lines.append(f"{REGULAR} {entry.sha}\t{path}\n" if entry else f"0 {'0' * 40}\t{path}\n")
    return "".join(lines)


def source_tree(gitdir: Path, base_sha: str, head_sha: str, ops: list[str], bare: bool = True) -> SourceTree:
    """The base's tree plus each op's inputs as the head has them, and what that leaves out."""
    index_info = _kernel_index_info(gitdir, head_sha, ops, bare)
    with gitops.temp_index() as env:
        gitops.git(gitdir, "read-tree", base_sha, bare=bare, env=env)
        gitops.git(
            gitdir, "update-index", "--add", "--replace", "--index-info", bare=bare, env=env, input=index_info
        )
        tree = gitops.git(gitdir, "write-tree", bare=bare, env=env).strip()
    reset = ClassedPaths.of(changed_paths(gitdir, head_sha, tree, bare=bare))
    return SourceTree(base_sha, head_sha, tuple(ops), tree, reset)


# --------------------------------------------------------------------------- the port job's checkout


def _real_dir_chain(root: Path, rel: str) -> bool:
    """Whether every folder above ``rel`` inside ``root`` is a real folder (no link, no file)."""
    here = root
    for part in rel.split("/")[:-1]:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return False
    return True


def _remove(root: Path, rel: str) -> None:
    target = root / rel
    if not _real_dir_chain(root, rel) or not os.path.lexists(target):
        return  # a folder above it is gone or is a link (its own entry): nothing of the tree is there
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)  # a submodule's folder
    else:
        target.unlink()


def _write(root: Path, rel: str, entry: gitops.TreeEntry, data: bytes) -> None:
    here = root
    for part in rel.split("/")[:-1]:
        here = here / part
        if here.is_symlink() or (os.path.lexists(here) and not here.is_dir()):
            raise BaseTreeError(f"cannot write {rel}: {here.relative_to(root)} is not a folder")
        here.mkdir(exist_ok=True)
    target = root / rel
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif os.path.lexists(target):
        target.unlink()
    if entry.mode == SYMLINK:
        os.symlink(os.fsdecode(data), target)
    elif entry.mode == GITLINK:
        target.mkdir()
    else:
        target.write_bytes(data)
        target.chmod(0o755 if entry.mode == EXECUTABLE else 0o644)


def _prune_empty_dirs(root: Path, rels: list[str]) -> None:
    for rel in rels:
        here = (root / rel).parent
        while here != root and here.is_dir() and not here.is_symlink() and not any(here.iterdir()):
            here.rmdir()
            here = here.parent


def reset_worktree(repo: Path, source: SourceTree) -> None:
    """Make the checkout ``repo`` (at ``source.head_sha``) hold ``source.tree``'s files.

    Files the head has and the source tree does not are removed first (a link the pull request
    put where the base has a folder goes with them), then the base's bytes are written, each
    through real folders only. Paths outside ``source.reset`` are the same in both trees.
    """
    paths = source.reset.all()
    wanted = gitops.tree_entries(repo, source.tree, paths, bare=False)
    gone = [p for p in paths if p not in wanted]
    for rel in gone:
        _remove(repo, rel)
    _prune_empty_dirs(repo, gone)
    blobs = gitops.read_blobs(repo, [e.sha for e in wanted.values() if e.kind == "blob"], bare=False)
    for rel, entry in sorted(wanted.items()):
        _write(repo, rel, entry, blobs.get(entry.sha, b""))
