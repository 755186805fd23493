"""The rules that separate host from kernel (docs/classification.md), on real pytest runs where a
run can show the fault on a CPU machine: a test process that dies keeps the others' results and is
heard again alone, a test that never returns is a hang, and a device fault is the kernel's unless
the porter's contract launches it otherwise than the reference does (real plans of silu_and_mul)."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest
from validator_support import needs_cc

from bot.classify import classify
from bot.classify.launch_diff import differences
from bot.classify.types import VerdictKind
from bot.demo import assemble_checkout
from bot.pipeline import make_plan
from bot.targets.types import Target
from bot.testing import rerun, testrun
from bot.testing.types import TestCase, TestResult
from bot.testresults.combine import to_test_result

ABORTS = """
import os, sys

def test_a():
    pass

def test_b():
    os.write(2, SAID)
    os.abort()

def test_c():
    pass

def test_d():
    assert 1 == 2
"""


def _pytest(tmp_path: Path, body: str, said: bytes = b"") -> tuple[Target, list[str]]:
    (tmp_path / "test_crash.py").write_text(textwrap.dedent(body).replace("SAID", repr(said)))
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "test_crash.py",
        "--tb=short",
        "-v",
        "-x",
        "-p",
        "no:cacheprovider",
    ]
    return Target(tmp_path, "x"), argv


def _run(target: Target, argv: list[str], tmp_path: Path, timeout: float = 120.0) -> TestResult:
    log = tmp_path / "correctness_cutile_rs.txt"
    deadline = time.monotonic() + timeout
    outcome = testrun.run(target, argv, log, {}, timeout)
    first = to_test_result(log.read_text(), command="pytest", exit_code=outcome.code, log_path=str(log))
    first.stopped_by_timeout, first.silent_for = outcome.stopped, outcome.silent_for
    return rerun.run_what_remains(target, argv, first, tmp_path, {}, deadline)


def test_a_crash_keeps_the_results_before_it_and_runs_what_remains(tmp_path):
    target, argv = _pytest(tmp_path, ABORTS)
    result = _run(target, argv, tmp_path)
    outcomes = {c.nodeid.split("::")[1]: c.outcome for c in result.cases}
    assert outcomes == {"test_a": "passed", "test_b": "error", "test_c": "passed", "test_d": "failed"}
    assert (result.passed, result.failed, result.errors) == (2, 1, 1)
    assert [Path(p).name for p in result.rest_logs] == ["correctness_cutile_rs.rest-1.txt"]
    assert "2 deselected" in (tmp_path / "correctness_cutile_rs.rest-1.txt").read_text()  # test_a, test_b
    # no word from the dying process: the host's, as docs/specification.md, "Verdicts" has it
    verdict = classify.classify(result, [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "host"), verdict
    assert "pytest died" in verdict.reason and "test_b" in verdict.reason


def test_a_crash_heard_alone_names_its_cause(tmp_path):
    """Under capture the dying words are lost; run alone with -s they are the evidence."""
    said = b"\nthread 'main' has overflowed its stack\nfatal runtime error: stack overflow\n"
    target, argv = _pytest(tmp_path, ABORTS, said)
    result = _run(target, argv, tmp_path)
    crashed = next(c for c in result.cases if c.outcome == "error")
    assert "has overflowed its stack" not in (tmp_path / "correctness_cutile_rs.txt").read_text()
    assert "has overflowed its stack" in crashed.detail
    verdict = classify.classify(result, [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "kernel"), verdict
    assert "process abort" in verdict.reason and verdict.followup.startswith("kernel.rs: process abort")
    # the same death after freeing memory that was not ours is the host's
    (tmp_path / "free").mkdir()
    target, argv = _pytest(tmp_path / "free", ABORTS, b"free(): invalid pointer\n")
    verdict = classify.classify(_run(target, argv, tmp_path / "free"), [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "host"), verdict


def test_a_test_silent_past_the_per_test_timeout_is_a_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(classify, "PER_TEST_TIMEOUT_S", 2.0)  # pytest-timeout's 60 s, shortened
    body = """
    import time

    def test_fast():
        pass

    def test_never_returns():
        time.sleep(600)
    """
    target, argv = _pytest(tmp_path, body)
    result = _run(target, argv, tmp_path, timeout=6.0)
    assert result.stopped_by_timeout and result.silent_for >= 2.0
    assert [c.outcome for c in result.cases] == ["passed", "error"]
    verdict = classify.classify(result, [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "kernel"), verdict
    assert verdict.reason.startswith("test_crash.py::test_never_returns: hang")
    # the same stop while tests kept printing is a run that needed more time
    result.silent_for = 0.5
    assert classify.classify(result, []).klass == "env"


def _failed(message: str, detail: str = "") -> TestResult:
    case = TestCase("tests/ops/test_x.py::T::test_op[cutile_rs-1]", "failed", message, detail)
    return TestResult(True, "pytest", 1, "log", failed=1, cases=[case])


NOT_CLOSE = "AssertionError: output 0 (rtol=0.0, atol=0.01): Tensor-likes are not close!"


def test_device_faults_are_the_kernels_when_the_launch_is_the_references():
    nan = _failed(
        NOT_CLOSE,
        NOT_CLOSE
        + " | Mismatched elements: 9 / 9 (100.0%) | Greatest absolute difference: nan at index (0, 0)",
    )
    verdict = classify.classify(nan, [])
    assert (verdict.klass, verdict.followup.split(";")[0]) == (
        "kernel",
        "kernel.rs: NaN outputs in tests/ops/test_x.py::T::test_op[cutile_rs-1]",
    )
    mismatch = classify.classify(_failed(NOT_CLOSE, NOT_CLOSE + " | Greatest absolute difference: 0.5"), [])
    assert mismatch.klass == "kernel" and "numeric mismatch" in mismatch.reason
    timed_out = classify.classify(_failed("Failed: Timeout >60.0s"), [])
    assert timed_out.klass == "kernel" and timed_out.followup.startswith("kernel.rs: hang")
    illegal = _failed("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert classify.classify(illegal, []).klass == "kernel"
    contract = ["ffi hidden_size: `dim(out,1) / 2` where the reference gives `dim(out,1)`"]
    for result in (nan, illegal):
        verdict = classify.classify(result, [], [], contract)
        assert verdict.klass == "host" and contract[0] in verdict.reason, verdict
        assert verdict.fix.startswith("host_contract.yaml: ffi hidden_size")


SWEEP_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-9.1.1, pluggy-1.6.0 -- /usr/bin/python3
rootdir: /repo
plugins: timeout-2.5.0
timeout: 60.0s
collecting ... collected 328 items / 200 deselected / 128 selected

tests/ops/test_bmm.py::Test_BMM_FWD::test_op[cutile_rs-True-4-128-256-511-torch.float16] FAILED [  0%]

=================================== FAILURES ===================================
__ Test_BMM_FWD.test_op[cutile_rs-True-4-128-256-511-torch.float16] __
src/tilegym/backend/cutile_rs/autotuner.py:120: in _bench_config_cupti
    out = kernel_fn(cfg)
src/tilegym/ops/cutile_rs/bmm.py:191: in _launch
    rc = lib.cutile_bmm(
E   Failed: Timeout (>60.0s) from pytest-timeout.
----------------------------- Captured stderr call -----------------------------
[2026-12-04 11:05:37] [tilegym.backend.cutile_rs.autotuner] [INFO] cutile-rs autotune [bmm] key=(4, 128): benchmarking 18 configs (CUPTI) ...
[2026-12-04 11:05:44] [tilegym.backend.cutile_rs.autotuner] [INFO]   [bmm] config 1/18: namespace(BM=64, BN=64) → 0.0167 ms ← best
[2026-12-04 11:06:35] [tilegym.backend.cutile_rs.autotuner] [INFO]   [bmm] config 15/18: namespace(BM=256, BN=128) → 0.0395 ms
!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!
=========== 1 failed, 200 deselected, 2 warnings in 64.52s (0:01:04) ===========
"""


