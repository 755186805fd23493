"""Plumbing on bare repositories: the fake's "remote" side of git.

Everything works directly on bare repositories (temporary index files, ``commit-tree``,
``update-ref``); no work tree is ever checked out by the fake itself.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

ZERO_SHA = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_ENV_BASE = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


class GitError(RuntimeError):
    pass


def git(repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, **_ENV_BASE, **(env or {})}
    proc = subprocess.run(
        ["git", "--git-dir", str(repo), *args],
        input=input,
        capture_output=True,
        env=full_env,
        check=False,
    )
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode("utf-8", errors="replace")


def init_bare(path: Path, default_branch: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "init", "--quiet", "--bare", f"--initial-branch={default_branch}", str(path)],
        check=True,
        env={**os.environ, **_ENV_BASE},
    )
    # Receive side: allow fetching any sha (harmless here, handy for tests).
    git(path, "config", "uploadpack.allowAnySHA1InWant", "true")
    return path


_HEX40 = re.compile(r"[0-9a-f]{40}")


def fast_rev_parse(repo: Path, ref: str) -> str | None:
    """``rev_parse`` without a subprocess for the common cases (loose refs, packed refs,
    loose commit objects); anything else falls back to ``git rev-parse``."""
    if _HEX40.fullmatch(ref):
        obj = repo / "objects" / ref[:2] / ref[2:]
        try:
            with open(obj, "rb") as fh:
                head = zlib.decompressobj().decompress(fh.read(64), 16)
            return ref if head.startswith(b"commit ") else None
        except (OSError, zlib.error):
            return rev_parse(repo, ref)
    if ref.startswith("refs/") and ".." not in ref:
        try:
            value = (repo / ref).read_text().strip()
            if _HEX40.fullmatch(value):
                return value
        except OSError:
            pass
        try:
            for line in (repo / "packed-refs").read_text().splitlines():
                if line.endswith(" " + ref) and not line.startswith(("#", "^")):
                    return line.split(" ", 1)[0]
        except OSError:
            pass
        return rev_parse(repo, ref) if (repo / ref).exists() else None
    return rev_parse(repo, ref)


def rev_parse(repo: Path, ref: str) -> str | None:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip() or None
    except GitError:
        return None


@dataclass(frozen=True)
class Identity:
    name: str
    email: str
    date: str | None = None  # git date string, e.g. "2026-01-01T00:00:00Z"

    def env(self) -> dict[str, str]:
        env = {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }
        if self.date:
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = self.date
        return env


def commit_files(
    repo: Path,
    branch: str,
    files: dict[str, str | bytes | None],
    message: str,
    who: Identity,
    start_point: str | None = None,
) -> str:
    """Commit ``files`` (None deletes a path) on ``branch``; return the new sha.

    The parent is the branch tip, or ``start_point`` when the branch does not exist yet
    (no parent at all when neither exists: the repository's first commit).
    """
    old = rev_parse(repo, f"refs/heads/{branch}")
    parent = old or (rev_parse(repo, start_point) if start_point else None)
    if start_point and parent is None:
        raise GitError(f"start point {start_point!r} does not exist in {repo}")
    with tempfile.TemporaryDirectory(prefix="ghfake-idx-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        if parent:
            git(repo, "read-tree", parent, env=env)
        lines = []
        for path, content in files.items():
            if content is None:
                lines.append(f"0 {ZERO_SHA}\t{path}")  # mode 0 removes the entry
                continue
            data = content.encode() if isinstance(content, str) else content
            blob = git(repo, "hash-object", "-w", "--stdin", input=data).strip()
            lines.append(f"100644 {blob}\t{path}")
        if lines:
            git(repo, "update-index", "--index-info", input=("\n".join(lines) + "\n").encode(), env=env)
        tree = git(repo, "write-tree", env=env).strip()
    args = ["commit-tree", tree, "-m", message]
    if parent:
        args += ["-p", parent]
    sha = git(repo, *args, env=who.env()).strip()
    git(repo, "update-ref", f"refs/heads/{branch}", sha, old or ZERO_SHA)
    return sha


def merge_into(repo: Path, branch: str, other: str, message: str, who: Identity) -> str:
    """A merge commit of ``other`` (a commit in ``repo``) into ``branch``, parents [branch tip, other],
    as GitHub's "Update branch" makes it; GitError on a conflict. Returns the new tip."""
    head = rev_parse(repo, f"refs/heads/{branch}")
    if head is None:
        raise GitError(f"{repo} has no branch {branch!r}")
    tree = git(repo, "merge-tree", "--write-tree", head, other).splitlines()[0]
    sha = git(repo, "commit-tree", tree, "-p", head, "-p", other, "-m", message, env=who.env()).strip()
    git(repo, "update-ref", f"refs/heads/{branch}", sha, head)
    return sha


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    try:
        git(repo, "merge-base", "--is-ancestor", older, newer)
    except GitError:
        return False
    return True


def copy_branch(src: Path, dst: Path, src_ref: str, dst_ref: str) -> None:
    """Fetch ``src_ref`` of ``src`` into ``dst_ref`` of ``dst`` (force)."""
    git(dst, "fetch", "--quiet", "--no-tags", str(src), f"+{src_ref}:{dst_ref}")


def merge_base(repo: Path, a: str, b: str) -> str | None:
    try:
        return git(repo, "merge-base", a, b).strip() or None
    except GitError:
        return None


_STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed", "C": "copied", "T": "changed"}


def diff_entries(repo: Path, base: str, head: str) -> list[dict]:
    """Per-file changes from ``base`` to ``head`` the way /pulls/{n}/files reports them."""
    entries: list[dict] = []
    raw = git(
        repo, "diff", "--no-color", "-z", "--find-renames", "--full-index", "--raw", "--numstat", base, head
    )
    parts = raw.split("\0")
    i = 0
    raws: list[tuple[str, str, str, str | None]] = []  # status, new blob, path, old path
    nums: list[tuple[str, str]] = []
    while i < len(parts):
        tok = parts[i]
        if tok.startswith(":"):
            meta = tok[1:].split()
            code = meta[4][0]
            if code in "RC":
                raws.append((code, meta[3], parts[i + 2], parts[i + 1]))
                i += 3
            else:
                raws.append((code, meta[2] if code == "D" else meta[3], parts[i + 1], None))
                i += 2
        elif tok.strip():
            fields = tok.split("\t")
            nums.append((fields[0], fields[1]))
            i += 1 if fields[2] else 3  # renames in -z numstat: empty path then old, new
        else:
            i += 1
    for (code, blob, path, old_path), (add, dele) in zip(raws, nums, strict=False):
        binary = add == "-"
        additions = 0 if binary else int(add)
        deletions = 0 if binary else int(dele)
        pathspec = [old_path, path] if old_path else [path]
        patch_text = git(repo, "diff", "--no-color", "--find-renames", base, head, "--", *pathspec)
        at = patch_text.find("\n@@")
        entry = {
            "filename": path,
            "status": _STATUS.get(code, "changed"),
            "additions": additions,
            "deletions": deletions,
            "changes": additions + deletions,
            "blob_sha": blob,
        }
        if old_path:
            entry["previous_filename"] = old_path
        if at >= 0 and not binary:
            entry["patch"] = patch_text[at + 1 :].rstrip("\n")
        entries.append(entry)
    return entries


def read_path(repo: Path, ref: str, path: str) -> tuple[str, object] | None:
    """("file", (blob_sha, bytes)) or ("dir", [(type, name, sha, size)]) or None."""
    path = path.strip("/")
    if not path:
        listing = git(repo, "ls-tree", "-l", ref)
        return "dir", _parse_ls_tree(listing, "")
    out = git(repo, "ls-tree", "-l", ref, "--", path).strip()
    if not out:
        return None
    meta, _name = out.split("\t", 1)
    _mode, typ, sha, _size = meta.split()
    if typ == "blob":
        return "file", (sha, _cat_blob(repo, sha))
    if typ == "tree":
        return "dir", _parse_ls_tree(git(repo, "ls-tree", "-l", f"{ref}:{path}"), path + "/")
    return None


def _cat_blob(repo: Path, sha: str) -> bytes:
    proc = subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "blob", sha], capture_output=True, check=True
    )
    return proc.stdout


