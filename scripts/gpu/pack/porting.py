"""What packing the trees and packing the fault corpus share: export a TileGym checkout, port an
op in it with agent-d, strip an op's host side, run a command, log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


CUTILE_RS = Path("src/tilegym/ops/cutile_rs")


CRATE = CUTILE_RS / "cutile_kernels"


SO_REL = CRATE / "target" / "release" / "libcutile_kernels.so"


TREE_FILES = (
    "src",
    "tests",
    "pytest.ini",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "conftest.py",
    ".agents",
    "skills",
)


SKIP_NAMES = {"target", "__pycache__", ".pytest_cache", ".git", "cutile_kernel_out"}


def log(msg: str) -> None:
    print(f"[gpu_proof] {msg}", flush=True)


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, **kw)


def export_checkout(src: Path, dest: Path) -> str:
    """Copy the checkout's files (bare repo: ``git archive HEAD``) into ``dest``; return the commit sha."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    bare = (src / "HEAD").is_file() and (src / "objects").is_dir()
    commit = git_head(src)
    if bare:
        archive = subprocess.run(
            ["git", "-C", str(src), "archive", "HEAD"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        for name in TREE_FILES:
            copy_entry(src / name, dest / name)
    return commit


def git_head(path: Path) -> str:
    proc = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def copy_entry(src: Path, dest: Path) -> None:
    if src.is_symlink():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.readlink(src), dest)
    elif src.is_dir():
        shutil.copytree(
            src, dest, symlinks=True, ignore=lambda d, names: [n for n in names if n in SKIP_NAMES]
        )
    elif src.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def strip_op(tree: Path, op: str, strict: bool = True) -> list[str]:
    """Remove ``op``'s host files and wiring from ``tree``; return what was removed.

    ``strict``: every piece must be there exactly once (the pristine checkout); otherwise missing
    pieces are skipped (undoing a partial port).
    """
    from bot.demo import AssemblyError, remove_import_line, remove_lib_block, remove_test_block

    removed = []
    for rel in (CUTILE_RS / f"{op}_kernel" / "ffi.rs", CUTILE_RS / f"{op}.py"):
        if (tree / rel).is_file():
            (tree / rel).unlink()
            removed.append(str(rel))
        elif strict:
            raise FileNotFoundError(f"{rel} is not in the checkout")
    edits = [
        (CUTILE_RS / "__init__.py", lambda t: remove_import_line(t, op)),
        (CRATE / "src" / "lib.rs", lambda t: remove_lib_block(t, op)),
        (Path("tests/ops") / f"test_{op}.py", remove_test_block),
    ]
    for rel, edit in edits:
        path = tree / rel
        try:
            path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
            removed.append(f"{rel} (edit)")
        except (AssemblyError, FileNotFoundError):
            if strict:
                raise
    return removed


def port_op(tree: Path, op: str, cargo_target_dir: Path, log_path: Path) -> dict:
    """``agent-d port --json`` on tree B; the outcome says whether generate..ABI smoke passed."""
    cmd = [
        sys.executable,
        "-m",
        "bot.cli",
        "port",
        "--repo",
        str(tree),
        "--kernel",
        op,
        "--out",
        str(tree / "cutile_kernel_out"),
        "--cargo-target-dir",
        str(cargo_target_dir),
        "--json",
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    log_path.write_text(
        f"$ agent-d port --repo {tree} --kernel {op} ... --json\n{proc.stdout}\n{proc.stderr}"
        f"\nexit={proc.returncode}\n",
        encoding="utf-8",
    )
    return port_outcome(proc.stdout, proc.returncode, time.monotonic() - start)


def port_outcome(stdout: str, exit_code: int, seconds: float = 0.0) -> dict:
    """``port --json``'s stdout is one JSON document (docs/port-json.schema.json): the verdict and
    every stage with its status."""
    try:
        summary = json.loads(stdout)
    except json.JSONDecodeError:
        summary = None
    verdict = summary[0] if summary else {}
    stages = {s["name"]: s["status"] for s in verdict.get("stages", [])}
    generated = all(stages.get(s) == "ok" for s in ("generate", "apply", "build", "abi smoke"))
    return {
        "status": "generated" if generated else "blocked",
        "port_exit": exit_code,
        "port_verdict": verdict.get("verdict", ""),
        "port_class": verdict.get("class", ""),
        "reason": verdict.get("reason", "") if not generated else "",
        "verdict_reason": verdict.get("reason", ""),
        "fix": verdict.get("fix", ""),
        "stages": stages,
        "seconds": round(seconds, 1),
        "note": (
            "BLOCKED env expected here (no GPU on the packing machine)"
            if generated and exit_code == 3 and verdict.get("class") == "env"
            else ""
        ),
    }
