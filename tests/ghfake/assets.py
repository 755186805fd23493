"""Fetch GitHub's REST description and webhook examples from npm into a local cache.

Nothing here is committed to the repository: the two npm tarballs are downloaded on
first use with ``npm pack`` (the ordinary npm client), and only the two files the
harness reads are extracted.  Both versions are pinned exactly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.wheel import default_cache_dir as agent_d_cache

OPENAPI_PKG = "@octokit/openapi"
OPENAPI_VERSION = "23.0.2"
OPENAPI_MEMBER = "package/generated/api.github.com.json"

WEBHOOKS_PKG = "@octokit/webhooks-examples"
WEBHOOKS_VERSION = "7.6.1"
WEBHOOKS_MEMBER = "package/api.github.com/index.json"


class AssetError(RuntimeError):
    """The npm assets could not be obtained."""


@dataclass(frozen=True)
class Assets:
    spec_path: Path
    webhook_examples_path: Path


def default_cache_dir() -> Path:
    """npm/ under agent-d's cache (``$AGENT_D_CACHE``, else ~/.cache/agent-d), shared with the bot's."""
    return agent_d_cache() / "npm"


def _extract_one(pkg: str, version: str, member: str, dest: Path) -> Path:
    """Return ``dest`` after making sure it holds ``member`` of ``pkg@version``."""
    if dest.is_file() and dest.stat().st_size > 0:
        return dest
    npm = shutil.which("npm")
    if npm is None:
        raise AssetError(
            f"npm is not on PATH; the GitHub fake needs it once to download {pkg}@{version}. "
            "Install Node.js/npm, or pre-populate the cache: "
            f"{dest} (from `npm pack {pkg}@{version}`, member {member})."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".pack-") as tmp:
        proc = subprocess.run(
            [npm, "pack", f"{pkg}@{version}", "--silent", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise AssetError(f"`npm pack {pkg}@{version}` failed ({proc.returncode}):\n{proc.stderr.strip()}")
        tarballs = list(Path(tmp).glob("*.tgz"))
        if len(tarballs) != 1:
            raise AssetError(f"`npm pack {pkg}@{version}` produced {tarballs!r}, expected one .tgz")
        with tarfile.open(tarballs[0], "r:gz") as tar:
            try:
                info = tar.getmember(member)
            except KeyError as exc:
                raise AssetError(f"{pkg}@{version} has no {member}") from exc
            src = tar.extractfile(info)
            assert src is not None
            partial = dest.with_suffix(dest.suffix + ".part")
            with src, open(partial, "wb") as out:
                shutil.copyfileobj(src, out)
            os.replace(partial, dest)  # atomic: concurrent sessions never see half a file
    return dest


def ensure_assets(cache_dir: str | os.PathLike[str] | None = None) -> Assets:
    """Download (once) and return the paths of the pinned spec and webhook examples."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    spec = _extract_one(
        OPENAPI_PKG,
        OPENAPI_VERSION,
        OPENAPI_MEMBER,
        root / f"octokit-openapi-{OPENAPI_VERSION}" / "api.github.com.json",
    )
    hooks = _extract_one(
        WEBHOOKS_PKG,
        WEBHOOKS_VERSION,
        WEBHOOKS_MEMBER,
        root / f"octokit-webhooks-examples-{WEBHOOKS_VERSION}" / "index.json",
    )
    return Assets(spec_path=spec, webhook_examples_path=hooks)


if __name__ == "__main__":  # `python tests/ghfake/assets.py` pre-fills the cache
    a = ensure_assets()
    print(a.spec_path)
    print(a.webhook_examples_path)
