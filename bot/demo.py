"""Assemble a small TileGym-like git checkout for demos and end-to-end tests.

The checkout is built from two sources:

* ``src/tilegym/``: the runtime package of the published ``tilegym`` wheel
  (downloaded at run time by :func:`bot.wheel.tilegym_wheel`), restricted to the
  cutile-rs ops that were asked for;
* ``tests/``, ``pyproject.toml``: our own TileGym-style test suite shipped in
  ``bot/demo_assets``.

It gets two commits:

* **base** -- the runtime without the host side of each "port" op: no
  ``<op>_kernel/`` sources, no wrapper ``<op>.py``, no import line in
  ``ops/cutile_rs/__init__.py``, no ``mod <op> { ... }`` block in the crate's
  ``lib.rs`` and no cutile-rs line pair in ``tests/ops/test_<op>.py``;
* **head** -- base plus each port op's device kernel ``<op>_kernel/kernel.rs``:
  the state in which the host stage starts.

Commit identities and dates are fixed, so the same inputs give the same SHAs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.emit.wiring import GUARD
from bot.wheel import tilegym_wheel

ASSETS_DIR = Path(__file__).resolve().parent / "demo_assets"
DEMO_DIRNAME = "tilegym-demo"
CARGO_TARGET_DIRNAME = "cargo-target"  # beside the checkout, so replacing the checkout keeps it

CUTILE_RS = Path("src/tilegym/ops/cutile_rs")
CUTILE_RS_INIT = CUTILE_RS / "__init__.py"
LIB_RS = CUTILE_RS / "cutile_kernels" / "src" / "lib.rs"
TESTS_OPS = Path("tests/ops")

GIT_USER_NAME = "agent-d demo"
GIT_USER_EMAIL = "demo@agent-d.invalid"
# 2026-01-01T00:00:00Z; the head commit is one minute later.
_BASE_EPOCH = 1767225600
_HEAD_EPOCH = _BASE_EPOCH + 60

_GITIGNORE = "target/\n__pycache__/\n*.pyc\n.pytest_cache/\n"
_IGNORED_NAMES = ("__pycache__", "*.pyc", ".pytest_cache")


class AssemblyError(RuntimeError):
    """The requested checkout cannot be assembled (bad op list, unexpected wheel layout...)."""


@dataclass(frozen=True)
class AssembledCheckout:
    repo: Path
    base_sha: str
    head_sha: str


# ---------------------------------------------------------------------------------------------
# text edits (each must match exactly once; everything else stays byte-identical)


def _remove_once(text: str, pattern: str, what: str) -> str:
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if len(matches) != 1:
        raise AssemblyError(f"expected exactly one {what}, found {len(matches)}")
    m = matches[0]
    return text[: m.start()] + text[m.end() :]


def remove_import_line(text: str, op: str) -> str:
    """Drop ``from . import <op>  ...`` from ``ops/cutile_rs/__init__.py``.

    The last import out leaves ``pass`` in the availability guard, so the package still imports
    (``wiring.package_init`` replaces a lone ``pass`` when an op is wired again)."""
    text = _remove_once(text, rf"^[ \t]*from \. import {re.escape(op)}\b[^\n]*\n", f"import line for {op!r}")
    return re.sub(rf"^({re.escape(GUARD)}[ \t]*\n)(?![ \t]+\S)", r"\1    pass\n", text, flags=re.M)


def remove_lib_block(text: str, op: str) -> str:
    """Drop the ``mod <op> { ... }`` block of ``lib.rs`` and the blank line that separated it."""
    block = rf"mod {re.escape(op)} \{{[ \t]*\n(?:[^\n]*\n)*?\}}[ \t]*(?:\n|\Z)"
    # Prefer eating the blank line before the block, else the one after it (if any).
    for pattern in (rf"^\n{block}", rf"^{block}\n?"):
        if len(re.findall(pattern, text, flags=re.MULTILINE)) == 1:
            return _remove_once(text, pattern, f"lib.rs block for {op!r}")
    raise AssemblyError(f"expected exactly one `mod {op} {{ ... }}` block in lib.rs")


def remove_test_block(text: str) -> str:
    """Drop the two-line ``if is_backend_available("cutile-rs"): _backends = ...`` block."""
    pattern = (
        r'^([ \t]*)if is_backend_available\("cutile-rs"\):[ \t]*\n'
        r'\1[ \t]+_backends = _backends \+ \["cutile-rs"\][ \t]*\n'
    )
    return _remove_once(text, pattern, "cutile-rs _backends block in the test file")


def _edit(path: Path, fn, *args) -> None:
    data = path.read_bytes().decode("utf-8")
    path.write_bytes(fn(data, *args).encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# layout


def wheel_ops(wheel_root: Path) -> list[str]:
    """cutile-rs ops shipped in the wheel (one ``<op>_kernel/`` dir each), sorted."""
    base = Path(wheel_root) / "tilegym" / "ops" / "cutile_rs"
    if not base.is_dir():
        raise AssemblyError(f"{wheel_root} does not look like an unpacked tilegym wheel (no {base})")
    return sorted(
        p.name[: -len("_kernel")] for p in base.iterdir() if p.is_dir() and p.name.endswith("_kernel")
    )


def asset_ops() -> list[str]:
    """Ops for which we ship a test file."""
    return sorted(p.stem[len("test_") :] for p in (ASSETS_DIR / "tests" / "ops").glob("test_*.py"))


def _check_dest(dest: Path) -> None:
    """Allow replacing ``dest`` only when it is absent, empty, or an earlier assembly."""
    if not dest.exists() and not dest.is_symlink():
        return
    if dest.is_symlink() or not dest.is_dir():
        raise AssemblyError(f"{dest} exists and is not a directory")
    if any(dest.iterdir()) and not ((dest / ".git").is_dir() or (dest / "src" / "tilegym").is_dir()):
        raise AssemblyError(f"refusing to replace {dest}: non-empty and not an assembled checkout")
    shutil.rmtree(dest)


def _remove_op_files(root: Path, op: str) -> None:
    """Remove the cutile-rs sources and wrapper of ``op`` plus its two wiring entries."""
    kdir = root / CUTILE_RS / f"{op}_kernel"
    for name in ("kernel.rs", "ffi.rs"):
        (kdir / name).unlink(missing_ok=True)
    if kdir.is_dir() and not any(kdir.iterdir()):
        kdir.rmdir()
    (root / CUTILE_RS / f"{op}.py").unlink(missing_ok=True)
    _edit(root / CUTILE_RS_INIT, remove_import_line, op)
    _edit(root / LIB_RS, remove_lib_block, op)


def _normalise_modes(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)


def _git(repo: Path, *args: str, env_extra: dict[str, str] | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
    )
    if env_extra:
        env.update(env_extra)
    proc = subprocess.run(["git", *args], check=False, cwd=repo, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssemblyError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _commit(repo: Path, message: str, epoch: int) -> str:
    date = f"@{epoch} +0000"
    _git(repo, "add", "-A")
    _git(
        repo,
        "commit",
        "-q",
        "--no-verify",
        "--allow-empty",
        "-m",
        message,
        env_extra={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    )
    return _git(repo, "rev-parse", "HEAD")


def assemble_checkout(
    dest: Path, wheel_root: Path, ops: Sequence[str], port_ops: Sequence[str]
) -> AssembledCheckout:
    """Build the two-commit demo repository at ``dest`` (replacing an earlier one).

    ``ops``: cutile-rs ops kept in the runtime (others are removed with their wiring);
    ``port_ops``: subset of ``ops`` whose host side is absent at base and whose
    ``kernel.rs`` alone is added by the head commit.
    """
    dest = Path(dest).absolute()
    wheel_root = Path(wheel_root)
    ops = list(dict.fromkeys(ops))
    port_ops = list(dict.fromkeys(port_ops))
    available = wheel_ops(wheel_root)
    tested = asset_ops()
    if not ops:
        raise AssemblyError("no ops requested")
    for op in ops:
        if op not in available:
            raise AssemblyError(f"op {op!r} is not a cutile-rs op of the wheel (has: {', '.join(available)})")
        if op not in tested:
            raise AssemblyError(f"no demo test file for op {op!r} (have: {', '.join(tested)})")
    for op in port_ops:
        if op not in ops:
            raise AssemblyError(f"port op {op!r} is not among the kept ops {ops}")

    _check_dest(dest)
    dest.mkdir(parents=True)
    try:
        return _build(dest, wheel_root, ops, port_ops, available)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def _build(
    dest: Path, wheel_root: Path, ops: list[str], port_ops: list[str], available: list[str]
) -> AssembledCheckout:
    ignore = shutil.ignore_patterns(*_IGNORED_NAMES)

    # Runtime: the wheel's package, minus the cutile-rs ops not asked for.
    shutil.copytree(wheel_root / "tilegym", dest / "src" / "tilegym", ignore=ignore)
    for op in available:
        if op not in ops:
            _remove_op_files(dest, op)

    # Our test suite and project files.
    tests_src = ASSETS_DIR / "tests"
    (dest / TESTS_OPS).mkdir(parents=True)
    for name in ("__init__.py", "conftest.py", "common.py"):
        shutil.copyfile(tests_src / name, dest / "tests" / name)
    shutil.copyfile(tests_src / "ops" / "__init__.py", dest / TESTS_OPS / "__init__.py")
    for op in ops:
        shutil.copyfile(tests_src / "ops" / f"test_{op}.py", dest / TESTS_OPS / f"test_{op}.py")
    shutil.copyfile(ASSETS_DIR / "pyproject.toml", dest / "pyproject.toml")
    (dest / ".gitignore").write_bytes(_GITIGNORE.encode())

    # Base: strip the host side of each port op (keep kernel.rs aside for head).
    kernels: dict[str, bytes] = {}
    for op in port_ops:
        kernels[op] = (dest / CUTILE_RS / f"{op}_kernel" / "kernel.rs").read_bytes()
        _remove_op_files(dest, op)
        _edit(dest / TESTS_OPS / f"test_{op}.py", remove_test_block)
    _normalise_modes(dest)

    _git(dest, "init", "-q")
    _git(dest, "symbolic-ref", "HEAD", "refs/heads/main")
    for key, value in (
        ("user.name", GIT_USER_NAME),
        ("user.email", GIT_USER_EMAIL),
        ("commit.gpgsign", "false"),
        ("core.autocrlf", "false"),
        ("core.fileMode", "true"),
    ):
        _git(dest, "config", key, value)
    names = ", ".join(port_ops) if port_ops else "no op"
    base_sha = _commit(dest, f"base: runtime without the host side of {names}", _BASE_EPOCH)

    # Head: the device kernels only.
    for op, data in kernels.items():
        kdir = dest / CUTILE_RS / f"{op}_kernel"
        kdir.mkdir(parents=True, exist_ok=True)
        (kdir / "kernel.rs").write_bytes(data)
        os.chmod(kdir / "kernel.rs", 0o644)
    head_sha = _commit(dest, f"port: add {names} kernel.rs", _HEAD_EPOCH)
    return AssembledCheckout(repo=dest, base_sha=base_sha, head_sha=head_sha)


def demo_cargo_target(workdir: Path) -> Path:
    """The demo's cargo target folder: outside the checkout that every run replaces, so a second
    run reuses the compiled cutile crates instead of building them again."""
    return Path(workdir) / CARGO_TARGET_DIRNAME


def assemble_demo(
    workdir: Path, *, op: str = "silu_and_mul", cache_dir: Path | None = None
) -> AssembledCheckout:
    """``<workdir>/tilegym-demo`` with ``op`` kept and ported (wheel fetched on first use)."""
    return assemble_checkout(Path(workdir) / DEMO_DIRNAME, tilegym_wheel(cache_dir), ops=[op], port_ops=[op])
