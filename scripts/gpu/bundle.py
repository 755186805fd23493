"""Bundle files: archives split into parts of at most 60 MiB, the manifest, the carry plan.

A bundle folder holds ``part-01.bin``, ``part-02.bin``, ... and ``manifest.json``. The parts are
the byte slices of one or more ``.tar.xz`` archives, in archive order (an archive never shares a
part with another, so the toolchain archive keeps its parts when only the payload changes).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

MiB = 1024 * 1024
PART_LIMIT = 60 * MiB
CALL_LIMIT = 64 * MiB
MANIFEST = "manifest.json"
FORMAT = 1


def sha256_file(path: Path, chunk: int = 4 * MiB) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def part_name(index: int) -> str:
    return f"part-{index:02d}.bin"


def split_archive(
    archive: Path, out_dir: Path, first_index: int, limit: int = PART_LIMIT
) -> tuple[list[dict], str]:
    """Cut ``archive`` into equal ``part-NN.bin`` files of at most ``limit`` bytes.

    Returns the parts' manifest rows and the whole archive's sha256, both from one read."""
    size = archive.stat().st_size
    count = max(1, math.ceil(size / limit))
    chunk = max(1, math.ceil(size / count))  # balanced: more room next to the working tree in each call
    rows, whole = [], hashlib.sha256()
    with archive.open("rb") as src:
        for i in range(count):
            name = part_name(first_index + i)
            data = src.read(chunk)
            (out_dir / name).write_bytes(data)
            whole.update(data)
            rows.append({"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return rows, whole.hexdigest()


def write_bundle(
    archives: list[tuple[str, Path]], out_dir: Path, meta: dict, limit: int = PART_LIMIT
) -> dict:
    """Split each (name, archive) into parts under ``out_dir`` and write the manifest; return it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("part-*.bin"):
        old.unlink()
    entries, index = [], 1
    for name, path in archives:
        parts, sha256 = split_archive(path, out_dir, index, limit)
        index += len(parts)
        entries.append({"name": name, "size": path.stat().st_size, "sha256": sha256, "parts": parts})
    manifest = {"format": FORMAT, **meta, "archives": entries}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def load_manifest(bundle_dir: Path) -> dict:
    return json.loads((Path(bundle_dir) / MANIFEST).read_text(encoding="utf-8"))


def all_parts(manifest: dict) -> list[dict]:
    return [p for a in manifest["archives"] for p in a["parts"]]


def reassemble(archive: dict, parts_dir: Path, dest: Path) -> None:
    """Concatenate an archive's parts from ``parts_dir`` into ``dest`` and check every sha256."""
    h = hashlib.sha256()
    with dest.open("wb") as out:
        for part in archive["parts"]:
            data = (parts_dir / part["name"]).read_bytes()
            if hashlib.sha256(data).hexdigest() != part["sha256"]:
                raise ValueError(f"{part['name']}: sha256 mismatch")
            h.update(data)
            out.write(data)
    if h.hexdigest() != archive["sha256"]:
        raise ValueError(f"{archive['name']}: sha256 of the reassembled archive does not match the manifest")


def carry_plan(
    manifest: dict,
    tree_bytes: int,
    bundle_rel: str = "gpu_bundle",
    limit: int = CALL_LIMIT,
    margin: int = 1 * MiB,
) -> list[dict]:
    """Group the parts, in order, into device calls that each stay under the 64 MiB carry limit.

    Every call also carries the manifest; the working tree travels with each call anyway.
    """
    manifest_bytes = len(json.dumps(manifest, indent=2)) + 1
    budget = limit - margin - tree_bytes - manifest_bytes
    calls: list[dict] = []
    current: list[dict] = []
    for part in all_parts(manifest):
        if part["size"] > budget:
            raise ValueError(
                f"{part['name']} ({part['size']} bytes) cannot travel in one call next to a "
                f"{tree_bytes}-byte working tree"
            )
        if current and sum(p["size"] for p in current) + part["size"] > budget:
            calls.append(_call(current, bundle_rel, tree_bytes, manifest_bytes))
            current = []
        current.append(part)
    if current:
        calls.append(_call(current, bundle_rel, tree_bytes, manifest_bytes))
    return calls


def _call(parts: list[dict], bundle_rel: str, tree_bytes: int, manifest_bytes: int) -> dict:
    carry = [f"{bundle_rel}/{p['name']}" for p in parts] + [f"{bundle_rel}/{MANIFEST}"]
    total = sum(p["size"] for p in parts) + tree_bytes + manifest_bytes
    return {"carry": carry, "bytes": total, "MiB": round(total / MiB, 2)}
