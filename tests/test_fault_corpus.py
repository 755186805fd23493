"""The fault corpus (tests/fixtures/faults, scripts/gpu/faults.py) on this CPU machine.

What can be classified without a GPU is classified here, by agent-d itself on checkouts of the
tilegym 1.5.1 wheel: a kernel that does not compile (a real cargo build), and the environment
faults on a machine arranged around a real interpreter (tests/env_support.py: a stand-in driver
reporting a device, a torch of our making), through the same ``run --stage faults`` code the GPU
machine runs. For the faults only a GPU shows, the CPU part is checked: each change applies to the
wheel's checkout, generation goes through, and a contract's wrong launch is found, with the fix
line agent-d will print. And the classifier is run again on the pytest logs the H200 recorded for
each case (``<case>/h200/``: agent-d verify at f057799, 2026-12-03).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from env_support import interpreter, with_tileiras
from gpu import faults
from gpu.run.faults import run_faults
from gpu.tables import gpu_md as table
from validator_support import needs_cc

from bot.classify.classify import classify
from bot.cli import main
from bot.demo import assemble_checkout
from bot.emit.stage_generate import contract_differences
from bot.pipeline import generate_only, make_plan
from bot.read.reader import read_kernel
from bot.targets.discover import discover
from bot.targets.types import Target
from bot.testing.types import TestResult
from bot.testresults.combine import to_test_result

ROOT = Path(__file__).resolve().parent.parent
CASES = faults.load()


def test_the_corpus_covers_the_faults_the_issue_names():
    assert len(CASES) >= 14
    by_class = {k: sorted(n for n, c in CASES.items() if c["class"] == k) for k in ("host", "kernel", "env")}
    assert all(len(names) >= 4 for names in by_class.values()), by_class
    for name, case in CASES.items():
        verdicts = {"host": ("FAIL", "host"), "kernel": ("FAIL", "kernel"), "env": ("BLOCKED", "env")}
        want = verdicts.get(case["class"], ("ALL_PASS", ""))
        assert (case["expect"]["verdict"], case["expect"]["class"]) == want, name
    # the two sides of the rule that separates them: a contract launching otherwise, and a kernel that is wrong
    assert {n for n, c in CASES.items() if c["change"].get("contract")} <= set(by_class["host"])
    assert {n for n, c in CASES.items() if c["change"].get("kernel")} == set(by_class["kernel"])


def test_a_case_that_does_not_say_what_it_must_is_refused(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "case.json").write_text(json.dumps({"op": "x", "fault": "f", "class": "host", "change": {"contract": True},
                                               "expect": {"verdict": "FAIL", "class": "env", "fix": "y"},
                                               "decided": "gpu"}))  # fmt: skip
    with pytest.raises(faults.CaseError, match="expect FAIL env is not a verdict"):
        faults.load(tmp_path)


def test_only_the_control_changes_nothing_and_it_must_pass(tmp_path):
    assert [n for n, c in CASES.items() if not c["change"]] == ["control_unchanged"]
    case = tmp_path / "c"
    case.mkdir()
    for change, expect in (({}, {"verdict": "FAIL", "class": "kernel", "fix": "kernel.rs"}),
                           ({"env": {"X": ""}}, {"verdict": "ALL_PASS", "class": "", "fix": ""})):  # fmt: skip
        (case / "case.json").write_text(json.dumps({"op": "x", "fault": "f", "class": "kernel", "change": change,
                                                    "expect": expect, "decided": "gpu"}))  # fmt: skip
        with pytest.raises(faults.CaseError, match="ALL_PASS exactly when it changes nothing"):
            faults.load(tmp_path)


@pytest.fixture(scope="module")
def base(tmp_path_factory, tilegym_wheel) -> Path:
    """The wheel's silu_and_mul checkout with its kernel.rs only, as a pull request leaves it."""
    return assemble_checkout(tmp_path_factory.mktemp("faults") / "base", tilegym_wheel, ["silu_and_mul"],
                             ["silu_and_mul"]).repo  # fmt: skip


def _launch_differences(base: Path, case: dict, tmp_path: Path) -> list[str]:
    """The case's port in a copy of ``base``; how its launch differs from the plan without a contract,
    as the port compares them."""
    tree = tmp_path / case["name"]
    shutil.copytree(base, tree, ignore=shutil.ignore_patterns(".git"))
    faults.apply_sources(tree, case)
    assert generate_only(tree, case["op"]) == "", case["name"]  # the port gets as far as its files
    faults.apply_after_port(tree, case)
    target = Target(tree, case["op"])
    out = tmp_path / "out" / case["name"]
    ported, facts, co = make_plan(target, out)
    return contract_differences(
        target, discover(target), out, read_kernel(target.kernel_rs), co, facts, ported
    )


