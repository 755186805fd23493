"""CPU-side tests of scripts/gpu_proof.py: parts and reassembly, unpack, the run plan, log parsing, the table."""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import types
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

from gpu import bundle, device, table  # noqa: E402
from gpu.bundle import MiB  # noqa: E402


def _random_file(path: Path, size: int, seed: int = 1) -> Path:
    import random

    rnd = random.Random(seed)
    path.write_bytes(rnd.randbytes(size))
    return path


def _tar_xz(path: Path, top: str, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:xz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_parts_at_most_60_mib_and_reassemble_identically(tmp_path):
    big = _random_file(tmp_path / "toolchain.tar.xz", 2 * bundle.PART_LIMIT + 12345)
    small = _random_file(tmp_path / "payload.tar.xz", 3 * MiB, seed=2)
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


def test_reassemble_rejects_a_corrupted_part(tmp_path):
    arch = _random_file(tmp_path / "a.tar.xz", 5000)
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
    tool = _tar_xz(tmp_path / "t.tar.xz", "toolchain", {"cuda/bin/tileiras": os.urandom(300_000)})
    pay = _tar_xz(tmp_path / "p.tar.xz", "payload", {"pack.json": b"{}", "wheels/x.whl": b"w"})
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


MANIFEST = {
    "tilegym_commit": "75a14307776188ff0baf451cd9b9fc9fa3a87233",
    "ops": {
        "silu_and_mul": {
            "pytest_args": [
                "tests/ops/test_silu_and_mul.py",
                "-k",
                "(cutile_rs or cutile-rs) and (test_op)",
                "--tb=short",
                "-v",
                "-x",
                "--timeout=60",
            ],
            "pack": {"status": "generated", "reason": ""},
        },
        "matmul": {
            "pytest_args": [
                "tests/ops/test_matmul.py",
                "-k",
                "(cutile_rs or cutile-rs) and (test_op)",
                "--tb=short",
                "-v",
                "-x",
                "--timeout=60",
            ],
            "pack": {
                "status": "blocked",
                "reason": "no host pattern",
                "port_verdict": "BLOCKED",
                "port_class": "host",
            },
        },
    },
}


def test_run_plan_same_pytest_for_both_trees_and_verify_for_agent_d(tmp_path):
    root, site, logs = tmp_path / "root", tmp_path / "site", tmp_path / "logs"
    steps = device.plan(MANIFEST, root, site, ["silu_and_mul", "matmul"], "python3", logs)
    kinds = [(s.kind, s.op, s.tree) for s in steps]
    assert kinds == [
        ("pytest", "silu_and_mul", "hand_written"),
        ("verify", "silu_and_mul", "agent_d"),
        ("bench", "silu_and_mul", "both"),
        ("pytest", "matmul", "hand_written"),  # blocked at pack time: no agent-d run, baseline only, last
    ]
    assert steps[0].weight == steps[1].weight > steps[-1].weight
    # an op's two correctness runs go side by side; each benchmark runs alone
    assert [[(s.kind, s.tree) for s in g] for g in device.groups(steps)] == [
        [("pytest", "hand_written"), ("verify", "agent_d")],
        [("bench", "both")],
        [("pytest", "hand_written")],
    ]
    hw = steps[0]
    assert hw.argv == ["python3", "-m", "pytest", *MANIFEST["ops"]["silu_and_mul"]["pytest_args"]]
    assert hw.cwd == str(root / "payload" / "hand_written")
    assert hw.env["PYTHONPATH"].split(os.pathsep)[0] == str(root / "payload" / "hand_written" / "src")
    for flag in ("-x", "--timeout=60", "--tb=short", "-v"):
        assert flag in hw.argv
    assert "--no-header" not in hw.argv
    verify = steps[1]
    b = root / "payload" / "agent_d"
    assert verify.argv[:5] == ["python3", "-m", "bot.cli", "verify", "--repo"]
    assert verify.argv[verify.argv.index("--kernel") + 1] == "silu_and_mul"
    assert verify.argv[verify.argv.index("--out") + 1] == str(b / "cutile_kernel_out")
    assert verify.argv[verify.argv.index("--python") + 1] == "python3"
    assert verify.env["AGENT_D_READER"] == str(root / "payload" / "reader" / "kernel-reader")
    assert verify.cwd == str(b)
    bench = steps[2]
    assert bench.argv[bench.argv.index("--hand-written") + 1] == str(root / "payload" / "hand_written")
    assert bench.argv[bench.argv.index("--agent-d") + 1] == str(root / "payload" / "agent_d")
    assert bench.argv[bench.argv.index("--ops") + 1 : bench.argv.index("--cross")] == ["silu_and_mul"]
    env = device.cuda_env(root)
    home = root / "toolchain" / "cuda"
    assert env["CUDA_HOME"] == str(home)
    assert env["PATH"].startswith(str(home / "bin"))
    assert env["LD_LIBRARY_PATH"].startswith(str(home / "lib"))
    assert env["CUTILE_RS_AUTOBUILD"] == "0"


def test_crossed_benchmarks_only_for_generated_ops(tmp_path):
    root, site, logs = tmp_path / "root", tmp_path / "site", tmp_path / "logs"
    steps = device.plan(
        MANIFEST, root, site, ["silu_and_mul", "matmul"], "python3", logs, cross=["silu_and_mul", "matmul"]
    )
    (bench,) = [s for s in steps if s.kind == "bench"]
    assert bench.argv[bench.argv.index("--cross") + 1 : bench.argv.index("--json")] == [
        "silu_and_mul"
    ]  # matmul: not generated


PYTEST_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.5, pluggy-1.5.0 -- /usr/bin/python3
rootdir: /tmp/agent-d-gpu/root/payload/agent_d
plugins: timeout-2.3.1
collected 120 items / 100 deselected / 20 selected

tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-512-dtype0] PASSED [  5%]
tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-1024-dtype1] SKIPPED [ 10%]
tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-2048-dtype2] FAILED [ 15%]

