"""A person's uncommitted edits are never overwritten without a word.

Before ``apply`` writes a whole file (the op's wrapper, its ffi.rs), it asks whether the file as it
is now is something only the person has: not what HEAD holds (git would give that back), not what
agent-d wrote there last (``written.json`` under the checkout's git folder records each file's
hash), not what agent-d is about to write. Such files are named and nothing is written, the way
``git checkout`` refuses to overwrite local changes; ``--force`` goes on. Wiring edits are computed
from the file as it is, so a person's lines in ``__init__.py`` survive them and are not checked.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from bot.emit.types import GeneratedFiles

RECORD = Path("agent-d") / "written.json"


def endangered(files: GeneratedFiles, repo: Path) -> list[str]:
    """The paths of whole files ``apply`` would overwrite whose present bytes only the person has."""
    git_dir = _git_dir(repo)
    if git_dir is None:
        return []  # not a git checkout: nothing tells a person's edit from an old run's output
    written = _read_record(git_dir)
    found = []
    for f in files.files:
        path = repo / f.path
        if f.kind != "new" or not path.is_file():
            continue
        now = path.read_bytes()
        if now == f.content.encode("utf-8") or written.get(f.path) == _digest(now):
            continue
        if now != _at_head(repo, f.path):
            found.append(f.path)
    return found


def remember(written_paths: list[str], files: GeneratedFiles, repo: Path) -> None:
    """Record the hash of each whole file agent-d just wrote (a later run may overwrite those)."""
    git_dir = _git_dir(repo)
    if git_dir is None:
        return
    record = _read_record(git_dir)
    for f in files.files:
        if f.kind == "new" and f.path in written_paths:
            record[f.path] = _digest(f.content.encode("utf-8"))
    target = git_dir / RECORD
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _git_dir(repo: Path) -> Path | None:
    proc = subprocess.run(
        ["git", "rev-parse", "--absolute-git-dir"], cwd=repo, capture_output=True, text=True, check=False
    )
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None


def _at_head(repo: Path, rel: str) -> bytes | None:
    # ``./``: the path is the checkout's, also where the checkout is a folder of a larger repository
    proc = subprocess.run(["git", "show", f"HEAD:./{rel}"], cwd=repo, capture_output=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def _read_record(git_dir: Path) -> dict[str, str]:
    try:
        data = json.loads((git_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
