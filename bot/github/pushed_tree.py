"""What finalize pushes: the pull request's head with agent-d's tested files on it.

The port tested ``source.tree`` (the base's files plus the ported ``kernel.rs``) with agent-d's
generated files added. The commit agent-d pushes changes the head in exactly those files, to
exactly the tested bytes; every other file of the head stays as the pull request has it. When
the pull request itself edited one of those files (its own ``lib.rs``, say), pushing would
throw that edit away: such files are named and nothing is pushed.

Also here: which of the pull request's own edits the port did not use, for the review.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.github import gitops
from bot.github.base_tree import SourceTree, changed_paths
from bot.github.path_classes import ClassedPaths


@dataclass(frozen=True)
class PushedTree:
    tree: str  # the head's tree with the tested bytes of agent-d's files
    overwritten: tuple[str, ...]  # agent-d's files the pull request edited: pushing would undo the edit
    unused: ClassedPaths  # the pull request's edits the build and the tests did not use


def _pr_changed(gitdir: Path, source: SourceTree) -> set[str] | None:
    """The paths the pull request changes since it left the base branch; None when git cannot tell."""
    merge_base = gitops.git(gitdir, "merge-base", source.base_sha, source.head_sha, bare=True, check=False)
    if not merge_base.strip():
        return None
    return set(changed_paths(gitdir, merge_base.strip(), source.head_sha))


def unused_edits(gitdir: Path, source: SourceTree, tested_tree: str) -> ClassedPaths:
    """The paths the pull request changed and the port put back, where the head's file is not the
    tested one (an earlier agent-d commit's files are the tested ones, and are no edit left out)."""
    reset = source.reset.all()
    head = gitops.tree_entries(gitdir, source.head_sha, reset)
    tested = gitops.tree_entries(gitdir, tested_tree, reset)
    ours = _pr_changed(gitdir, source)
    return ClassedPaths.of(p for p in reset if head.get(p) != tested.get(p) and (ours is None or p in ours))


def pushed_tree(gitdir: Path, source: SourceTree, tested_tree: str) -> PushedTree:
    """The head plus agent-d's files as tested (``tested_tree`` differs from ``source.tree`` only in
    those, each an added or edited regular file: finalize checked that before)."""
    files = changed_paths(gitdir, source.tree, tested_tree)
    tested = gitops.tree_entries(gitdir, tested_tree, files)
    started = gitops.tree_entries(gitdir, source.tree, files)
    head = gitops.tree_entries(gitdir, source.head_sha, files)
    overwritten = tuple(p for p in files if head.get(p) not in (started.get(p), tested[p]))
    index_info = "".join(f"{tested[p].mode} {tested[p].sha}\t{p}\n" for p in files)
    with gitops.temp_index() as env:
        gitops.git(gitdir, "read-tree", source.head_sha, bare=True, env=env)
        if index_info:
            gitops.git(
                gitdir,
                "update-index",
                "--add",
                "--replace",
                "--index-info",
                bare=True,
                env=env,
                input=index_info,
            )
        tree = gitops.git(gitdir, "write-tree", bare=True, env=env).strip()
    return PushedTree(tree, overwritten, unused_edits(gitdir, source, tested_tree))