=================================== FAILURES ===================================
E   AssertionError: Tensor-likes are not close!
=========================== short test summary info ============================
FAILED tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-2048-dtype2] - AssertionError: Tensor-likes are not close!
!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!
============ 1 failed, 1 passed, 1 skipped, 100 deselected in 12.34s ============
"""


def test_parse_pytest_counts_and_first_failure():
    r = device.parse_pytest(PYTEST_LOG)
    assert (r["passed"], r["failed"], r["skipped"]) == (1, 1, 1)
    assert r["first_failure"].startswith("FAILED tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[")
    assert "Tensor-likes are not close" in r["first_failure"]
    assert r["header"]
    assert len(r["outcomes"]) == 3


def test_failures_marked_against_the_hand_written_run():
    agent = device.parse_pytest(PYTEST_LOG)
    hand = device.parse_pytest(PYTEST_LOG)
    rows = device.compare(agent, hand)
    assert [r["mark"] for r in rows] == ["also fails with hand-written code"]
    passing = device.parse_pytest(PYTEST_LOG.replace("dtype2] FAILED", "dtype2] PASSED"))
    assert device.compare(agent, passing)[0]["mark"] == "passes with hand-written code"


def test_parse_verify_reads_the_json_summary():
    text = (
        "[agent-d] test ok 3.1s exit=0: 20 passed, 0 failed, 0 skipped\n<VALIDATOR_OUTPUT>\n</VALIDATOR_OUTPUT>\n"
        "VERDICT: ALL_PASS\n[agent-d] silu_and_mul: ALL_PASS: all selected tests passed\n"
        '[\n  {\n    "op": "silu_and_mul",\n    "verdict": "ALL_PASS",\n    "class": "",\n'
        '    "reason": "all selected tests passed"\n  }\n]\n'
    )
    v = device.parse_verify(text)
    assert v["verdict"] == "ALL_PASS" and v["reason"] == "all selected tests passed"
    assert v["line"].startswith("[agent-d] silu_and_mul: ALL_PASS")


RESULTS = {
    "date": "2026-12-02",
    "time_utc": "2026-12-02T12:00:00Z",
    "packed": "2026-12-02T11:30:00Z",
    "tilegym_commit": "75a14307776188ff0baf451cd9b9fc9fa3a87233",
    "agent_d_commit": "c5ecff6",
    "device": "NVIDIA H200 (sm_90)",
    "driver": "580.159.04",
    "torch": "2.11.0+cu130",
    "ops": {
        "silu_and_mul": {
            "pack": {"status": "generated", "reason": ""},
            "hand_written": {
                "passed": 33,
                "failed": 1,
                "skipped": 0,
                "exit": 1,
                "timed_out": False,
                "first_failure": "FAILED tests/ops/test_silu_and_mul.py::T::test_op[x] - boom",
            },
            "agent_d": {
                "passed": 33,
                "failed": 1,
                "skipped": 0,
                "exit": 1,
                "timed_out": False,
                "first_failure": "FAILED tests/ops/test_silu_and_mul.py::T::test_op[x] - boom",
                "verdict": {"verdict": "FAIL", "class": "kernel", "reason": "1 test failed"},
                "compared": [
                    {
                        "test": "tests/ops/test_silu_and_mul.py::T::test_op[x]",
                        "outcome": "FAILED",
                        "hand_written": "FAILED",
                        "mark": "also fails with hand-written code",
                    }
                ],
            },
            "host_time": {
                "agent_d": {"us_per_call": 24.0},
                "hand_written": {"us_per_call": 20.0},
                "ratio": 1.2,
            },
        },
        "bmm": {
            "pack": {
                "status": "blocked",
                "reason": "bmm: no host pattern for this kernel yet",
                "port_verdict": "BLOCKED",
                "port_class": "host",
            },
            "hand_written": {
                "passed": 10,
                "failed": 0,
                "skipped": 2,
                "exit": 0,
                "timed_out": False,
                "first_failure": "",
            },
        },
    },
}


def test_table_renders_both_columns_verdict_ratio_and_marks(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    text = table.table([results], tmp_path / "docs" / "gpu.md")
    assert (tmp_path / "docs" / "gpu.md").read_text() == text
    notes = "\n## What these runs show\n\nWritten by hand.\n"
    (tmp_path / "docs" / "gpu.md").write_text(text + notes)
    assert table.table([results], tmp_path / "docs" / "gpu.md") == text + notes  # tables redone, notes kept
    assert "TileGym commit: `75a14307776188ff0baf451cd9b9fc9fa3a87233`" in text
    assert "Device: NVIDIA H200 (sm_90)" in text and "2026-12-02" in text
    silu = text.split("## silu_and_mul")[1].split("## bmm")[0]
    assert "| Tests passed / failed / skipped | 33 / 1 / 0 | 33 / 1 / 0 |" in silu
    assert "`VERDICT: FAIL` (kernel: 1 test failed)" in silu
    assert "| Host time ratio agent-d / hand-written | 1.20 | |" in silu
    assert "also fails with hand-written code" in silu
    bmm = text.split("## bmm")[1]
    assert "not generated (BLOCKED host: bmm: no host pattern for this kernel yet)" in bmm
    assert "10 / 0 / 2" in bmm


def test_summary_text_says_when_nothing_was_tested():
    results = dict(RESULTS, blocked="no CUDA GPU: torch sees no CUDA device", device="")
    assert "BLOCKED: no CUDA GPU" in device.summary_text(results)


def test_run_without_gpu_says_so_and_writes_results(tmp_path):
    pay = _tar_xz(tmp_path / "p.tar.xz", "payload", {"pack.json": b"{}"})
    tool = _tar_xz(tmp_path / "t.tar.xz", "toolchain", {"cuda/bin/tileiras": b"x"})
    bundle_dir = tmp_path / "gpu_bundle"
    bundle.write_bundle([("toolchain", tool), ("payload", pay)], bundle_dir,
                        {"tilegym_commit": "abc", "ops": MANIFEST["ops"]})  # fmt: skip
    out = tmp_path / "out"
    # an interpreter without torch (or without a GPU): BLOCKED env, nothing tested, results still written
    fake = tmp_path / "python-no-gpu"
    fake.write_text('#!/bin/sh\necho \'{"error": "torch: No module named torch"}\'\n')
    fake.chmod(0o755)
    code = device.run(bundle_dir, out, None, "all", 60, str(fake), tmp_path / "state")
    assert code == 3
    results = json.loads((out / "results.json").read_text())
    assert results["blocked"].startswith("no CUDA GPU")
    assert set(results["ops"]) == {"silu_and_mul", "matmul"}
    assert "BLOCKED: no CUDA GPU" in (out / "summary.txt").read_text()
    assert (out / "logs.tar.gz").is_file()


PORT_STDOUT = """\
[agent-d] port silu_and_mul: src/tilegym/ops/cutile_rs/silu_and_mul_kernel/kernel.rs -> /x
[agent-d] launch plan        ok        0.00s  7 C parameters, 0 missing
[agent-d] generate           ok        0.12s  7 files
[agent-d] apply              ok        0.00s  5 changed, 2 unchanged
[agent-d] build              ok        5.30s  cargo build --release (5s); cutile_silu_and_mul exported
[agent-d] abi smoke          ok        0.14s  cutile_silu_and_mul(NULL descriptors) returned -5
[agent-d] test               ok        0.36s  exit=4: 0 passed, 0 failed, 0 skipped
VERDICT: BLOCKED
[
  {
    "op": "silu_and_mul",
    "verdict": "BLOCKED",
    "class": "env",
    "reason": "no CUDA GPU on this machine"
  }
]
"""


def test_port_outcome_generated_vs_blocked():
    from gpu.pack import port_outcome

    ok = port_outcome(PORT_STDOUT, 3)
    assert ok["status"] == "generated" and ok["stages"]["abi smoke"] == "ok"
    assert "no GPU" in ok["note"]
    blocked_out = ("[agent-d] launch plan        FAILED    0.00s  BLOCKED host: no host pattern\n"
                   '[\n  {\n    "op": "bmm",\n    "verdict": "BLOCKED",\n    "class": "host",\n'
                   '    "reason": "bmm: no host pattern"\n  }\n]\n')  # fmt: skip
    blocked = port_outcome(blocked_out, 3)
    assert blocked["status"] == "blocked" and blocked["reason"] == "bmm: no host pattern"


def test_strip_op_removes_host_files_and_wiring(tmp_path):
    from gpu.pack import CUTILE_RS, _fix_empty_guard, strip_op

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
    _fix_empty_guard(tmp_path)
    assert not (ops / "silu_and_mul_kernel" / "ffi.rs").exists() and not (ops / "silu_and_mul.py").exists()
    assert (ops / "silu_and_mul_kernel" / "kernel.rs").exists()
    init = (ops / "__init__.py").read_text()
    assert "import silu_and_mul" not in init
    compile(init, "__init__.py", "exec")  # the emptied guard still parses
    assert "mod silu_and_mul" not in (ops / "cutile_kernels" / "src" / "lib.rs").read_text()
    assert "cutile-rs" not in (tmp_path / "tests" / "ops" / "test_silu_and_mul.py").read_text()
    assert strip_op(tmp_path, "silu_and_mul", strict=False) == []  # nothing left: lenient mode is a no-op


FAKE_PYTHON = r'''#!{python}
"""Stands in for the GPU machine's python3: probe, pip, pytest, agent-d verify and the benchmark."""
import json, sys
from pathlib import Path