def test_a_timeout_inside_the_autotune_sweep_names_the_sweep_not_a_hang():
    """bmm on the H200 with autotuning on: its first case compiled 15 of the reference's 18 configs
    before pytest-timeout's 60 s (pytest-timeout 2.5 words it "Timeout (>60.0s)")."""
    result = to_test_result(SWEEP_LOG, command="pytest", exit_code=1, log_path="log", gpu=True)
    (case,) = [c for c in result.cases if c.outcome == "failed"]
    assert case.detail.endswith("autotune sweep: config 15 of 18 reached")
    verdict = classify.classify(result, [], dry_run_identical=True)
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "host")
    assert "ran out in the autotuner's sweep, at config 15 of 18" in verdict.reason
    assert "python.configs" in verdict.fix
    without_sweep = SWEEP_LOG.replace("config 1/18", "-").replace("config 15/18", "-")
    hung = to_test_result(without_sweep, command="pytest", exit_code=1, log_path="log", gpu=True)
    hang = classify.classify(hung, [], dry_run_identical=True)
    assert hang.klass == "kernel" and hang.followup.startswith("kernel.rs: hang")  # today's wording too


def test_the_output_the_wrapper_allocates_is_the_hosts():
    shape = _failed("AssertionError: output 0: shape (4, 64, 1024) != reference (4, 64, 512)")
    assert classify.classify(shape, []).klass == "host"
    dtype = _failed(
        "AssertionError: The values for attribute 'dtype' do not match: torch.float32 != torch.float16."
    )
    assert classify.classify(dtype, []).klass == "host"