def _parse_ls_tree(listing: str, prefix: str) -> list[tuple[str, str, str, int]]:
    out = []
    for line in listing.splitlines():
        meta, name = line.split("\t", 1)
        _mode, typ, sha, size = meta.split()
        out.append(("file" if typ == "blob" else "dir", prefix + name, sha, 0 if size == "-" else int(size)))
    return out


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: list[str]
    author_name: str
    author_email: str
    author_date: str
    committer_name: str
    committer_email: str
    committer_date: str
    message: str


def commit_info(repo: Path, sha: str) -> CommitInfo:
    fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
    out = git(repo, "show", "-s", f"--format={fmt}", sha).split("\0")
    return CommitInfo(
        sha=out[0],
        tree=out[1],
        parents=out[2].split(),
        author_name=out[3],
        author_email=out[4],
        author_date=out[5],
        committer_name=out[6],
        committer_email=out[7],
        committer_date=out[8],
        message=out[9].rstrip("\n"),
    )


def rev_list(repo: Path, base: str, head: str) -> list[str]:
    out = git(repo, "rev-list", "--reverse", f"{base}..{head}")
    return out.split()


_HOOK = """#!/bin/sh
# installed by tests/ghfake: reject pushes{scope}
reason={reason}
paths_re={paths_re}
while read old new ref; do
  if [ -z "$paths_re" ]; then
    echo "$reason" >&2; exit 1
  fi
  if [ "$new" = "{zero}" ]; then continue; fi
  if [ "$old" = "{zero}" ]; then range="$new --not --all"; else range="$old..$new"; fi
  for c in $(git rev-list $range); do
    if git diff-tree --no-commit-id --name-only -r --root "$c" | grep -Eq "$paths_re"; then
      echo "$reason" >&2; exit 1
    fi
  done
done
exit 0
"""


def install_pre_receive(repo: Path, reason: str, paths_regex: str | None = None) -> Path:
    hook = repo / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    scope = f" touching {paths_regex}" if paths_regex else ""
    hook.write_text(
        _HOOK.format(
            scope=scope, reason=_sh_quote(reason), paths_re=_sh_quote(paths_regex or ""), zero=ZERO_SHA
        )
    )
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return hook


def remove_pre_receive(repo: Path) -> None:
    (repo / "hooks" / "pre-receive").unlink(missing_ok=True)


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