args = sys.argv[1:]
log = {pytest_log!r}
if args[0] == "-c":
    print(json.dumps({{"torch": "2.11", "cuda": True, "device": "NVIDIA H200 (sm_90)", "driver": "580",
                      "cffi": True, "cuda.tile": True, "pytest": True, "pytest_timeout": True, "bot": True}}))
elif args[:2] == ["-m", "pip"]:
    pass
elif args[:2] == ["-m", "pytest"]:
    print(log)
    sys.exit(1)
elif args[:3] == ["-m", "bot.cli", "verify"]:
    op = args[args.index("--kernel") + 1]
    out = Path(args[args.index("--out") + 1]) / op
    out.mkdir(parents=True, exist_ok=True)
    (out / "correctness_cutile_rs.txt").write_text(log)
    print("$ python3 -m pytest tests/ops/test_x.py -k sel --tb=short -v -x --timeout=60\nexit=1\n")
    print("VERDICT: FAIL")
    print(json.dumps([{{"op": op, "verdict": "FAIL", "class": "kernel", "reason": "1 failed"}}], indent=2))
    sys.exit(1)
elif args[0].endswith("bench.py"):
    ops = args[args.index("--ops") + 1 : args.index("--cross")]
    one = {{"hand_written": {{"us_per_call": 20.0}}, "agent_d": {{"us_per_call": 30.0}}, "ratio": 1.4}}
    Path(args[args.index("--json") + 1]).write_text(json.dumps({{op: one for op in ops}}))