@pytest.fixture(scope="module")
def silu(tmp_path_factory, tilegym_wheel):
    repo = assemble_checkout(
        tmp_path_factory.mktemp("silu") / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]
    ).repo
    return Target(repo, "silu_and_mul")


def _contract_differences(target: Target, contract: str) -> list[str]:
    path = target.kernel_dir / "host_contract.yaml"
    path.write_text("contract_version: 1\n" + textwrap.dedent(contract))
    try:
        with_contract = make_plan(target, target.repo / "out")[0]
    finally:
        path.unlink()
    # as the port compares them (stage_generate.contract_differences)
    return differences(with_contract, make_plan(target, target.repo / "out")[0])


def test_a_contract_that_launches_otherwise_than_the_reference_is_found(silu, carrying_gives_way):
    scalar = _contract_differences(silu, 'ffi:\n  scalars:\n    hidden_size: "dim(out,1) / 2"\n')
    assert scalar == ["ffi hidden_size: `dim(out,1) / 2` where the reference gives `dim(out,1)`"]
    grid = _contract_differences(
        silu, 'ffi:\n  grid:\n    silu_and_mul_kernel: ["cdiv(dim(out,0), 2)", 1, 1]\n'
    )
    assert grid == [
        "silu_and_mul_kernel grid: [`cdiv(dim(out,0), 2)`, `1`, `1`] where the reference gives [`n_rows`, `1`, `1`]"
    ]
    # a contract that says what agent-d reads anyway changes nothing
    assert _contract_differences(silu, 'ffi:\n  scalars:\n    hidden_size: "dim(out,1)"\n') == []


def test_a_contract_value_in_place_of_what_the_carried_launch_passes_is_a_difference(silu):
    """Carried, the launch passes its own grid and scalars at run time: a contract that replaces one
    with an expression changes the launch, whatever the value, and the host is the suspect."""
    scalar = _contract_differences(silu, 'ffi:\n  scalars:\n    hidden_size: "dim(out,1) / 2"\n')
    assert scalar == [
        "ffi hidden_size: `dim(out,1) / 2` where the reference passes its own value at the launch"
    ]
    grid = _contract_differences(
        silu, 'ffi:\n  grid:\n    silu_and_mul_kernel: ["cdiv(dim(out,0), 2)", 1, 1]\n'
    )
    assert grid == [
        "silu_and_mul_kernel grid: [`cdiv(dim(out,0), 2)`, `1`, `1`] where the reference gives [`num_programs`, `1`, `1`]"
    ]


