"""CPU-side tests of the pack side of scripts/gpu_proof.py: parts and reassembly, the carry plan, unpack, the port outcome, stripping an op."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from gpu import bundle
from gpu.bundle import MiB
from gpu.run import device
from gpu_proof_support import random_file, tar_xz


def test_parts_at_most_60_mib_and_reassemble_identically(tmp_path):
    big = random_file(tmp_path / "toolchain.tar.xz", 2 * bundle.PART_LIMIT + 12345)
    small = random_file(tmp_path / "payload.tar.xz", 3 * MiB, seed=2)
    out = tmp_path / "gpu_bundle"
    manifest = bundle.write_bundle([("toolchain", big), ("payload", small)], out, {"tilegym_commit": "abc"})
    names = sorted(p.name for p in out.glob("part-*.bin"))
    assert names == ["part-01.bin", "part-02.bin", "part-03.bin", "part-04.bin"]
    assert all((out / n).stat().st_size <= 60 * MiB for n in names)
    toolchain_parts = [p["name"] for p in manifest["archives"][0]["parts"]]
    assert toolchain_parts == ["part-01.bin", "part-02.bin", "part-03.bin"]  # archives never share a part
    loaded = bundle.load_manifest(out)
    assert loaded["tilegym_commit"] == "abc"
    for archive, original in zip(loaded["archives"], (big, small)):
        dest = tmp_path / f"re-{archive['name']}"
        bundle.reassemble(archive, out, dest)
        assert dest.read_bytes() == original.read_bytes()
        assert archive["sha256"] == bundle.sha256_file(original)  # hashed while splitting, same digest


def test_reassemble_rejects_a_corrupted_part(tmp_path):
    arch = random_file(tmp_path / "a.tar.xz", 5000)
    out = tmp_path / "b"
    manifest = bundle.write_bundle([("payload", arch)], out, {}, limit=2000)
    assert len(manifest["archives"][0]["parts"]) == 3
    data = bytearray((out / "part-02.bin").read_bytes())
    data[0] ^= 1
    (out / "part-02.bin").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="part-02.bin"):
        bundle.reassemble(manifest["archives"][0], out, tmp_path / "x")


def test_carry_plan_fits_each_call_under_64_mib(tmp_path):
    manifest = {
        "archives": [
            {
                "name": "toolchain",
                "parts": [
                    {"name": "part-01.bin", "size": 60 * MiB},
                    {"name": "part-02.bin", "size": 33 * MiB},
                ],
            },
            {"name": "payload", "parts": [{"name": "part-03.bin", "size": 14 * MiB}]},
        ]
    }
    calls = bundle.carry_plan(manifest, tree_bytes=800_000)
    assert [c["carry"] for c in calls] == [
        ["gpu_bundle/part-01.bin", "gpu_bundle/manifest.json"],
        ["gpu_bundle/part-02.bin", "gpu_bundle/part-03.bin", "gpu_bundle/manifest.json"],
    ]
    assert all(c["bytes"] < 64 * MiB for c in calls)
    with pytest.raises(ValueError):
        bundle.carry_plan(manifest, tree_bytes=5 * MiB)


def test_unpack_is_incremental_and_idempotent(tmp_path):
    tool = tar_xz(tmp_path / "t.tar.xz", "toolchain", {"cuda/bin/tileiras": os.urandom(300_000)})
    pay = tar_xz(tmp_path / "p.tar.xz", "payload", {"pack.json": b"{}", "wheels/x.whl": b"w"})
    full = tmp_path / "full"
    manifest = bundle.write_bundle([("toolchain", tool), ("payload", pay)], full, {"ops": {}}, limit=100_000)
    parts = [p["name"] for p in bundle.all_parts(manifest)]
    assert len(parts) >= 4
    state = tmp_path / "state"
    # call 1: only the first part (and the manifest) travelled
    call1 = tmp_path / "call1"
    call1.mkdir()
    for name in ("manifest.json", parts[0]):
        (call1 / name).write_bytes((full / name).read_bytes())
    got = device.unpack(call1, state)
    assert not got["ready"] and got["missing"] == parts[1:]
    # call 2: the rest
    call2 = tmp_path / "call2"
    call2.mkdir()
    for name in ["manifest.json", *parts[1:]]:
        (call2 / name).write_bytes((full / name).read_bytes())
    got = device.unpack(call2, state)
    assert got["ready"] and got["missing"] == []
    assert (state / "root" / "toolchain" / "cuda" / "bin" / "tileiras").stat().st_size == 300_000
    assert (state / "root" / "payload" / "pack.json").read_text() == "{}"
    # again: nothing to do, still ready
    assert device.unpack(call2, state)["ready"]


def _stage(name: str, status: str = "ok") -> dict:
    return {"name": name, "status": status, "seconds": 0.1, "detail": ""}


PORT_STDOUT = json.dumps(
    [
        {
            "op": "silu_and_mul",
            "verdict": "BLOCKED",
            "class": "env",
            "reason": "no CUDA GPU on this machine",
            "out_dir": "/x",
            "changed": [],
            "stages": [_stage(s) for s in ("launch plan", "generate", "apply", "build", "abi smoke")]
            + [_stage("test", "blocked")],
            "tests": None,
        }
    ]
)


def test_port_outcome_generated_vs_blocked():
    from gpu.pack.porting import port_outcome

    ok = port_outcome(PORT_STDOUT, 3)
    assert ok["status"] == "generated" and ok["stages"]["abi smoke"] == "ok"
    assert "no GPU" in ok["note"]
    blocked_out = json.dumps(
        [{"op": "bmm", "verdict": "BLOCKED", "class": "host", "reason": "bmm: no host pattern",
          "out_dir": "/x", "changed": [], "stages": [_stage("launch plan", "blocked")], "tests": None}]
    )  # fmt: skip
    blocked = port_outcome(blocked_out, 3)
    assert blocked["status"] == "blocked" and blocked["reason"] == "bmm: no host pattern"
    assert port_outcome("not json", 2)["status"] == "blocked"


def test_strip_op_removes_host_files_and_wiring(tmp_path):
    from gpu.pack.porting import CUTILE_RS, strip_op

    ops = tmp_path / CUTILE_RS
    (ops / "silu_and_mul_kernel").mkdir(parents=True)
    (ops / "silu_and_mul_kernel" / "kernel.rs").write_text("// kernel\n")
    (ops / "silu_and_mul_kernel" / "ffi.rs").write_text("// ffi\n")
    (ops / "silu_and_mul.py").write_text("# wrapper\n")
    (ops / "__init__.py").write_text('from tilegym.backend import is_backend_available\n\n'
                                     'if is_backend_available("cutile-rs"):\n'
                                     '    from . import silu_and_mul  # noqa: F401\n')  # fmt: skip
    (ops / "cutile_kernels" / "src").mkdir(parents=True)
    (ops / "cutile_kernels" / "src" / "lib.rs").write_text(
        '#[path = "../../ffi_util.rs"]\nmod ffi_util;\n\nmod silu_and_mul {\n'
        '    include!("../../silu_and_mul_kernel/kernel.rs");\n    include!("../../silu_and_mul_kernel/ffi.rs");\n}\n'
    )
    (tmp_path / "tests" / "ops").mkdir(parents=True)
    (tmp_path / "tests" / "ops" / "test_silu_and_mul.py").write_text(
        'class T:\n    _backends = ["cutile"]\n    if is_backend_available("cutile-rs"):\n'
        '        _backends = _backends + ["cutile-rs"]\n    x = 1\n'
    )
    strip_op(tmp_path, "silu_and_mul")
    assert not (ops / "silu_and_mul_kernel" / "ffi.rs").exists() and not (ops / "silu_and_mul.py").exists()
    assert (ops / "silu_and_mul_kernel" / "kernel.rs").exists()
    init = (ops / "__init__.py").read_text()
    assert "import silu_and_mul" not in init
    compile(init, "__init__.py", "exec")  # the emptied guard still parses (strip_op leaves pass)
    assert "mod silu_and_mul" not in (ops / "cutile_kernels" / "src" / "lib.rs").read_text()
    assert "cutile-rs" not in (tmp_path / "tests" / "ops" / "test_silu_and_mul.py").read_text()
    assert strip_op(tmp_path, "silu_and_mul", strict=False) == []  # nothing left: lenient mode is a no-op


def test_new_kernels_go_into_tree_b_as_a_porters_pr_would(tmp_path):
    from gpu.pack import trees as pack

    kernels = tmp_path / "kernels"
    (kernels / "dropout_kernel").mkdir(parents=True)
    (kernels / "dropout_kernel" / "kernel.rs").write_text("// ours\n")
    (kernels / "rope_kernel").mkdir()
    (kernels / "rope_kernel" / "kernel.rs").write_text("// ours\n")
    (kernels / "rope_kernel" / "host_contract.yaml").write_text("contract_version: 1\n")
    (kernels / "notes").mkdir()  # not a kernel folder
    found = pack.new_kernels(kernels)
    assert sorted(found) == ["dropout", "rope"]
    assert pack.new_kernels(tmp_path / "absent") == {}
    tree = tmp_path / "tree"
    assert pack.add_new_op(tree, "rope", found["rope"]) == [
        "src/tilegym/ops/cutile_rs/rope_kernel/kernel.rs",
        "src/tilegym/ops/cutile_rs/rope_kernel/host_contract.yaml",
    ]
    with pytest.raises(FileExistsError):  # a ported op is not a new one
        pack.add_new_op(tree, "rope", found["rope"])


def test_the_carried_wheels_hold_every_dependency_verify_imports():
    """The GPU machine gets its image plus RUNTIME_WHEELS; every runtime dependency of agent-d that
    verify imports, and theirs, must be among them (a missing jsonschema once made verify unable to
    read a contract, so a contract's wrong launch was blamed on the kernel)."""
    import importlib.metadata
    import tomllib

    from gpu.pack import trees as pack
    from packaging.requirements import Requirement

    def name(spec: str) -> str:
        return Requirement(spec).name.lower().replace("_", "-")

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
           "platform_system": "Linux", "sys_platform": "linux", "extra": ""}  # fmt: skip
    root = Path(__file__).resolve().parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    have = set(pack.IMAGE_HAS) | {name(s) for s in pack.RUNTIME_WHEELS}
    todo = [name(s) for s in project["dependencies"] if name(s) not in pack.NOT_FOR_VERIFY]
    seen = set()
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        assert dist in have, f"{dist}: needed by agent-d verify, neither in the GPU image nor carried"
        for spec in importlib.metadata.requires(dist) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(name(spec))
    assert {"jsonschema", "rpds-py", "cffi"} <= seen


def test_the_agent_d_wheel_is_built_from_the_project_s_files_not_an_old_build(tmp_path):
    """setuptools reuses a checkout's build/: after bot/infer's move the wheel held the old
    bot/infer/contract.py beside the new contract/ package. The pack copies what git knows first."""
    import subprocess

    from gpu.pack.trees import project_files

    repo = tmp_path / "repo"
    (repo / "bot" / "infer").mkdir(parents=True)
    (repo / ".gitignore").write_text("/build/\n__pycache__/\n")
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (repo / "bot" / "infer" / "facts.py").write_text("")
    (repo / "build" / "lib" / "bot" / "infer").mkdir(parents=True)
    (repo / "build" / "lib" / "bot" / "infer" / "contract.py").write_text("# a ghost\n")
    (repo / "bot" / "__pycache__").mkdir()
    (repo / "bot" / "__pycache__" / "x.pyc").write_bytes(b"")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "pyproject.toml", ".gitignore"], check=True)
    (repo / "bot" / "new.py").write_text("")  # untracked, not ignored: a file of the working tree
    files = sorted(project_files(repo))
    assert files == [".gitignore", "bot/infer/facts.py", "bot/new.py", "pyproject.toml"]
