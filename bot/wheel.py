"""Fetch and unpack the published ``tilegym`` wheel into a local cache.

The demo checkout (``bot.demo``) is assembled from the runtime files of the
real ``tilegym`` wheel on PyPI.  Nothing from that wheel is stored in this
repository: it is downloaded with pip on first use and unpacked once into the
cache directory, then reused.

Cache layout (``cache_dir`` defaults to ``$AGENT_D_CACHE`` or ``~/.cache/agent-d``)::

    <cache>/wheels/tilegym-<version>-py3-none-any.whl
    <cache>/tilegym-<version>/tilegym/...          <- returned root holds this
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_VERSION = "1.5.1"
PACKAGE = "tilegym"


class WheelUnavailable(RuntimeError):
    """The tilegym wheel could not be downloaded or unpacked."""


def default_cache_dir() -> Path:
    """``$AGENT_D_CACHE`` if set and non-empty, else ``~/.cache/agent-d``."""
    env = os.environ.get("AGENT_D_CACHE", "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "agent-d"


def _find_wheel(wheels_dir: Path, version: str) -> Path | None:
    if not wheels_dir.is_dir():
        return None
    hits = sorted(wheels_dir.glob(f"{PACKAGE}-{version}-*.whl"))
    return hits[0] if hits else None


def _download(wheels_dir: Path, version: str) -> Path:
    wheels_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--disable-pip-version-check",
        "--no-input",
        f"{PACKAGE}=={version}",
        "-d",
        str(wheels_dir),
    ]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WheelUnavailable(f"could not run pip to download {PACKAGE}=={version}: {exc}") from exc
    wheel = _find_wheel(wheels_dir, version)
    if proc.returncode != 0 or wheel is None:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise WheelUnavailable(
            f"`pip download --no-deps {PACKAGE}=={version}` failed (exit {proc.returncode}); "
            f"no wheel in {wheels_dir}.\n{tail}"
        )
    return wheel


def _unpack(wheel: Path, root: Path) -> None:
    """Extract ``wheel`` into ``root`` atomically (temp dir + rename)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    try:
        try:
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(tmp)
        except (zipfile.BadZipFile, OSError) as exc:
            raise WheelUnavailable(f"cannot unpack {wheel}: {exc}") from exc
        if not (tmp / PACKAGE / "__init__.py").is_file():
            raise WheelUnavailable(f"{wheel} holds no {PACKAGE}/ package")
        try:
            os.rename(tmp, root)
        except OSError:
            # Another process won the race; use its copy if it is complete.
            if not (root / PACKAGE / "__init__.py").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def tilegym_wheel(cache_dir: Path | None = None, version: str = DEFAULT_VERSION) -> Path:
    """Return the unpacked root of ``tilegym==version`` (the folder holding ``tilegym/``).

    Downloads the wheel with ``python -m pip download --no-deps`` only when no
    matching ``.whl`` is cached, and unpacks it only when the root is missing.
    Raises :class:`WheelUnavailable` when pip or the unpacking fails.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = cache / f"{PACKAGE}-{version}"
    if (root / PACKAGE / "__init__.py").is_file():
        return root
    if root.exists():
        # A partial or foreign folder: start over.
        shutil.rmtree(root)
    wheels_dir = cache / "wheels"
    wheel = _find_wheel(wheels_dir, version) or _download(wheels_dir, version)
    _unpack(wheel, root)
    return root
