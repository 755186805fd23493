"""``pack``: the CPU half. Build the two trees, port with agent-d, build both libraries, write the bundle.

Tree A (``hand_written``) is the TileGym checkout as it is. Tree B (``agent_d``) is the same
checkout with each op's host files and wiring removed (ffi.rs, the wrapper ``<op>.py``, the
``from . import <op>`` line, the ``mod <op> {...}`` block of lib.rs, the cutile-rs ``_backends``
block of the op's test file); ``agent-d port`` then regenerates them. An op whose port does not
get through generate/apply/build/ABI smoke is stripped again, so tree B never holds hand-written
host code for it; the manifest records why.

Needs this repository's ``bot`` package (importable from the repo root), cargo, rustfmt, ruff,
libclang, strip, xz and pip with registry access.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from gpu.bundle import MiB, carry_plan, write_bundle
from gpu.pack.porting import (
    CRATE,
    CUTILE_RS,
    REPO_ROOT,
    SO_REL,
    TREE_FILES,
    copy_entry,
    export_checkout,
    git_head,
    log,
    port_op,
    sh,
    strip_op,
)

# The CUDA 13.4 tile toolchain of docs (gpu-recipe): wheel -> [(member, destination under CUDA_HOME)].
TOOLCHAIN = {
    "nvidia-cuda-tileiras==13.4.92": [("nvidia/cu13/bin/tileiras", "bin/tileiras")],
    "nvidia-nvvm==13.4.92": [("nvidia/cu13/lib/libnvvm.so.4", "lib/libnvvm.so.4")],
    "nvidia-cuda-nvcc==13.4.92": [("nvidia/cu13/bin/ptxas", "bin/ptxas")],
    "nvidia-nvjitlink==13.4.92": [("nvidia/cu13/lib/libnvJitLink.so.13", "lib/libnvJitLink.so.13")],
}
TOOLCHAIN_LINKS = {  # path under CUDA_HOME -> relative link target
    "nvvm/lib64/libnvvm.so.4": "../../lib/libnvvm.so.4",
    "nvvm/lib64/libnvvm.so": "libnvvm.so.4",
    "lib/libnvvm.so": "libnvvm.so.4",
    "lib/libnvJitLink.so": "libnvJitLink.so.13",
}
# What the GPU machine's image has (device KINDS.md): carrying those would shadow them.
IMAGE_HAS = ("torch", "pytest", "pytest-timeout", "numpy", "pyyaml", "typing-extensions", "triton",
             "transformers", "cuda-bindings")  # fmt: skip
# agent-d's dependencies that `agent-d verify` never imports: the GitHub side and the formatter.
NOT_FOR_VERIFY = ("gitpython", "pygithub", "ruff")
# cp312 wheels the GPU machine lacks: TileGym's runtime and the rest of agent-d's dependencies with
# theirs (tests/test_gpu_bundle.py checks that this closes over pyproject's list). jsonschema reads
# a porter's contract: without it verify cannot compare a contract's launch with the reference.
RUNTIME_WHEELS = ("cffi", "pycparser", "cuda-tile==1.7.0", "unidiff", "pyelftools", "jsonschema", "referencing",
                  "jsonschema-specifications", "rpds-py", "attrs")  # fmt: skip
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
XZ_LEVEL = "-9"


CONTRACTS = REPO_ROOT / "tests" / "fixtures" / "contracts"


# ------------------------------------------------------------------------------------ checkout


def project_files(repo: Path) -> list[str]:
    """The files git knows in ``repo``, tracked or untracked but not ignored (what a clean clone
    plus the working tree's new files would hold)."""
    out = sh(["git", "-C", str(repo), "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True)
    return [f for f in out.stdout.split("\0") if f and (repo / f).is_file()]


def build_agent_d_wheel(repo: Path, wheels: Path) -> None:
    """agent-d's wheel from a copy of the project's files: setuptools reuses the checkout's own
    ``build/``, where modules moved or removed since an earlier build would ride along as ghosts."""
    with tempfile.TemporaryDirectory(prefix="agent-d-wheel-") as tmp:
        for rel in project_files(repo):
            dest = Path(tmp) / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / rel, dest)
        sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), tmp])