'''


def test_run_end_to_end_with_a_fake_gpu_interpreter(tmp_path):
    pay = _tar_xz(tmp_path / "p.tar.xz", "payload", {"hand_written/src/x": b"", "agent_d/src/x": b""})
    tool = _tar_xz(tmp_path / "t.tar.xz", "toolchain", {"cuda/bin/tileiras": b"x"})
    bundle_dir = tmp_path / "gpu_bundle"
    bundle.write_bundle([("toolchain", tool), ("payload", pay)], bundle_dir,
                        {"tilegym_commit": "abc", "ops": MANIFEST["ops"]})  # fmt: skip
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable, pytest_log=PYTEST_LOG))
    fake.chmod(0o755)
    out = tmp_path / "out"
    assert device.run(bundle_dir, out, None, "all", 120, str(fake), tmp_path / "state") == 0
    results = json.loads((out / "results.json").read_text())
    assert results["device"] == "NVIDIA H200 (sm_90)" and results["tilegym_commit"] == "abc"
    silu = results["ops"]["silu_and_mul"]
    assert (
        silu["hand_written"]["passed"],
        silu["hand_written"]["failed"],
        silu["hand_written"]["skipped"],
    ) == (1, 1, 1)
    assert (
        silu["agent_d"]["exit"] == 1 and silu["agent_d"]["verify_exit"] == 1
    )  # pytest's exit, verify's exit
    assert silu["agent_d"]["verdict"]["verdict"] == "FAIL"
    assert silu["agent_d"]["compared"][0]["mark"] == "also fails with hand-written code"
    assert silu["host_time"]["ratio"] == 1.4  # the bench's median of per-round ratios, not 30/20
    matmul = results["ops"]["matmul"]
    assert "agent_d" not in matmul and matmul["hand_written"]["failed"] == 1
    with tarfile.open(out / "logs.tar.gz") as tf:
        names = tf.getnames()
    assert "logs/silu_and_mul.agent_d.verify.txt" in names and "logs/matmul.hand_written.txt" in names
    text = table.render(results)
    assert "| Host time ratio agent-d / hand-written | 1.40 | |" in text
    assert "not generated (BLOCKED host: no host pattern)" in text
    # a later bench-only run of the same bundle keeps the tests and replaces the host time
    assert (
        device.run(
            bundle_dir, tmp_path / "out2", ["silu_and_mul"], "bench", 120, str(fake), tmp_path / "state"
        )
        == 0
    )
    again = json.loads((tmp_path / "out2" / "results.json").read_text())
    assert again["stage"] == "bench" and again["ops"]["silu_and_mul"]["hand_written"]["failed"] == 1
    assert again["ops"]["silu_and_mul"]["host_time"]["ratio"] == 1.4


def test_bench_pins_autotuned_wrappers_to_their_first_config():
    import types

    from scripts.gpu import bench

    module = types.SimpleNamespace(autotune_launch=lambda **kw: None)
    assert bench.pin_first_config(module)
    seen = []
    out = module.autotune_launch(
        kernel_fn=lambda cfg: seen.append(cfg) or "y", configs=["c1", "c2"], key=(1,)
    )
    assert out.output == "y" and seen == ["c1"]
    assert not bench.pin_first_config(types.SimpleNamespace())


def test_table_merges_later_runs_and_says_where_each_figure_comes_from(tmp_path):
    tested = dict(RESULTS, bundle="b1", time_utc="T1", stage="all", agent_d_commit="1111111aaa")
    timed = {
        "bundle": "b2",
        "time_utc": "T2",
        "stage": "bench",
        "agent_d_commit": "2222222bbb",
        "tilegym_commit": RESULTS["tilegym_commit"],
        "ops": {
            "silu_and_mul": {
                "host_time": {
                    "hand_written": {"us_per_call": 50.0},
                    "agent_d": {"us_per_call": 45.0},
                    "ratio": 0.91,
                }
            }
        },
    }
    paths = []
    for i, r in enumerate((tested, timed)):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(r))
    text = table.table(paths, tmp_path / "gpu.md")
    silu = text.split("## silu_and_mul")[1].split("## bmm")[0]
    assert "| Tests passed / failed / skipped | 33 / 1 / 0 | 33 / 1 / 0 |" in silu  # from the first run
    assert "| Host time ratio agent-d / hand-written | 0.91 | |" in silu  # from the second
    assert "| Tests run in | T1, agent-d `1111111` | the same run |" in silu
    assert "| Host time measured in | T2, agent-d `2222222` | the same process |" in silu
    assert "T2 (bench: silu_and_mul; agent-d `2222222`)" in text
    timed["tilegym_commit"] = "other"
    paths[1].write_text(json.dumps(timed))
    with pytest.raises(ValueError, match="different TileGym commits"):
        table.table(paths, tmp_path / "gpu.md")


def test_bench_rotates_the_order_and_reports_the_median_round_ratio():
    from scripts.gpu import bench

    order = []
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    calls = {"hand_written": lambda: order.append("h"), "agent_d": lambda: order.append("a")}
    samples = bench.measure(calls, fake_torch, 1, 4)
    assert order == ["h", "a", "a", "h", "h", "a", "a", "h"]  # who goes first alternates
    assert {k: len(v) for k, v in samples.items()} == {"hand_written": 4, "agent_d": 4}
    summary = bench.summarise({"hand_written": [10.0, 20.0, 10.0], "agent_d": [11.0, 40.0, 12.0]}, 100)
    assert summary["round_ratios"] == [1.1, 2.0, 1.2]
    assert summary["ratio"] == 1.2  # the median round, not 12/10 of the medians or the noisy round
    assert summary["agent_d"]["us_per_call"] == 12.0


_LIBC = next(
    p
    for p in (
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib/libc.so.6",
    )
    if os.path.exists(p)
)


def test_bench_loads_each_wrapper_over_the_library_it_is_told(tmp_path, monkeypatch):
    from scripts.gpu import bench

    runtime = tmp_path / "a" / "src" / "tilegym"
    (runtime / "backend" / "cutile_rs").mkdir(parents=True)
    for pkg in (runtime, runtime / "backend", runtime / "backend" / "cutile_rs"):
        (pkg / "__init__.py").write_text("")
    (runtime / "backend" / "cutile_rs" / "utils.py").write_text(
        '_TENSORDESC_CDEF = "typedef struct { int x; } TensorDesc;\\n"\n'
        "def bind_kernel_function_cffi(kernel, cdef):\n    raise AssertionError('the default binding must not be used')\n"
    )
    for tree in ("a", "b"):
        wrapper = tmp_path / tree / "src" / "tilegym" / "ops" / "cutile_rs" / "absval.py"
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        wrapper.write_text(
            "from tilegym.backend.cutile_rs.utils import bind_kernel_function_cffi\n"
            f"TREE = {tree!r}\n"
            "def autotune_launch(**kw):\n    raise AssertionError('not pinned')\n"
            "def absval(x):\n    ffi, lib = bind_kernel_function_cffi('absval', 'int abs(int);')\n    return lib.abs(x)\n"
        )
        so = tmp_path / tree / bench.SO_REL
        so.parent.mkdir(parents=True, exist_ok=True)
        so.symlink_to(_LIBC)  # any real library with a C symbol will do
    monkeypatch.syspath_prepend(str(tmp_path / "a" / "src"))
    for name in [m for m in sys.modules if m == "tilegym" or m.startswith("tilegym.")]:
        monkeypatch.delitem(sys.modules, name)
    module_b, pinned, wrapper, so_path = bench.load_wrapper(
        "absval", tmp_path / "b", tmp_path / "a", "agent_d_py+hand_written_so"
    )
    assert module_b.TREE == "b" and pinned and wrapper.endswith("b/src/tilegym/ops/cutile_rs/absval.py")
    assert so_path == str(tmp_path / "a" / bench.SO_REL)
    assert module_b.absval(-7) == 7  # through cffi over the library it was told to open
    module_a = bench.load_wrapper("absval", tmp_path / "a", tmp_path / "a", "hand_written")[0]
    assert module_a.TREE == "a" and module_a is not module_b
    assert module_a.autotune_launch(kernel_fn=lambda cfg: cfg, configs=[3, 4]).output == 3
    for name in [m for m in sys.modules if m == "tilegym" or m.startswith("tilegym.")]:
        del sys.modules[name]  # the fake runtime must not outlive this test