def test_every_change_applies_and_a_contracts_wrong_launch_is_found(base, tmp_path):
    for name, case in CASES.items():
        found = _launch_differences(base, case, tmp_path)
        if case["change"].get("contract") and case["name"] != "host_wrong_registration":
            # the fix line agent-d prints for a device fault or a rejected launch under this contract
            fix = f"host_contract.yaml: {found[0]}: launch as the reference does, or remove that key"
            assert case["expect"]["fix"] in fix, (name, found)
        else:
            assert found == [], (name, found)


RECORDED = {name: case for name, case in CASES.items() if (Path(case["dir"]) / "h200" / "run.json").is_file()}


def _recorded(case: dict) -> tuple[dict, TestResult]:
    """What the H200 run recorded for ``case``: its run facts and the test result read from its logs."""
    h200 = Path(case["dir"]) / "h200"
    run = json.loads((h200 / "run.json").read_text())
    xml = h200 / "correctness_cutile_rs.xml"
    result = to_test_result(
        (h200 / "correctness_cutile_rs.txt").read_text(), command="pytest", exit_code=run["pytest_exit"],
        log_path=str(h200 / "correctness_cutile_rs.txt"), gpu=True,
        junit_xml=xml.read_text() if xml.is_file() else None, test_paths=["tests/ops/test_silu_and_mul.py"],
    )  # fmt: skip
    result.stopped_by_timeout, result.silent_for = run["stopped_by_timeout"], run["silent_for"]
    return run, result


def test_the_h200_logs_of_every_case_get_the_expected_verdict_and_fix(base, tmp_path):
    # every GPU case that reached pytest; the env cases stop at the interpreter probe, before pytest
    assert sorted(RECORDED) == sorted(n for n, c in CASES.items() if c["decided"] == "gpu" and c["class"] != "env"
                                      and n != "host_wrong_registration")  # fmt: skip
    for name, case in RECORDED.items():
        _, result = _recorded(case)
        verdict = classify(result, [], [], _launch_differences(base, case, tmp_path / name))
        expect = case["expect"]
        assert (verdict.kind.value, verdict.klass) == (expect["verdict"], expect["class"]), (
            name,
            verdict.reason,
        )
        assert expect["fix"] in verdict.fix, (name, verdict.fix)


def test_a_contracts_launch_that_could_not_be_read_is_never_called_the_kernels():
    """On the H200 the runner lacked jsonschema, so verify could not read the contract cases' launch
    and blamed the kernel for the contracts' wrong grid, scalar and stride (docs/gpu.md)."""
    why = "ModuleNotFoundError: No module named 'jsonschema'"
    contract_cases = [n for n, c in RECORDED.items() if c["change"].get("contract")]
    assert len(contract_cases) >= 5
    for name in contract_cases:
        run, result = _recorded(RECORDED[name])
        verdict = classify(result, [], [], [], launch_unknown=why)
        assert (verdict.kind.value, verdict.klass) == ("FAIL", "host"), (name, verdict.reason)
        if run["said"]["class"] == "kernel":  # what the H200 run said before the rule was fixed
            assert "could not read the contract's launch" in verdict.fix and why in verdict.fix
    # with no contract in use, the same logs stay the kernel's
    _, result = _recorded(RECORDED["kernel_numeric_mismatch"])
    assert classify(result, [], [], []).klass == "kernel"


@pytest.mark.slow
def test_a_kernel_that_does_not_compile_is_decided_on_this_machine(base, tmp_path, cargo_target_dir, capsys):
    (case,) = [c for c in CASES.values() if c["decided"] == "pack"]
    tree = tmp_path / case["name"]
    shutil.copytree(base, tree)
    faults.apply_sources(tree, case)
    code = main(["port", "--repo", str(tree), "--kernel", case["op"], "--cargo-target-dir", str(cargo_target_dir),
                 "--json"])  # fmt: skip
    (got,) = json.loads(capsys.readouterr().out)
    assert code == 1 and faults.judge(case, got) == {"match": True, "wrong": []}, got


