"""`--json` prints exactly one JSON document on stdout, of the shape its schema in docs/ describes;
progress and the validator block go to stderr (and nowhere with --quiet).

Each command runs as its own process on the demo checkout (from the real wheel). The runs stop
before cargo (a kernel.rs that does not parse, a verify with nothing built), so no build is paid.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.demo import assemble_checkout

ROOT = Path(__file__).resolve().parent.parent
OP = "silu_and_mul"
KERNEL = f"src/tilegym/ops/cutile_rs/{OP}_kernel/kernel.rs"


def agent_d(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("CUTILE_KERNEL_OUT_ROOT", None)
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def one_document(stdout: str, schema_name: str):
    """stdout parsed as a whole (one document, nothing before or after it) and checked by its schema."""
    from jsonschema import Draft202012Validator

    data = json.loads(stdout)
    schema = json.loads((ROOT / "docs" / schema_name).read_text())
    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    return data


@pytest.fixture()
def demo(tmp_path, tilegym_wheel) -> Path:
    return assemble_checkout(tmp_path / "tg", tilegym_wheel, [OP], [OP]).repo


def break_kernel(repo: Path) -> None:
    kernel = repo / KERNEL
    kernel.write_text(
        kernel.read_text().replace(f"pub unsafe fn {OP}_kernel<", f"pub unsafe fn {OP}_kernel<<", 1)
    )


def test_port_json_is_one_document_and_progress_goes_to_stderr(demo):
    break_kernel(demo)  # FAIL kernel at the signature stage: no cargo build
    proc = agent_d("port", "--repo", str(demo), "--kernel", OP, "--json")
    assert proc.returncode == 1, proc.stderr
    [kernel] = one_document(proc.stdout, "port-json.schema.json")
    assert (kernel["op"], kernel["verdict"], kernel["class"]) == (OP, "FAIL", "kernel")
    assert "kernel.rs does not parse" in kernel["reason"]
    assert [s["name"] for s in kernel["stages"]][-1] == "kernel signature"
    assert kernel["stages"][-1]["status"] == "failed" and kernel["tests"] is None
    assert Path(kernel["out_dir"]) == demo / "cutile_kernel_out" / OP
    assert "[agent-d] kernel signature" in proc.stderr and "<VALIDATOR_OUTPUT>" in proc.stderr
    assert "VERDICT: FAIL" in proc.stderr


def test_verify_json_quiet_prints_the_document_alone(demo):
    proc = agent_d("verify", "--repo", str(demo), "--kernel", OP, "--json", "--quiet")
    assert proc.returncode == 3, proc.stderr  # BLOCKED host: nothing was built to verify
    [kernel] = one_document(proc.stdout, "port-json.schema.json")
    assert (kernel["verdict"], kernel["class"]) == ("BLOCKED", "host")
    assert "verify needs a built library" in kernel["reason"]
    assert proc.stderr == ""


def test_a_stage_that_could_not_run_says_blocked_not_failed(demo):
    proc = agent_d("verify", "--repo", str(demo), "--kernel", OP, "--json")
    [kernel] = json.loads(proc.stdout)
    assert kernel["stages"][-1]["name"] == "built library" and kernel["stages"][-1]["status"] == "blocked"
    assert re.search(r"^\[agent-d\] built library +BLOCKED +\d", proc.stderr, re.M), proc.stderr
    assert " FAILED " not in proc.stderr


def test_plan_json_is_one_document_even_when_a_kernel_stops(demo):
    proc = agent_d("plan", "--repo", str(demo), "--json")
    assert proc.returncode == 0, proc.stderr
    [entry] = one_document(proc.stdout, "plan-json.schema.json")
    assert (entry["op"], entry["status"], entry["stop"]) == (OP, "planned", None)
    assert entry["plan"]["ffi"]["symbol"] == f"cutile_{OP}" and entry["plan"]["missing"] == []

    break_kernel(demo)
    proc = agent_d("plan", "--repo", str(demo), "--kernel", OP, "--json")
    assert proc.returncode == 1, proc.stderr
    [entry] = one_document(proc.stdout, "plan-json.schema.json")
    assert (entry["status"], entry["plan"]) == ("stopped", None)
    assert (entry["stop"]["kind"], entry["stop"]["class"]) == ("FAIL", "kernel")


def test_the_schemas_reject_what_they_should():
    """The schemas are not vacuous: a document that breaks the promises fails them."""
    from jsonschema import Draft202012Validator

    port = json.loads((ROOT / "docs" / "port-json.schema.json").read_text())
    good = {"op": OP, "verdict": "FAIL", "class": "kernel", "reason": "r", "fix": "f", "out_dir": "/o", "changed": [],
            "stages": [{"name": "discover", "status": "ok", "seconds": 0.1, "detail": ""}], "tests": None,
            "perf": None}  # fmt: skip
    assert Draft202012Validator(port).is_valid([good])
    for bad in (
        {**good, "class": "env"},
        {**good, "verdict": "PASS"},
        {**good, "extra": 1},
        {**good, "tests": {}},
        {**good, "perf": {"verdict": "FAIL"}},
    ):
        assert not Draft202012Validator(port).is_valid([bad]), bad
    plan = json.loads((ROOT / "docs" / "plan-json.schema.json").read_text())
    stopped = {
        "op": OP,
        "status": "stopped",
        "stop": {"kind": "FAIL", "class": "kernel", "reason": "r"},
        "plan": None,
    }
    assert Draft202012Validator(plan).is_valid([stopped])
    assert not Draft202012Validator(plan).is_valid([{**stopped, "stop": None}])
