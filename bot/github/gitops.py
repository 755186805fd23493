"""Git plumbing for the port job and the finalizer, without ever checking out PR code.

The finalizer works on a bare repository with temporary index files: it fetches the PR
head, applies the patch to the index (``git apply --cached``), writes the tree, makes
the commit with ``commit-tree`` and pushes it.  No work tree means no filters, no hooks
from the PR, no symlinks followed (the CVE-2021-21300 class).  Credentials travel in
``http.extraheader`` through ``GIT_CONFIG_*`` variables, never in a URL, and every git
error message is redacted before it leaves this module.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.github.redact import REDACTOR, scrubbed_env

_BASE_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "/bin/false",
    "LC_ALL": "C",
}
# Neutralise anything the repository's config could run during our plumbing.
_SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "protocol.ext.allow=never",
)


class GitError(RuntimeError):
    def __init__(self, args: tuple[str, ...], rc: int, stderr: str):
        self.rc = rc
        self.stderr = REDACTOR.redact(stderr.strip())
        super().__init__(f"git {REDACTOR.redact(' '.join(args[:3]))} failed ({rc}): {self.stderr[-2000:]}")


def git(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    input: str | None = None,
    bare: bool = False,
    check: bool = True,
) -> str:
    cmd = ["git", *_SAFE_CONFIG]
    cmd += ["--git-dir", str(cwd)] if bare else ["-C", str(cwd)]
    full_env = {**scrubbed_env(os.environ), **_BASE_ENV, **(env or {})}
    proc = subprocess.run(
        cmd + list(args), input=input, capture_output=True, text=True, env=full_env, check=False
    )
    if check and proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr)
    return proc.stdout


def git_bytes(cwd: Path, *args: str, bare: bool = False, input: str | None = None) -> bytes:
    """``git`` for binary output (file contents); same configuration and environment as ``git``."""
    cmd = ["git", *_SAFE_CONFIG]
    cmd += ["--git-dir", str(cwd)] if bare else ["-C", str(cwd)]
    env = {**scrubbed_env(os.environ), **_BASE_ENV}
    data = input.encode() if input is not None else None
    proc = subprocess.run(cmd + list(args), input=data, capture_output=True, env=env, check=False)
    if proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
    return proc.stdout


@contextlib.contextmanager
def temp_index() -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="agent-d-idx-") as tmp:
        yield {"GIT_INDEX_FILE": str(Path(tmp) / "index")}


def auth_env(token: str | None) -> dict[str, str]:
    """Environment that gives git an HTTP Authorization header for one command (not stored anywhere)."""
    if not token:
        return {}
    REDACTOR.add(token)
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    REDACTOR.add(basic)
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraheader",
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
    }


def init_bare(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", "--bare")
    return path


def fetch(gitdir: Path, url: str, refspec: str, token: str | None = None) -> None:
    git(
        gitdir,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        url,
        refspec,
        bare=True,
        env=auth_env(token),
    )


def has_commit(gitdir: Path, sha: str) -> bool:
    out = git(gitdir, "cat-file", "-t", sha, bare=True, check=False).strip()
    return out == "commit"


def tree_of(gitdir: Path, rev: str, bare: bool = True) -> str:
    return git(gitdir, "rev-parse", f"{rev}^{{tree}}", bare=bare).strip()


def apply_patch_to_tree(gitdir: Path, base_rev: str, patch: str) -> str:
    """The tree you get by applying ``patch`` to ``base_rev`` (index only; no work tree)."""
    with temp_index() as env:
        git(gitdir, "read-tree", base_rev, bare=True, env=env)
        if patch.strip():
            git(gitdir, "apply", "--cached", "--whitespace=nowarn", "-", bare=True, env=env, input=patch)
        return git(gitdir, "write-tree", bare=True, env=env).strip()


@dataclass(frozen=True)
class TreeChange:
    status: str  # git's letter: A added, M modified, D deleted, T type changed
    old_mode: str
    new_mode: str
    path: str


def tree_changes(gitdir: Path, old_tree: str, new_tree: str) -> list[TreeChange]:
    """Every file that differs between two trees, from git's own objects, renames not detected.

    This, not a patch's headers, is what the finalizer judges: a header can claim one path
    while ``git apply`` writes another.
    """
    out = git(gitdir, "diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", old_tree, new_tree, bare=True)
    fields = out.split("\0")
    changes: list[TreeChange] = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta:
            continue
        old_mode, new_mode, _old, _new, status = meta.lstrip(":").split(" ")
        changes.append(TreeChange(status[:1], old_mode, new_mode, path))
    return changes


def tree_diff(gitdir: Path, old_tree: str, new_tree: str) -> str:
    """The unified diff between two trees as git writes it (text files only, no renames)."""
    return git(
        gitdir,
        "diff-tree",
        "-p",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        old_tree,
        new_tree,
        bare=True,
    )


def commit_tree(gitdir: Path, tree: str, parent: str, message: str, name: str, email: str) -> str:
    who = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
    return git(
        gitdir, "commit-tree", tree, "-p", parent, "-F", "-", bare=True, env=who, input=message
    ).strip()


def push(gitdir: Path, url: str, sha: str, branch: str, token: str | None = None) -> tuple[bool, str]:
    """Fast-forward ``branch`` at ``url`` to ``sha``; (ok, redacted stderr). Never forces."""
    proc_env = auth_env(token)
    try:
        git(gitdir, "push", url, f"{sha}:refs/heads/{branch}", bare=True, env=proc_env)
    except GitError as exc:
        return False, exc.stderr
    return True, ""


def worktree_head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


@dataclass(frozen=True)
class TreeEntry:
    mode: str  # 100644, 100755, 120000 (symlink), 160000 (submodule)
    kind: str  # blob | commit
    sha: str


def tree_entries(
    gitdir: Path, rev: str, paths: list[str] | None = None, bare: bool = True
) -> dict[str, TreeEntry]:
    """{path: entry} of every file of ``rev`` (only ``paths`` when given), read with ``ls-tree``."""
    args = ["ls-tree", "-r", "-z", "--full-tree", rev]
    if paths is not None and len(paths) <= 500:  # more: one listing of the whole tree, filtered
        if not paths:
            return {}
        args += ["--", *(f":(literal){p}" for p in paths)]
    entries: dict[str, TreeEntry] = {}
    for record in git_bytes(gitdir, *args, bare=bare).split(b"\0"):
        if record:
            meta, path = record.split(b"\t", 1)
            mode, kind, sha = meta.decode().split(" ")
            entries[path.decode("utf-8", "surrogateescape")] = TreeEntry(mode, kind, sha)
    if paths is not None:  # a path that is a folder in ``rev`` lists its files: not asked for
        entries = {p: entries[p] for p in paths if p in entries}
    return entries


def read_blobs(gitdir: Path, shas: list[str], bare: bool = True) -> dict[str, bytes]:
    """The contents of the blobs ``shas``, in one ``cat-file --batch``."""
    wanted = sorted(set(shas))
    if not wanted:
        return {}
    out = git_bytes(gitdir, "cat-file", "--batch", bare=bare, input="".join(f"{s}\n" for s in wanted))
    blobs: dict[str, bytes] = {}
    pos = 0
    for sha in wanted:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].split(b" ")
        if len(header) != 3 or header[1] != b"blob":
            raise GitError(("cat-file", "--batch"), 1, f"{sha} is not a blob")
        size = int(header[2])
        blobs[sha] = out[header_end + 1 : header_end + 1 + size]
        pos = header_end + 1 + size + 1
    return blobs
