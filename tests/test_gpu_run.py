"""CPU-side tests of the run side of scripts/gpu_proof.py: the plan, log parsing, runs with a fake GPU interpreter."""

from __future__ import annotations

import json
import os
import sys
import tarfile

from gpu import bundle
from gpu.run import device, steps
from gpu.tables import gpu_md as table
from gpu_proof_support import MANIFEST, PYTEST_LOG, RESULTS, tar_xz


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
    assert "--no-perf" in verify.argv  # correctness only: the perf stage is `--stage perf`
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


def test_parse_pytest_counts_and_first_failure():
    r = steps.parse_pytest(PYTEST_LOG)
    assert (r["passed"], r["failed"], r["skipped"]) == (1, 1, 1)
    assert r["first_failure"].startswith("FAILED tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[")
    assert "Tensor-likes are not close" in r["first_failure"]
    assert r["header"]
    assert len(r["outcomes"]) == 3


def test_failures_marked_against_the_hand_written_run():
    agent = steps.parse_pytest(PYTEST_LOG)
    hand = steps.parse_pytest(PYTEST_LOG)
    rows = device.compare(agent, hand)
    assert [r["mark"] for r in rows] == ["also fails with hand-written code"]
    passing = steps.parse_pytest(PYTEST_LOG.replace("dtype2] FAILED", "dtype2] PASSED"))
    assert device.compare(agent, passing)[0]["mark"] == "passes with hand-written code"


def test_parse_verify_reads_the_json_summary():
    text = (
        "[agent-d] test ok 3.1s exit=0: 20 passed, 0 failed, 0 skipped\n<VALIDATOR_OUTPUT>\n</VALIDATOR_OUTPUT>\n"
        "VERDICT: ALL_PASS\n[agent-d] silu_and_mul: ALL_PASS: all selected tests passed\n"
        '[\n  {\n    "op": "silu_and_mul",\n    "verdict": "ALL_PASS",\n    "class": "",\n'
        '    "reason": "all selected tests passed"\n  }\n]\n'
    )
    v = steps.parse_verify(text)
    assert v["verdict"] == "ALL_PASS" and v["reason"] == "all selected tests passed"
    assert v["line"].startswith("[agent-d] silu_and_mul: ALL_PASS")


def test_summary_text_says_when_nothing_was_tested():
    results = dict(RESULTS, blocked="no CUDA GPU: torch sees no CUDA device", device="")
    assert "BLOCKED: no CUDA GPU" in device.summary_text(results)


def test_run_without_gpu_says_so_and_writes_results(tmp_path):
    pay = tar_xz(tmp_path / "p.tar.xz", "payload", {"pack.json": b"{}"})
    tool = tar_xz(tmp_path / "t.tar.xz", "toolchain", {"cuda/bin/tileiras": b"x"})
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
    pay = tar_xz(tmp_path / "p.tar.xz", "payload", {"hand_written/src/x": b"", "agent_d/src/x": b""})
    tool = tar_xz(tmp_path / "t.tar.xz", "toolchain", {"cuda/bin/tileiras": b"x"})
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
    # ...and each figure keeps the time it was measured, so the table credits the right call
    tested_at = silu["hand_written"]["finished_utc"]
    assert again["ops"]["silu_and_mul"]["hand_written"]["finished_utc"] == tested_at
    merged = table.merge([results, again])["ops"]["silu_and_mul"]
    assert merged["tests_from"]["stage"] == "all" and merged["tests_from"]["time_utc"] == tested_at
    assert merged["host_time_from"]["stage"] == "bench"
    assert merged["host_time_from"]["time_utc"] == again["ops"]["silu_and_mul"]["host_time"]["finished_utc"]


def _with_new_op() -> dict:
    """MANIFEST plus an op TileGym has no cutile-rs port of: its tree-A run is the cuTile baseline."""
    manifest = {**MANIFEST, "ops": dict(MANIFEST["ops"])}
    manifest["ops"]["dropout"] = {
        "new": True,
        "contract_lines": 0,
        "pytest_args": [
            "tests/ops/test_dropout.py",
            "-k",
            "(cutile and not cutile_rs and not cutile-rs) and (test_op)",
            "--tb=short",
            "-v",
            "-x",
            "--timeout=60",
        ],
        "pack": {"status": "generated", "reason": ""},
    }
    return manifest


def test_a_new_op_runs_its_baseline_and_verify_side_by_side_and_is_not_benchmarked(tmp_path):
    root, site, logs = tmp_path / "root", tmp_path / "site", tmp_path / "logs"
    manifest = _with_new_op()
    steps = device.plan(manifest, root, site, ["silu_and_mul", "dropout"], "python3", logs)
    assert [(s.kind, s.op) for s in steps] == [
        ("pytest", "silu_and_mul"),
        ("verify", "silu_and_mul"),
        ("pytest", "dropout"),
        ("verify", "dropout"),
        ("bench", "silu_and_mul"),  # no hand-written wrapper of dropout to time against
    ]
    baseline = steps[2]
    assert baseline.argv[3:] == manifest["ops"]["dropout"]["pytest_args"]
    assert baseline.argv[baseline.argv.index("-k") + 1].startswith(
        "(cutile and not cutile_rs and not cutile-rs)"
    )


def test_a_new_ops_failures_are_marked_against_the_cutile_baseline():
    ours = {"outcomes": {"tests/ops/test_dropout.py::T::test_op[0.5-cutile_rs]": "FAILED"}}
    base = {"outcomes": {"tests/ops/test_dropout.py::T::test_op[0.5-cutile]": "PASSED"}}
    (row,) = device.compare(ours, base)
    assert (row["hand_written"], row["mark"]) == ("PASSED", "passes with hand-written code")
    assert device.compare(ours, {"outcomes": {}})[0]["mark"] == "not reached in the hand-written run"
    (row,) = device.compare(ours, base, device.CUTILE_BASELINE)
    assert row["mark"] == "passes on the cuTile backend"
    assert (
        device.compare(ours, {}, device.CUTILE_BASELINE)[0]["mark"]
        == "not reached in the cuTile baseline run"
    )