def _registry(repo: Path, backends: dict) -> None:
    """A TileGym-shaped package whose dispatcher holds ``backends`` (ours: TileGym's _REGISTRY layout)."""
    pkg = repo / "src" / "tilegym"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "backend").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "backend" / "__init__.py").write_text("")
    (pkg / "backend" / "dispatcher.py").write_text(f"_REGISTRY = {backends!r}\n")


def test_an_op_the_dispatcher_has_no_cutile_rs_implementation_of_is_the_hosts(tmp_path):
    """Without it, a test asking for cutile-rs runs the dispatcher's fallback and passes."""
    from types import SimpleNamespace

    from bot.errors import Failed
    from bot.testing.stage_tests import registered

    _registry(
        tmp_path / "fell_back", {"silu_and_mul": {"pytorch": None}, "silu_and_mul_v2": {"cutile-rs": None}}
    )
    found = SimpleNamespace(
        dispatch_name="silu_and_mul", registry_name="silu_and_mul"
    )  # as discover gives it
    assert testrun.registered_backends(sys.executable, tmp_path / "fell_back", "silu_and_mul") == ["pytorch"]
    with pytest.raises(Failed) as stop:
        registered(Target(tmp_path / "fell_back", "silu_and_mul"), found, sys.executable)
    assert stop.value.klass == "host" and "registered: pytorch" in stop.value.reason
    assert stop.value.host_fix.startswith(
        'register the wrapper with @register_impl("silu_and_mul", backend="cutile-rs")'
    )
    _registry(tmp_path / "wired", {"silu_and_mul": {"pytorch": None, "cutile-rs": None}})
    assert registered(Target(tmp_path / "wired", "silu_and_mul"), found, sys.executable) == [
        "cutile-rs",
        "pytorch",
    ]
    # a checkout the dispatcher cannot be asked in decides nothing: the tests will show it
    assert testrun.registered_backends(sys.executable, tmp_path / "nowhere", "silu_and_mul") is None


@needs_cc
def test_the_interpreter_probe_asks_the_registry_in_the_same_process(tmp_path, monkeypatch):
    """One Python imports torch for the machine's facts and for every kernel's registration check;
    the check reads the probe's answer and starts no process of its own."""
    from types import SimpleNamespace

    from env_support import interpreter, with_tileiras

    from bot.errors import Failed
    from bot.testing.stage_tests import registered

    repo = tmp_path / "fell_back"
    _registry(repo, {"silu_and_mul": {"pytorch": None}, "swiglu": {"cutile-rs": None, "pytorch": None}})
    python = interpreter(tmp_path / "i", torch="cuda")  # a GPU the fake torch reports
    interp = testrun.probe(python, with_tileiras(tmp_path), repo=repo, names=("silu_and_mul", "swiglu"))
    assert interp.registered == {"silu_and_mul": ["pytorch"], "swiglu": ["cutile-rs", "pytorch"]}

    def no_second_process(*args):
        raise AssertionError("the registration check started a process of its own")

    monkeypatch.setattr(testrun, "registered_backends", no_second_process)
    found = SimpleNamespace(dispatch_name="silu_and_mul", registry_name="silu_and_mul")
    with pytest.raises(Failed, match="registered: pytorch"):
        registered(Target(repo, "silu_and_mul"), found, python, interp)
    swiglu = SimpleNamespace(dispatch_name="swiglu", registry_name="swiglu")
    assert registered(Target(repo, "swiglu"), swiglu, python, interp) == ["cutile-rs", "pytorch"]
    # without a GPU the tests cannot run: the probe does not import the checkout at all
    no_gpu = testrun.probe(interpreter(tmp_path / "j", gpus=0, torch="cpu"), with_tileiras(tmp_path),
                           repo=repo, names=("silu_and_mul",))  # fmt: skip
    assert no_gpu.registered is None