@pytest.mark.slow
@needs_cc
def test_environment_faults_through_the_gpu_runner_on_a_stand_in_machine(base, tmp_path, cargo_target_dir):
    """``run_faults`` as on the GPU machine: a copy of the built tree per case, the case's environment
    and interpreter, ``agent-d verify --json``; the machine is our stand-in (one device, a torch of
    ours, the tile toolchain in one CUDA_HOME), so what fails is exactly what the case changes."""
    env_cases = {n: c for n, c in CASES.items() if c["class"] == "env"}
    root = tmp_path / "root"
    tree = root / "payload" / "faults" / "healthy"
    shutil.copytree(base, tree)
    assert (
        main(
            [
                "port",
                "--repo",
                str(tree),
                "--kernel",
                "silu_and_mul",
                "--cargo-target-dir",
                str(cargo_target_dir),
                "--quiet",
            ]
        )
        == 3
    )  # fmt: skip  (BLOCKED env: no GPU here)
    machine = with_tileiras(tmp_path / "machine")
    manifest = {"faults": {"cases": {}}}
    pythons = {}
    for name, case in env_cases.items():
        manifest["faults"]["cases"][name] = {**case, "tree": "healthy", "test_timeout": 120}
        # the stand-in driver cannot read CUDA_VISIBLE_DEVICES: it reports no device itself
        pythons[name] = interpreter(tmp_path / f"py-{name}", gpus=0 if name == "env_no_cuda_device" else 1)
    rows = {}
    for name, python in pythons.items():  # one machine each: the driver differs
        one = {"faults": {"cases": {name: manifest["faults"]["cases"][name]}}}
        state = tmp_path / "state" / name
        rows.update(run_faults(one, root, ROOT, python, machine, state, tmp_path / "logs" / name))
    for name, row in rows.items():
        assert row["match"], (name, row)
        assert row["got"]["verdict"] == "BLOCKED" and row["exit"] == 3
    assert "hidden by the fault corpus" in rows["env_torch_missing"]["got"]["reason"]
    assert "CUDA_HOME=/nonexistent/cuda holds no libnvvm" in rows["env_wrong_cuda_home"]["got"]["reason"]
    text = table.render({"ops": {}, "faults": rows})
    assert f"{len(rows)} of {len(rows)} classified as expected" in text
    assert (
        "| the wrong CUDA_HOME: tileiras is there, its libnvvm is not (`env_wrong_cuda_home`) | env |" in text
    )


def test_a_pack_result_and_a_mismatch_are_tabled():
    case = CASES["kernel_numeric_mismatch"]
    wrong = faults.row(
        case, {"verdict": "FAIL", "class": "host", "reason": "r", "fix": "inspect the pytest log"}
    )
    assert wrong["match"] is False and wrong["wrong"] == ["class", "fix"]
    text = table.render({"ops": {}, "faults": {"kernel_numeric_mismatch": wrong}})
    assert "0 of 1 classified as expected" in text and "| no: class, fix |" in text
    merged = table.merge(
        [{"ops": {}, "faults": {"a": wrong}}, {"ops": {}, "faults": {"a": {**wrong, "match": True}}}]
    )
    assert merged["faults"]["a"]["match"] is True  # the later run's row


def test_verify_says_when_a_contracts_launch_cannot_be_read(base, tmp_path, monkeypatch):
    """verify reads the contract's launch again; when that fails, a contract in use makes it unknown."""
    from bot import pipeline
    from bot.emit import stage_generate
    from bot.job import Job
    from bot.targets.discover import discover
    from bot.testing import stage_verify

    def job_for(case: dict | None) -> Job:
        tree = tmp_path / (case["name"] if case else "plain")
        shutil.copytree(base, tree, ignore=shutil.ignore_patterns(".git"))
        if case:
            faults.apply_sources(tree, case)
        target = Target(tree, "silu_and_mul")
        job = Job.start(target, pipeline.PortOptions(repo=tree, out_root=tmp_path / "out" / tree.name))
        job.found = discover(target)
        return job

    with_contract, plain = job_for(CASES["host_contract_wrong_grid"]), job_for(None)
    found, unknown = stage_verify.verified_differences(with_contract)
    assert found and unknown == ""
    assert stage_verify.verified_differences(plain) == ([], "")

    def no_jsonschema(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'jsonschema'")

    monkeypatch.setattr(stage_generate, "gather_facts", no_jsonschema)
    assert stage_verify.verified_differences(with_contract) == (
        [], "ModuleNotFoundError: No module named 'jsonschema'"
    )  # fmt: skip
    assert any("contract differences not read" in line for line in with_contract.run.log)
    assert stage_verify.verified_differences(plain) == ([], "")  # no contract: nothing to vouch for
