"""``gpu_proof.py run --stage perf`` and docs/perf.md (scripts/gpu/run/perf.py, scripts/gpu/tables/perf_md.py),
on a CPU with an interpreter that stands in for the GPU machine's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from gpu import bundle
from gpu.run import device, steps
from gpu.run.perf import perf_steps
from gpu.tables import gpu_md as table
from gpu.tables import perf_md as perf_table
from gpu_proof_support import MANIFEST, tar_xz

from bot.perf import summarise
from bot.perf.result import CUTILE, CUTILE_RS, PYTORCH, Case


def test_one_verify_with_perf_per_generated_op_each_alone(tmp_path):
    root, site, logs = tmp_path / "root", tmp_path / "site", tmp_path / "logs"
    planned = perf_steps(MANIFEST, root, site, ["silu_and_mul", "matmul"], "python3", logs)
    assert [(s.kind, s.op) for s in planned] == [("perf", "silu_and_mul")]  # matmul was not generated
    argv = planned[0].argv
    assert argv[:4] == ["python3", "-m", "bot.cli", "verify"] and "--perf" in argv and "--json" in argv
    assert argv[argv.index("--test-timeout") + 1] == "{timeout:0.3}"
    assert argv[argv.index("--perf-timeout") + 1] == "{timeout:0.65}"
    assert "--perf-configs" not in argv  # agent-d's own default
    assert [len(g) for g in device.groups(planned)] == [1]


def test_the_gate_s_share_and_the_cap_reach_verify():
    root, site, logs = Path("/r"), Path("/s"), Path("/l")
    (step,) = perf_steps(MANIFEST, root, site, ["silu_and_mul"], "python3", logs, configs=4, gate_share=0.45)
    argv = step.argv
    assert argv[argv.index("--test-timeout") + 1] == "{timeout:0.45}"
    assert argv[argv.index("--perf-timeout") + 1] == "{timeout:0.5}"
    assert argv[argv.index("--perf-configs") + 1] == "4" and argv[-1] == "--json"
    with pytest.raises(ValueError, match="--gate-share 0.95"):
        perf_steps(MANIFEST, root, site, ["silu_and_mul"], "python3", logs, gate_share=0.95)


def test_a_step_s_time_is_shared_out_by_its_placeholders():
    assert steps._with_timeout("{timeout}", 215) == "200"
    assert steps._with_timeout("{timeout:0.3}", 215) == "60"
    assert steps._with_timeout("{timeout:0.6}", 20) == "10"  # never below 10 s
    assert steps._with_timeout("--out", 215) == "--out"


def _summary() -> dict:
    cases = [
        Case(f"t.py::test_perf[{b}-{c}]", b, c, d, "passed", median_ms=ms)
        for c, d, f in (("64-torch.float16", "float16", 1.2), ("64-torch.float32", "float32", 1.0))
        for b, ms in ((CUTILE_RS, f * 0.01), (CUTILE, 0.01), (PYTORCH, 0.02))
    ]
    return summarise.summarise(cases).summary()


FAKE = r"""#!{python}
import json, sys
args = sys.argv[1:]
if args[0] == "-c":
    print(json.dumps({{"torch": "2.11", "cuda": True, "device": "NVIDIA H200 (sm_90)", "driver": "580",
                      "cffi": True, "cuda.tile": True, "pytest": True, "pytest_timeout": True, "bot": True}}))
elif args[:2] == ["-m", "pip"]:
    pass
elif args[:3] == ["-m", "bot.cli", "verify"]:
    assert "--perf" in args and args[args.index("--perf-timeout") + 1].isdigit(), args
    op = args[args.index("--kernel") + 1]
    print("[agent-d] perf: on (--perf)", file=sys.stderr)
    print(json.dumps([{{"op": op, "verdict": "ALL_PASS", "class": "", "reason": "passed", "perf": {summary}}}], indent=2))
"""


def test_a_perf_run_records_each_op_s_summary_and_renders_docs_perf_md(tmp_path):
    pay = tar_xz(tmp_path / "p.tar.xz", "payload", {"agent_d/src/x": b""})
    tool = tar_xz(tmp_path / "t.tar.xz", "toolchain", {"cuda/bin/tileiras": b"x"})
    bundle_dir = tmp_path / "gpu_bundle"
    bundle.write_bundle([("toolchain", tool), ("payload", pay)], bundle_dir,
                        {"tilegym_commit": "abc", "agent_d_commit": "1234567890", "ops": MANIFEST["ops"]})  # fmt: skip
    fake = tmp_path / "python3"
    fake.write_text(FAKE.format(python=sys.executable, summary=repr(_summary())))
    fake.chmod(0o755)
    out = tmp_path / "out"
    assert device.run(bundle_dir, out, ["silu_and_mul"], "perf", 120, str(fake), tmp_path / "state") == 0
    results = json.loads((out / "results.json").read_text())
    perf = results["ops"]["silu_and_mul"]["perf"]
    assert (
        results["stage"] == "perf"
        and perf["verdict"] == "INVESTIGATE"
        and perf["gate"]["verdict"] == "ALL_PASS"
    )
    assert perf["slowest"][0]["config"] == "64-torch.float16" and perf["exit"] == 0
    assert "perf silu_and_mul: INVESTIGATE cutile-rs/cuTile 1.0954" in (out / "summary.txt").read_text()
    doc = tmp_path / "perf.md"
    assert perf_table.perf_table([out / "results.json"], doc) == "silu_and_mul"
    text = doc.read_text()
    assert "| silu_and_mul | INVESTIGATE | `float16` | 1 | 1.200 | 0.600 |" in text
    assert "| silu_and_mul | INVESTIGATE | all | 2 | **1.095** | 0.548 |" in text
    assert "agent-d `1234567`" in text and "- TileGym commit: `abc`" in text
    assert "  - slowest: `64-torch.float16` 1.200" in text
    # merged after a correctness run of the same bundle: the tests stay that run's, the perf this one's
    earlier = {**results, "stage": "all", "time_utc": "2026-01-01T00:00:00Z", "ops": {
        "silu_and_mul": {"pack": MANIFEST["ops"]["silu_and_mul"]["pack"], "agent_d": {"passed": 3, "finished_utc": "T0"}}}}  # fmt: skip
    merged = table.merge([earlier, results])["ops"]["silu_and_mul"]
    assert merged["tests_from"]["stage"] == "all" and merged["perf_from"]["stage"] == "perf"


def test_no_perf_entry_no_docs_perf_md(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps({"tilegym_commit": "abc", "ops": {"silu_and_mul": {"pack": {"status": "generated"}}}})
    )
    assert perf_table.perf_table([path], tmp_path / "perf.md") == ""
    assert not (tmp_path / "perf.md").exists()