def copy_tree(src: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in TREE_FILES:
        copy_entry(src / name, dest / name)


# ------------------------------------------------------------------------------------ strip / port


def selection_args(tree: Path, op: str, backend: str = "") -> list[str]:
    """pytest arguments after ``python -m pytest`` (agent-d's own rule, docs/specification.md, "The correctness run");
    ``backend``: the -k expression of the backend whose cases run (the cuTile baseline of a new op)."""
    from bot.targets.discover import discover
    from bot.targets.types import Target
    from bot.testing import testrun

    sites = discover(Target(tree, op)).test_sites
    argv, _ = testrun.command("python3", testrun.read_test_files(tree, sites), backend or testrun.CUTILE_RS)
    return argv[3:]


def new_kernels(folder: Path | None) -> dict[str, Path]:
    """``<op>_kernel/kernel.rs`` folders of kernels TileGym has no cutile-rs port of (ours, in tests/fixtures)."""
    if folder is None or not folder.is_dir():
        return {}
    return {
        d.name[: -len("_kernel")]: d
        for d in sorted(folder.iterdir())
        if d.is_dir() and d.name.endswith("_kernel") and (d / "kernel.rs").is_file()
    }


def add_new_op(tree: Path, op: str, kernel_dir: Path) -> list[str]:
    """Put a new op's kernel.rs (and its host contract, if it has one) into ``tree``, as a porter's PR would."""
    dest = tree / CUTILE_RS / f"{op}_kernel"
    if dest.exists():
        raise FileExistsError(f"{dest.relative_to(tree)} already exists: {op} is not a new op here")
    dest.mkdir(parents=True)
    added = []
    for name in ("kernel.rs", "host_contract.yaml"):
        if (kernel_dir / name).is_file():
            shutil.copy2(kernel_dir / name, dest / name)
            added.append(str(CUTILE_RS / f"{op}_kernel" / name))
    return added


# ------------------------------------------------------------------------------------ build


def cargo_build(tree: Path, cargo_target_dir: Path, log_path: Path) -> None:
    """agent-d's own build stage (it holds the shared target dir and forgets the other tree's
    fingerprints), then strip the library that travels."""
    from bot.build import build, toolchain
    from bot.errors import Blocked, Failed
    from bot.targets.types import Target

    try:
        built = build.build(Target(tree, "any"), toolchain.resolve(), cargo_target_dir, log_path)
    except (Failed, Blocked) as e:
        raise RuntimeError(f"cargo build failed in {tree / CRATE}: {e}; see {log_path}") from e
    sh(["strip", "--strip-unneeded", built.so_path])


def exported(so: Path) -> list[str]:
    from bot.report.validator.elf import exported_functions

    return sorted(s for s in exported_functions(so) if s.startswith("cutile_"))


# ------------------------------------------------------------------------------------ wheels / toolchain


def pip_download(specs, dest: Path, cp312: bool = True) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest)]
    if cp312:
        cmd += ["--python-version", "3.12", "--implementation", "cp"]
        for p in PLATFORMS:
            cmd += ["--platform", p]
    sh(cmd + list(specs))


def wheel_for(spec: str, folder: Path) -> Path:
    name, _, version = spec.partition("==")
    stem = name.replace("-", "_").lower()
    found = sorted(
        p
        for p in folder.glob("*.whl")
        if p.name.lower().startswith(stem + "-") and (not version or p.name.split("-")[1] == version)
    )
    if not found:
        raise FileNotFoundError(f"no wheel for {spec} in {folder}")
    return found[-1]


def layout_toolchain(wheels: Path, cuda_home: Path) -> None:
    if cuda_home.exists():
        shutil.rmtree(cuda_home)
    for spec, members in TOOLCHAIN.items():
        with zipfile.ZipFile(wheel_for(spec, wheels)) as zf:
            for member, rel in members:
                dest = cuda_home / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(zf.read(member))
                dest.chmod(0o755)
    for rel, target in TOOLCHAIN_LINKS.items():
        link = cuda_home / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)


def make_archive(root: Path, names: list[str], dest: Path) -> Path:
    """Deterministic ``tar`` of ``root/<names>`` compressed with ``xz -9``."""
    tar = subprocess.Popen(
        [
            "tar",
            "--sort=name",
            "--mtime=@0",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "-C",
            str(root),
            "-cf",
            "-",
            *names,
        ],
        stdout=subprocess.PIPE,
    )
    with dest.open("wb") as out:
        xz = subprocess.run(["xz", XZ_LEVEL, "-T0", "-c"], stdin=tar.stdout, stdout=out)
    if tar.wait() != 0 or xz.returncode != 0:
        raise RuntimeError(f"tar | xz failed for {dest}")
    return dest


