"""A pull request that adds kernel.rs together with its own host files: those are checked as
they are (``agent-d check``'s static checks, through the API), never overwritten, and agent-d's
own files, built and tested from the base, are offered as suggested changes where they differ.

The suggestions are review comments on the pull request's lines: GitHub takes a comment only on
a line of the pull request's diff, so each difference is anchored on the lines it replaces and
posted only when they all lie in one hunk of the file's patch (a file the pull request adds is
one hunk). The rest is said as a count; the review's patch has every difference.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from bot.github import gitops, host_check, render

MAX_SUGGESTIONS = 30  # review comments in one review; the patch in the review has the rest


@dataclass(frozen=True)
class Suggestions:
    comments: list[dict]  # the review's comments, as the API takes them
    left_out: int  # differences that could not be anchored on the pull request's diff


def own_host_ops(paths) -> list[str]:
    """The ops whose ffi.rs or wrapper is among ``paths`` (files the pull request itself edited)."""
    return sorted({host_check.port_of(path) for path in paths} - {""})


def host_paths(paths, ops: list[str]) -> list[str]:
    """Of ``paths``, the ffi.rs and wrapper files of ``ops``."""
    return sorted(path for path in paths if host_check.port_of(path) in ops)


def commentable_lines(patch: str | None, path: str) -> list[range]:
    """The head's line ranges of each hunk of the file's patch (GitHub's ``patch`` field), where
    review comments may be placed; none when GitHub gave no patch (a file too large)."""
    if not patch:
        return []
    try:
        parsed = PatchSet(f"--- a/{path}\n+++ b/{path}\n{patch.rstrip(chr(10))}\n")
    except UnidiffParseError:
        return []
    return [range(h.target_start, h.target_start + h.target_length) for pf in parsed for h in pf]


def suggestions(pr_text: str, ours: str, path: str, hunks: list[range]) -> Suggestions:
    """Review comments that turn the pull request's ``pr_text`` into agent-d's ``ours``."""
    head, want = pr_text.splitlines(), ours.splitlines()
    comments, left_out = [], 0
    matcher = difflib.SequenceMatcher(a=head, b=want, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        new = want[j1:j2]
        if i1 == i2:  # an insertion: anchored on the line before it, which the suggestion keeps
            if i1 == 0:
                if not head:
                    left_out += 1
                    continue
                first, last, new = 1, 1, [*new, head[0]]
            else:
                first, last, new = i1, i1, [head[i1 - 1], *new]
        else:
            first, last = i1 + 1, i2
        if not any(first in h and last in h for h in hunks) or len(comments) >= MAX_SUGGESTIONS:
            left_out += 1
            continue
        comment = {"path": path, "line": last, "side": "RIGHT", "body": _suggestion(new)}
        if first != last:
            comment.update(start_line=first, start_side="RIGHT")
        comments.append(comment)
    return Suggestions(comments, left_out)


def _suggestion(lines: list[str]) -> str:
    fence = "```"
    while any(fence in line for line in lines):
        fence += "`"
    text = "\n".join(lines)
    return f"agent-d's version (built and tested from the base):\n{fence}suggestion\n{text}\n{fence}"


def review_suggestions(gitdir: Path, head_sha: str, tested_tree: str, paths: list[str], files) -> Suggestions:
    """The suggestions for each of ``paths`` (the pull request's own host files) from the head's
    bytes to the tested tree's; ``files``: the pull request's files as the API lists them."""
    patches = {f.filename: f.patch for f in files}
    heads = gitops.tree_entries(gitdir, head_sha, paths)
    tested = gitops.tree_entries(gitdir, tested_tree, paths)
    blobs = gitops.read_blobs(gitdir, [e.sha for e in (*heads.values(), *tested.values())])
    comments, left_out = [], 0
    for path in paths:
        if path not in heads or path not in tested or heads[path].sha == tested[path].sha:
            continue
        found = suggestions(
            blobs[heads[path].sha].decode("utf-8", "replace"),
            blobs[tested[path].sha].decode("utf-8", "replace"),
            path,
            commentable_lines(patches.get(path), path),
        )
        room = max(MAX_SUGGESTIONS - len(comments), 0)
        comments += found.comments[:room]
        left_out += found.left_out + max(len(found.comments) - room, 0)
    return Suggestions(comments, left_out)


@dataclass(frozen=True)
class OwnHost:
    """The pull request's own host files of ``ops``: the check of each, and agent-d's suggestions."""

    ops: list[str]
    results: list  # host_check's CheckResults
    skipped: list[str]
    suggested: Suggestions

    @property
    def holds(self) -> bool:
        return not self.skipped and all(r.holds for r in self.results)

    def annotations(self) -> list:
        return host_check.annotations(self.results)

    def section(self) -> str:
        ops = ", ".join(f"`{op}`" for op in self.ops)
        n = len(self.suggested.comments)
        lines = [
            "### The pull request's own host code",
            "",
            f"This pull request adds kernel.rs with its own host files for {ops}. agent-d checked them as they "
            "are (`_FFI_CDEF` against ffi.rs's export, the host rules on both files) and did not overwrite "
            "them. The tests ran with agent-d's host files, built from the base's; "
            + (
                f"they are offered as {n} suggested change{'s' if n != 1 else ''} on the lines that differ"
                if n
                else "none of their differences lies on a line of this pull request's diff"
            )
            + (
                f" ({self.suggested.left_out} more difference{'s' if self.suggested.left_out != 1 else ''} "
                "outside the diff: the patch below has every one)."
                if self.suggested.left_out
                else "."
            ),
            "",
            "| Port | Own host code |",
            "|---|---|",
        ]
        for r in self.results:
            lines.append(f"| `{r.op}` | {'holds' if r.holds else f'{len(r.findings)} finding(s)'} |")
        for r in self.results:
            for f in r.findings:
                lines.append(f"- `{f.path}:{f.line}`: {render.escape_md(f.message)}")
        lines += [f"- {s}" for s in self.skipped]
        return "\n".join(lines)


def check_and_suggest(
    repo, pr, gitdir: Path, head_sha: str, base_sha: str, tested_tree: str, edited
) -> OwnHost | None:
    """``edited``: agent-d's files the pull request edited itself (finalize does not push over
    them); None when none of them is a port's ffi.rs or wrapper."""
    from bot.read.reader import ReaderUnavailable, reader_binary

    ops = own_host_ops(edited)
    if not ops:
        return None
    try:
        reader = str(reader_binary())
    except ReaderUnavailable as exc:
        results, skipped = (
            [],
            [f"not checked: agent-d's Rust reader is missing here ({render.escape_md(str(exc))})"],
        )
    else:
        results, skipped = host_check.run(repo, ops, head_sha, base_sha, reader)
    suggested = review_suggestions(gitdir, head_sha, tested_tree, host_paths(edited, ops), pr.get_files())
    return OwnHost(ops, results, skipped, suggested)