def toolchain_archive(cache: Path) -> Path:
    """The toolchain archive, cached: it only depends on the wheel versions."""
    key = "-".join(s.split("==")[1] for s in TOOLCHAIN)
    archive = cache / f"toolchain-{key}.tar.xz"
    if archive.is_file():
        log(f"toolchain archive (cached): {archive} ({archive.stat().st_size / MiB:.1f} MiB)")
        return archive
    wheels = cache / "wheels"
    pip_download(TOOLCHAIN, wheels)
    stage = cache / "toolchain-stage"
    if stage.exists():
        shutil.rmtree(stage)
    layout_toolchain(wheels, stage / "toolchain" / "cuda")
    log("compressing the toolchain with xz -9 (a few minutes, cached afterwards)")
    partial = archive.with_suffix(".partial")
    make_archive(stage, ["toolchain"], partial)
    partial.rename(archive)
    shutil.rmtree(stage)
    return archive


# ------------------------------------------------------------------------------------ pack


def working_tree_bytes() -> int:
    proc = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    total = 0
    for rel in filter(None, proc.stdout.split("\0")):
        p = REPO_ROOT / rel
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def _missing_facts(tree: Path, op: str, out: Path) -> list[str]:
    """The facts agent-d asks for when it plans ``op`` in ``tree`` (empty: no contract needed)."""
    from bot.pipeline import make_plan
    from bot.targets.types import Target

    plan, _facts, _co = make_plan(Target(tree, op), out / op)
    return [m.key for m in plan.missing]


def pack(
    tilegym: Path | None,
    out: Path,
    ops: list[str],
    cargo_target_dir: Path,
    cache: Path,
    new: dict[str, Path] | None = None,
    faults_dir: Path | None = None,
    faults_tilegym: Path | None = None,
) -> dict:
    """``ops``: TileGym's ported ops (tree A keeps its hand-written host code, tree B is regenerated);
    ``new``: kernels of ops with no cutile-rs port (tree B gets the kernel and agent-d's host code;
    tree A runs the same test cases on the cuTile backend as the baseline); ``faults_dir``: the fault
    corpus (scripts/gpu/faults.py), built from the tilegym wheel, and also on ``faults_tilegym`` (a
    TileGym checkout) when given. Without ``tilegym``, the bundle holds the fault corpus alone."""
    sys.path.insert(0, str(REPO_ROOT))
    out = out.resolve()
    work = out / ".work"
    if work.exists():
        shutil.rmtree(work)
    stage = work / "payload"
    logs = stage / "pack_logs"
    logs.mkdir(parents=True)
    commit, op_meta = "", {}
    if tilegym is not None:
        commit, op_meta = _pack_trees(tilegym, work, stage, logs, ops, new or {}, cargo_target_dir)
    fault_meta = None
    if faults_dir is not None:
        from gpu.pack.faults import pack_faults

        fault_meta = pack_faults(faults_dir, stage, cargo_target_dir, logs, faults_tilegym)
    log("downloading cp312 wheels and building the agent-d wheel")
    wheels = stage / "wheels"
    pip_download(RUNTIME_WHEELS, cache / "runtime-wheels")
    wheels.mkdir()
    for spec in RUNTIME_WHEELS:
        shutil.copy2(wheel_for(spec, cache / "runtime-wheels"), wheels)
    build_agent_d_wheel(REPO_ROOT, wheels)
    from bot.read.reader import reader_binary

    reader = stage / "reader" / "kernel-reader"
    reader.parent.mkdir()
    shutil.copy2(reader_binary(), reader)
    sh(["strip", "--strip-unneeded", str(reader)])
    meta = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tilegym_commit": commit,
        "tilegym_source": str(tilegym) if tilegym is not None else "",
        "agent_d_commit": git_head(REPO_ROOT),
        "agent_d_dirty": bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
            ).stdout.strip()
        ),
        "ops": op_meta,
    }
    if fault_meta is not None:
        meta["faults"] = fault_meta
    (stage / "pack.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    log("compressing the payload with xz -9")
    payload = make_archive(work, ["payload"], work / "payload.tar.xz")
    toolchain = toolchain_archive(cache)
    manifest = write_bundle([("toolchain", toolchain), ("payload", payload)], out, meta)
    payload.unlink()  # its bytes are the parts now; .work/payload/ stays for inspection
    report_carry(manifest, out)
    return manifest


def _pack_trees(
    tilegym: Path,
    work: Path,
    stage: Path,
    logs: Path,
    ops: list[str],
    new: dict[str, Path],
    cargo_target_dir: Path,
) -> tuple[str, dict]:
    """The two TileGym trees, each op ported into tree B, both libraries built: (commit, per-op meta)."""
    from bot.infer.contract.host_contract import count_lines as contract_line_count

    checkout = work / "checkout"
    log(f"exporting {tilegym}")
    commit = export_checkout(tilegym.resolve(), checkout)
    tree_a, tree_b = stage / "hand_written", stage / "agent_d"
    copy_tree(checkout, tree_a)
    copy_tree(checkout, tree_b)
    op_meta: dict[str, dict] = {}
    for op in ops:
        op_meta[op] = {
            "pytest_args": selection_args(tree_a, op),
            "removed": strip_op(tree_b, op, strict=True),
        }
    for op in ops:
        # The porter's part: a host contract where inference cannot reach (ours, in tests/fixtures),
        # so only for an op agent-d cannot plan from the checkout alone.
        contract = CONTRACTS / f"{op}.yaml"
        if contract.is_file() and _missing_facts(tree_b, op, work / "plan_out"):
            shutil.copy2(contract, tree_b / CUTILE_RS / f"{op}_kernel" / "host_contract.yaml")
            op_meta[op]["contract_lines"] = contract_line_count(contract.read_text(encoding="utf-8"))
        else:
            op_meta[op]["contract_lines"] = 0
    from bot.testing import testrun

    for op, kernel_dir in new.items():
        op_meta[op] = {
            "new": True,
            "pytest_args": selection_args(tree_a, op, testrun.CUTILE),  # the cuTile baseline
            "added": add_new_op(tree_b, op, kernel_dir),
        }
        contract = kernel_dir / "host_contract.yaml"
        op_meta[op]["contract_lines"] = (
            contract_line_count(contract.read_text(encoding="utf-8")) if contract.is_file() else 0
        )
    ops = [*ops, *new]
    for op in ops:
        log(f"agent-d port {op} (tree B)")
        outcome = port_op(tree_b, op, cargo_target_dir, logs / f"port_{op}.txt")
        if outcome["status"] != "generated":
            strip_op(tree_b, op, strict=False)  # no partial or hand-written host code for this op in B
        op_meta[op]["pack"] = outcome
        log(
            f"  {op}: {outcome['status']}"
            + (
                f" ({outcome['port_verdict']} {outcome['port_class']}: {outcome['reason']})"
                if outcome["reason"]
                else ""
            )
        )
    for name, tree in (("hand_written", tree_a), ("agent_d", tree_b)):
        log(f"cargo build --release ({name})")
        cargo_build(tree, cargo_target_dir, logs / f"cargo_{name}.txt")
        symbols = exported(tree / SO_REL)
        log(
            f"  {name}: {SO_REL.name} {(tree / SO_REL).stat().st_size / MiB:.1f} MiB, exports {', '.join(symbols)}"
        )
        for op in ops:
            op_meta[op].setdefault("exports", {})[name] = f"cutile_{op}" in symbols
            generated = op_meta[op]["pack"]["status"] == "generated"
            expected = generated if name == "agent_d" else not op_meta[op].get("new")
            if expected != (f"cutile_{op}" in symbols):
                raise RuntimeError(
                    f"{name}: libcutile_kernels.so {'lacks' if expected else 'has'} cutile_{op}"
                )
    shutil.rmtree(checkout)
    return commit, op_meta


def report_carry(manifest: dict, out: Path) -> list[dict]:
    tree = working_tree_bytes()
    rel = os.path.relpath(out, REPO_ROOT)
    calls = carry_plan(manifest, tree, rel)
    log(
        f"bundle {out}: "
        + ", ".join(
            f"{p['name']} {p['size'] / MiB:.1f} MiB" for a in manifest["archives"] for p in a["parts"]
        )
    )
    log(f"working tree that travels with every call: {tree / MiB:.2f} MiB")
    for i, call in enumerate(calls, 1):
        log(f"device call {i}: carry {json.dumps(call['carry'])} ({call['MiB']} MiB with the working tree)")
    for op, info in manifest["ops"].items():
        p = info["pack"]
        log(f"  {op}: {p['status']}" + (f" - {p['reason']}" if p["reason"] else ""))
    cases = manifest.get("faults", {}).get("cases", {})
    if cases:
        on_gpu = sum(1 for c in cases.values() if c["decided"] == "gpu")
        log(f"  fault corpus: {len(cases)} cases, {on_gpu} to run on the GPU (`run --stage faults`)")
    return calls
