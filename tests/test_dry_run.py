"""The launch dry run (bot/dryrun): the cuTile reference and agent-d's wrapper launched on a CPU, side
by side, for a few of the op's own test cases.

The recordings need torch and cuda.tile: ``scripts/setup.sh --test`` puts them in a venv of their
own ($AGENT_D_CACHE/dry-run-venv), so the suite's interpreter stays torch-free. Without it these
tests skip and say why, except under CI, where setup installs it and a missing venv is a failure.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_support import torch_python

from bot.apply import apply
from bot.classify import classify
from bot.classify.types import VerdictKind
from bot.demo import assemble_checkout
from bot.dryrun import compare as dry_compare
from bot.dryrun import result as dry_result
from bot.dryrun import run as dry
from bot.emit import generate
from bot.job import PortOptions
from bot.pipeline import make_plan, port
from bot.read.reader import read_kernel
from bot.targets.discover import discover
from bot.targets.types import Target
from bot.testing.testrun import read_test_files
from bot.testing.types import TestCase, TestResult

FAULTS = Path(__file__).parent / "fixtures" / "faults"
CONTRACTS = Path(__file__).parent / "fixtures" / "contracts"
WHEEL_OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]
# none: each clean port carries its reference's host code over (docs/carry.md). The contract of
# tests/fixtures/contracts/attention_sink.yaml autotunes always, where the reference takes its
# default TILE_N = 128 when autotuning is off: the case cover reaches those cases and says so.
NEEDS_CONTRACT: set[str] = set()


def _dry_python() -> str:
    return torch_python()


@pytest.fixture(scope="module")
def python() -> str:
    return _dry_python()


def _generated(dest: Path, wheel: Path, ops: list[str], contracts: dict[str, Path] | None = None) -> Path:
    """A demo checkout with each op's host files generated and applied (nothing built)."""
    repo = assemble_checkout(dest, wheel, ops, ops).repo
    for op, contract in (contracts or {}).items():
        shutil.copy(contract, Target(repo, op).kernel_dir / "host_contract.yaml")
    for op in ops:
        target = Target(repo, op)
        plan, _facts, co = make_plan(target, dest / "plan" / op)
        assert not plan.missing, (op, plan.missing)
        apply.apply(apply.formatted(generate.generate(target, plan, co), repo), repo)
    return repo


def _dry_run(repo: Path, op: str, python: str, out: Path) -> dry_result.DryRun:
    target = Target(repo, op)
    plan, _facts, _co = make_plan(target, out / "plan")
    tests = read_test_files(repo, discover(target).test_sites)
    out.mkdir(parents=True, exist_ok=True)
    return dry.dry_run(target, plan, read_kernel(target.kernel_rs), python, tests, out)


@pytest.mark.slow
def test_the_clean_ports_of_the_wheel_ops_launch_as_their_references(tmp_path, tilegym_wheel, python):
    contracts = {op: CONTRACTS / f"{op}.yaml" for op in NEEDS_CONTRACT}
    repo = _generated(tmp_path / "tg", tilegym_wheel, WHEEL_OPS, contracts)
    for op in WHEEL_OPS:
        found = _dry_run(repo, op, python, tmp_path / "out" / op)
        assert found.status == "compared", (op, found.why)
        assert found.identical, (op, [dry_result.describe_row(r) for r in found.differences])
        assert dry.CASES <= len(found.cases) <= 8, op
        whats = {r.what for r in found.rows}
        assert {"grid", "dtype", "value"} <= whats, (op, whats)


# Each host fault of the corpus that changes the launch, with what the table must show.
LAUNCH_FAULTS = {
    "host_contract_wrong_grid": ("silu_and_mul_kernel grid", "grid", "(256, 1, 1)", "(128, 1, 1)"),
    "host_contract_wrong_scalar": ("hidden_size", "value", "TOTAL_HIDDEN_SIZE = 512", "256"),
    "host_contract_wrong_stride": ("in_row_stride", "value", "input.stride(0) = 1024", "2048"),
    "host_ffi_return_code": ("launcher", "launch", "launches", "INVALID_ARGS"),
    "host_wrong_output_dtype": ("out_ptr", "dtype", "output: float16", "float32"),
    "host_wrong_output_shape": ("out_ptr", "numel", "output: 131072", "262144"),
}


@pytest.fixture(scope="module")
def silu_checkout(tmp_path_factory, tilegym_wheel) -> Path:
    return _generated(tmp_path_factory.mktemp("silu") / "tg", tilegym_wheel, ["silu_and_mul"])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(LAUNCH_FAULTS))
def test_each_launch_changing_host_fault_of_the_corpus_is_found_with_both_values(
    case, silu_checkout, tmp_path, tilegym_wheel, python
):
    repo = _generated(
        tmp_path / "tg",
        tilegym_wheel,
        ["silu_and_mul"],
        {"silu_and_mul": FAULTS / case / "host_contract.yaml"},
    )
    found = _dry_run(repo, "silu_and_mul", python, tmp_path / "out")
    assert found.status == "compared", found.why
    param, what, reference, cutile_rs = LAUNCH_FAULTS[case]
    assert found.differences, case
    # the cover of cases starts with the test's first case, named as pytest names it
    first_case = "test_op[cutile_rs-4-64-512-torch.float16]"
    (row,) = [r for r in found.differences if (r.case, r.param, r.what) == (first_case, param, what)]
    assert reference in row.reference and cutile_rs in row.cutile_rs, dry_result.describe_row(row)


@pytest.mark.slow
@pytest.mark.parametrize("dry_run_first", [True, False], ids=["dry-run-first", "beside-pytest"])
def test_a_port_stops_at_the_dry_run_with_both_values_before_any_gpu_time(
    tmp_path, tilegym_wheel, python, cargo_target_dir, dry_run_first
):
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    shutil.copy(
        FAULTS / "host_contract_wrong_grid" / "host_contract.yaml", Target(repo, "silu_and_mul").kernel_dir
    )
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "a contract"], cwd=repo, check=True)
    out = tmp_path / "out"
    options = PortOptions(
        repo=repo,
        kernel="silu_and_mul",
        out_root=out,
        python=python,
        cargo_target_dir=cargo_target_dir,
        echo=lambda _: None,
        dry_run_first=dry_run_first,
    )
    (result,) = port(options)
    verdict = result.verdict
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "host"), verdict
    failed = [s.name for s in result.stages if s.status == "failed"]
    assert failed == ["dry run"], result.stages  # beside pytest too, the dry run's stop is the verdict
    # both values of the case the reason names: the contract's grid is half the reference's
    m = re.search(r"grid: reference \((\d+), 1, 1\), cutile-rs \((\d+), 1, 1\) \(test_op\[", verdict.reason)
    assert m and int(m.group(1)) == 2 * int(m.group(2)), verdict.reason
    assert verdict.host_fix.startswith("host_contract.yaml: silu_and_mul_kernel grid")
    if dry_run_first:
        assert [s.name for s in result.stages][-1] == "dry run" and result.tests is None  # pytest never ran
    table = (out / "silu_and_mul" / "reports" / dry.TABLE_NAME).read_text()
    assert "| **no** |" in table and f"({m.group(2)}, 1, 1)" in table
    records = json.loads((out / "silu_and_mul" / dry.RECORDS_NAME).read_text())
    assert {r["backend"] for r in records["cases"].values()} == {"cutile", "cutile-rs"}


def test_without_torch_the_dry_run_says_so(silu_checkout, tmp_path):
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("this interpreter has torch")
    found = _dry_run(silu_checkout, "silu_and_mul", sys.executable, tmp_path / "out")
    assert found.status == "not run" and found.why.startswith("torch")
    assert f"not importable by {sys.executable}" in found.why
    assert found.headline().startswith("dry run not run: torch")


# --------------------------------------------------------------------------------- the classifier


# TileGym main's test helper reports a mismatch in its own words, which no text rule knows.
MAIN_HELPER = (
    "AssertionError: *** OUTPUT 0 DID NOT MATCH THE REFERENCE *** allclose: False test range: {lo} : {hi}"
)


def _failed(message: str) -> TestResult:
    case = TestCase("tests/ops/test_x.py::test_op[cutile_rs-1]", "failed", message)
    return TestResult(ran=True, command="pytest", exit_code=1, log_path="", failed=1, cases=[case], gpu=True)


@pytest.mark.parametrize(
    ("message", "what"),
    [
        (MAIN_HELPER.format(lo="-3.1", hi="2.9"), "numeric mismatch"),
        (MAIN_HELPER.format(lo="nan", hi="nan"), "NaN outputs"),
    ],
)
def test_after_an_identical_dry_run_the_tests_own_mismatch_is_the_kernels(message, what):
    verdict = classify.classify(_failed(message), [], dry_run_identical=True)
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "kernel"), verdict
    assert what in verdict.reason
    assert "dry run found the launch equal" in verdict.followup
    # without that evidence the same text is not called the kernel's
    assert classify.classify(_failed(message), []).klass == "host"


def test_an_identical_dry_run_outweighs_a_contract_that_changes_the_launch_on_paper():
    failed = _failed("AssertionError: Tensor-likes are not close!")
    contract = ["ffi hidden_size: `dim(out,1) / 2` where the reference gives `dim(out,1)`"]
    assert classify.classify(failed, [], launch_differences=contract).klass == "host"
    assert (
        classify.classify(failed, [], launch_differences=contract, dry_run_identical=True).klass == "kernel"
    )


# --------------------------------------------------------------------------------- compare, no torch


def _desc(shape: list[int], dtype: str, digest: str = "") -> dict:
    strides, step = [], 1
    for n in reversed(shape):
        strides.insert(0, step)
        step *= n
    return {
        "kind": "tensor",
        "shape": shape,
        "strides": strides,
        "dtype": dtype,
        "numel": step,
        "digest": digest,
    }


def _records(rows: int, hidden: int, c_call: list) -> dict:
    """One case as the plugin records it: the reference's launch and the wrapper's C call."""
    reference = {
        "side": "cutile",
        "kernel": "row_kernel",
        "params": ["x", "y", "TILE", "COLUMNS"],  # none of kernel.rs's names
        "grid": [rows],
        "args": [
            _desc([rows, 2 * hidden], "float16", "in"),
            _desc([rows, hidden], "float16", "fresh-1"),
            {"kind": "scalar", "value": 1 << (hidden - 1).bit_length()},
            {"kind": "scalar", "value": hidden},
        ],
    }
    case = f"case[{rows}-{hidden}]"
    return {
        f"t::test_op[cutile-{rows}-{hidden}]": {
            "backend": "cutile",
            "case": case,
            "launches": [reference],
            "error": "",
        },
        f"t::test_op[cutile_rs-{rows}-{hidden}]": {
            "backend": "cutile-rs",
            "case": case,
            "launches": [{"side": "cutile-rs", "symbol": "cutile_silu_and_mul", "args": c_call}],
            "error": "",
        },
    }


def _c_call(plan, rows: int, hidden: int, **override) -> list:
    values = {
        "out": _desc([rows, hidden], "float16", "fresh-2"),
        "inp": _desc([rows, 2 * hidden], "float16", "in"),
        "block_size": 1 << (hidden - 1).bit_length(),
        "num_cta_in_cga": -1,
        "occupancy": -1,
        "device_id": 0,
        "raw_stream": 0,
    }
    values.update(override)
    return [values[name] for name, _ in plan.ffi.c_params()]


def test_values_are_paired_with_the_reference_by_what_they_hold_not_by_name(
    silu_checkout, tmp_path, carrying_gives_way
):
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")  # the C calls below are its (the row plan)
    signature = read_kernel(target.kernel_rs)
    cases = {}  # (_c_call names every C parameter: a plan with others raises KeyError there)
    for rows, hidden in ((256, 512), (4096, 1000), (33, 64)):
        cases.update(_records(rows, hidden, _c_call(plan, rows, hidden)))
    found = dry_compare.compare(plan, signature, cases)
    assert found.identical, [dry_result.describe_row(r) for r in found.differences]
    by_param = {r.param: r.reference for r in found.rows if r.case.endswith("[cutile_rs-4096-1000]")}
    assert by_param["hidden_size"] == "COLUMNS = 1000"  # learned from the values, not the names
    assert by_param["in_row_stride"] == "x.stride(0) = 2000"
    assert by_param["BLOCK_SIZE"] == "TILE = 1024"
    # the wrapper hands the kernel a wider output: found, with both sizes
    cases.update(_records(33, 64, _c_call(plan, 33, 64, out=_desc([33, 128], "float16", "fresh-3"))))
    worse = dry_compare.compare(plan, signature, cases)
    assert [(r.param, r.what, r.reference, r.cutile_rs) for r in worse.differences][:1] == [
        ("out_ptr", "numel", "y: 2112", "4224")
    ]


def test_the_cases_compared_cover_every_parameter_value_up_to_the_limit():
    """A flag that picks another kernel (bmm's static_persistent=False, its fifth variant) is in a
    later case than the first three: the cover takes it; a value the first cases name adds nothing."""
    from bot.dryrun.plugin import covering_cases

    cases = [{("persistent", "True"), ("m", str(m))} for m in (128, 1024, 256)]
    cases += [{("persistent", "True"), ("m", "128")}, {("persistent", "False"), ("m", "128")}]
    assert covering_cases(cases, 3, 8) == [0, 1, 2, 4]
    assert covering_cases(cases, 3, 3) == [0, 1, 2]  # the limit holds
    assert covering_cases(cases, 8, 8) == [0, 1, 2, 3, 4]
    assert covering_cases([], 3, 8) == []


@pytest.mark.parametrize(("setting", "count"), [("", 3), ("8", 8), ("0", 3), ("-2", 3), ("many", 3)])
def test_a_porter_widens_the_dry_run_with_its_setting_and_nothing_else_changes_it(setting, count):
    assert dry.CASES == 3
    assert dry.case_count(setting) == count


def _two_calls(plan, rows: int, hidden: int, second: dict) -> dict:
    """A case that runs another op first, then this op twice (test_moe: moe_align_block, then two
    GEMMs): each side records every launch; the second call on half the rows."""
    records = _records(rows, hidden, _c_call(plan, rows, hidden))
    half = _records(rows // 2, hidden, _c_call(plan, rows // 2, hidden, **second))
    (ref_id, ref), (port_id, port) = records.items()
    (ref_launch,) = next(iter(half.values()))["launches"]
    (port_call,) = list(half.values())[1]["launches"]
    other = {"side": "cutile", "kernel": "align_kernel", "module": "tilegym.ops.cutile.other", "params": []}
    ref["launches"] = [
        {**other, "grid": [7], "args": []},
        {**ref["launches"][0], "module": "tilegym.ops.cutile.silu_and_mul"},
        {**ref_launch, "module": "tilegym.ops.cutile.silu_and_mul"},
    ]
    port["launches"] = [
        {"side": "cutile-rs", "symbol": "cutile_other", "args": [1, 2]},
        *port["launches"],
        port_call,
    ]
    return records


def test_only_this_ops_launches_are_compared_and_each_call_of_a_case_in_order(
    silu_checkout, tmp_path, carrying_gives_way
):
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")  # the C calls below are its (the row plan)
    signature = read_kernel(target.kernel_rs)
    cases = {}
    for rows, hidden in ((256, 512), (64, 1000)):
        cases.update(_two_calls(plan, rows, hidden, {}))
    found = dry_compare.compare(plan, signature, cases, "tilegym.ops.cutile.silu_and_mul")
    assert found.identical, [dry_result.describe_row(r) for r in found.differences]
    assert not found.skipped  # the other op's launches are neither paired nor reported
    grids = [r.cutile_rs for r in found.rows if r.what == "grid" and r.case.endswith("[cutile_rs-256-512]")]
    assert grids == ["(256, 1, 1)", "(128, 1, 1)"]  # the second call paired with the second launch
    # a fault in the second call only is found there
    cases.update(_two_calls(plan, 64, 1000, {"out": _desc([32, 2000], "float16", "fresh-9")}))
    worse = dry_compare.compare(plan, signature, cases, "tilegym.ops.cutile.silu_and_mul")
    assert [(r.param, r.what, r.reference, r.cutile_rs) for r in worse.differences][:1] == [
        ("out_ptr", "numel", "y: 32000", "64000")
    ]
    assert worse.differences[0].case == "test_op[cutile_rs-64-1000]"
    # without the module, the other op's launch is paired with this op's first call: a difference
    mixed = dry_compare.compare(plan, signature, cases)
    assert mixed.differences


def test_a_case_that_calls_a_sibling_op_is_not_this_ops_launch_but_an_unreached_own_kernel_is(
    silu_checkout, tmp_path
):
    """layer_norm_legacy's test file also tests persistent_layer_norm, which cutile-rs does not
    register: its cutile-rs case runs another backend (on the CPU it fails in Triton) and launches
    nothing of the port. That case is said as another op's; the same failure on a kernel the op's own
    carried code launches is the wrapper's."""
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")
    assert plan.carry is not None
    own_kernel = plan.carry.kernels[0].name
    signature = read_kernel(target.kernel_rs)
    triton = "E   ValueError: Pointer argument (at 5) cannot be accessed from Triton (cpu tensor?)"

    def case(kernel: str) -> dict:
        records = _records(64, 128, [])
        for record in records.values():
            if record["backend"] == "cutile":
                record["launches"][0]["kernel"] = kernel
            else:
                record["launches"], record["error"] = [], triton
        return records

    sibling = dry_compare.compare(plan, signature, case("_persistent_row_kernel"))
    assert not sibling.differences and sibling.status == "not compared"
    assert "_persistent_row_kernel" in sibling.why and "another op" in sibling.why and "Triton" in sibling.why
    own = dry_compare.compare(plan, signature, case(own_kernel))
    assert [(r.what, r.cutile_rs[:9]) for r in own.differences] == [("launch", "no launch")]


def test_a_helper_modules_kernel_the_reference_launches_is_the_ops_own(
    silu_checkout, tmp_path, carrying_gives_way
):
    """flash_decode's reference launches the split-k reduce kernel of another module: the launch
    made with the reference's code on the stack is this op's; one made from elsewhere is not."""
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")  # the C calls below are its (the row plan)
    signature = read_kernel(target.kernel_rs)
    cases = _records(256, 512, _c_call(plan, 256, 512))
    [reference] = next(iter(cases.values()))["launches"]
    reference["module"] = "tilegym.ops.cutile.helpers"
    reference["callers"] = ["tilegym.ops.cutile.helpers", "tilegym.ops.cutile.silu_and_mul", "tilegym.ops"]
    found = dry_compare.compare(plan, signature, cases, "tilegym.ops.cutile.silu_and_mul")
    assert found.identical and found.cases, [dry_result.describe_row(r) for r in found.differences]
    reference["callers"] = ["tilegym.ops.cutile.helpers", "tilegym.ops"]  # called by the test itself
    elsewhere = dry_compare.compare(plan, signature, cases, "tilegym.ops.cutile.silu_and_mul")
    assert elsewhere.status == "not compared" and "did not launch" in elsewhere.why


def test_a_case_the_test_file_skips_is_said_so_not_a_reference_that_did_not_launch(monkeypatch):
    import types

    from bot.dryrun import plugin

    nodeid = "tests/ops/test_rms_norm.py::Test_RMSNorm::test_op[cutile-None-256-18432-torch.float16]"
    monkeypatch.setitem(
        plugin.RECORDS, nodeid, {"backend": "cutile", "case": "x", "launches": [], "error": ""}
    )
    reason = ("tests/ops/test_rms_norm.py", 72, "Skipped: Skipping static_persistent test for large n")
    plugin.pytest_runtest_logreport(
        types.SimpleNamespace(nodeid=nodeid, failed=False, skipped=True, longrepr=reason)
    )
    assert plugin.RECORDS[nodeid]["error"] == "the test skips it: Skipping static_persistent test for large n"
    twin = nodeid.replace("[cutile-", "[cutile_rs-")
    cases = {nodeid: plugin.RECORDS[nodeid], twin: {**plugin.RECORDS[nodeid], "backend": "cutile-rs"}}
    found = dry_compare.compare(None, None, cases, "")
    assert found.status == "not compared" and found.cases == []
    assert "did not launch on the CPU (the test skips it: Skipping static_persistent" in found.why


def test_the_plugin_names_the_tilegym_modules_on_a_launchs_stack():
    import types

    from bot.dryrun import plugin

    helper = types.ModuleType("tilegym.ops.cutile.helper")
    exec("def reduce(record):\n    return record()\n", helper.__dict__)
    op = types.ModuleType("tilegym.ops.cutile.op")
    op.__dict__["helper"] = helper
    exec("def forward(record):\n    return helper.reduce(record)\n", op.__dict__)

    def launch():  # as cuda.tile's patched launch: _calling_modules looks above its caller
        return plugin._calling_modules()

    assert op.forward(launch) == ["tilegym.ops.cutile.helper", "tilegym.ops.cutile.op"]
    assert helper.reduce(launch) == ["tilegym.ops.cutile.helper"]


def test_a_tensor_of_other_bytes_is_paired_with_one_of_its_extent_not_an_unused_empty_one(
    silu_checkout, tmp_path, carrying_gives_way
):
    """The reference hands its kernel an empty placeholder (moe's a_scale) before the tensor an
    earlier op filled (expert_ids, whose C call the dry run does not run): the port's tensor, its
    bytes unlike the reference's, is paired by dtype and extent, not with the placeholder."""
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")  # the C calls below are its (the row plan)
    signature = read_kernel(target.kernel_rs)
    cases = _records(256, 512, _c_call(plan, 256, 512))
    reference = next(iter(cases.values()))["launches"][0]
    reference["params"].insert(1, "scale")
    reference["args"].insert(1, _desc([0], "float16", "empty"))
    found = dry_compare.compare(plan, signature, cases)
    assert found.identical, [dry_result.describe_row(r) for r in found.differences]
    paired = {r.reference for r in found.rows if r.param == "out_ptr" and r.what in ("dtype", "numel")}
    assert paired == {"y: float16", "y: 131072"}


# Ours, shaped as TileGym's test_moe: the fused MoE aligns the tokens per expert
# (moe_align_block_size) and then runs the GEMM moe's kernel.rs ports.
MOE_TEST = """
import pytest
import torch

from tilegym import set_backend
from tilegym.ops.moe_interface import fused_moe

_backends = ["cutile"]


@pytest.mark.parametrize("backend", _backends)
def test_op(backend):
    set_backend(backend)
    torch.manual_seed(0)
    tokens, hidden, inner, experts, top_k = 16, 128, 64, 4, 2
    x = torch.randn(tokens, hidden, dtype=torch.float16, device="cuda")
    w1 = torch.randn(experts, inner * 2, hidden, dtype=torch.float16, device="cuda")
    w2 = torch.randn(experts, hidden, inner, dtype=torch.float16, device="cuda")
    ids = torch.randint(0, experts, (tokens, top_k), dtype=torch.long, device="cuda")
    weights = torch.softmax(torch.randn(tokens, top_k, device="cuda"), dim=-1).to(torch.float16)
    fused_moe(x, w1, w2, weights, ids)
"""


@pytest.mark.slow
def test_a_test_that_needs_another_ops_port_is_blocked_naming_that_op(
    tmp_path, tilegym_wheel, python, cargo_target_dir
):
    """test_moe calls moe_align_block_size before the GEMM moe's kernel.rs ports: with moe alone
    ported, TileGym's dispatcher has no cutile-rs moe_align_block_size. Neither the wrapper's fault
    nor the kernel's: the verdict names the op to port."""
    from checkout_support import checkout_with_kernels

    kernels = Path(__file__).parent / "fixtures" / "tilegym_ops"
    repo = checkout_with_kernels(tmp_path / "tg", tilegym_wheel, kernels, ["moe"])
    (repo / "tests" / "ops" / "test_moe.py").write_text(MOE_TEST)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "a fused MoE test"], cwd=repo, check=True)
    options = PortOptions(
        repo=repo, kernel="moe", out_root=tmp_path / "out", python=python,
        cargo_target_dir=cargo_target_dir, echo=lambda _: None,
    )  # fmt: skip
    (result,) = port(options)
    verdict = result.verdict
    assert (verdict.kind, verdict.klass) == (VerdictKind.BLOCKED, "host"), verdict
    assert verdict.reason.startswith("the tests call moe_align_block_size, which no cutile-rs backend")
    assert "src/tilegym/ops/cutile/moe_align_block.py" in verdict.reason
    assert verdict.fix == (
        "port moe_align_block too: add src/tilegym/ops/cutile_rs/moe_align_block_kernel/kernel.rs in "
        "this pull request, or land its port first"
    )
    assert [s.name for s in result.stages][-1] == "dry run" and result.tests is None


def test_a_column_major_input_is_the_host_s_fault_with_both_stride_tuples(
    silu_checkout, tmp_path, carrying_gives_way
):
    """silu_and_mul's kernel takes raw pointers: it sees the memory's order, not a shape. A wrapper
    that hands it the input as a column-major view of the same values launches otherwise than the
    reference, whose input is row-major: FAIL (host) before any GPU time, with both strides."""
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")  # the C calls below are its (the row plan)
    signature = read_kernel(target.kernel_rs)
    column_major = {**_desc([256, 1024], "float16", "in"), "strides": [1, 256]}
    cases = _records(256, 512, _c_call(plan, 256, 512, inp=column_major))
    found = dry_compare.compare(plan, signature, cases)
    (row,) = found.differences
    assert (row.param, row.what) == ("in_ptr", "contiguous")
    assert row.reference == "x: True (strides (1024, 1))"
    assert row.cutile_rs == "False (strides (1, 256))"
    stop = dry.stop_for(found, [])
    assert (stop.kind, stop.klass) == ("FAIL", "host")
    assert "(1, 256)" in stop.reason and "(1024, 1)" in stop.reason


def test_a_tensor_kernel_rs_cannot_take_as_the_reference_passes_it_is_the_kernel_s(
    silu_checkout, tmp_path, carrying_gives_way
):
    """The reference hands the kernel a float32 output beside float16 inputs, and the port passes
    the same: equal launches, but kernel.rs declares the output in the element type E it dispatches
    on the input's (float16). The launcher would refuse it on the GPU (rc -6): it is kernel.rs's to
    fix, FAIL (kernel) naming the parameter and both dtypes, found on the CPU."""
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")  # the C calls below are its (the row plan)
    signature = read_kernel(target.kernel_rs)
    cases = _records(256, 512, _c_call(plan, 256, 512, out=_desc([256, 512], "float32", "fresh-2")))
    reference = next(iter(cases.values()))["launches"][0]
    reference["args"][1] = _desc([256, 512], "float32", "fresh-1")
    found = dry_compare.compare(plan, signature, cases)
    assert found.host_differences == []
    (row,) = found.kernel_differences
    assert (row.param, row.reference, row.cutile_rs) == (
        "out_ptr",
        "kernel.rs declares E (the dispatched float16)",
        "float32",
    )
    stop = dry.stop_for(found, [])
    assert (stop.kind, stop.klass) == ("FAIL", "kernel")
    assert "out_ptr" in stop.reason and "float16" in stop.reason and "float32" in stop.reason
    assert "kernel.rs cannot take it" in found.headline()


def test_a_null_descriptor_is_refused_as_ffi_rs_refuses_it(silu_checkout, tmp_path, carrying_gives_way):
    """ffi.rs borrows every descriptor before it chooses a variant: a wrapper that passes a null one
    (a carried launch of one entry, the other entry's tensors left out) is refused on the CPU, as
    the launcher refuses it on the GPU (rc -5), not found equal."""
    target = Target(silu_checkout, "silu_and_mul")
    plan, _facts, _co = make_plan(target, tmp_path / "plan")  # the C calls below are its (the row plan)
    signature = read_kernel(target.kernel_rs)
    found = dry_compare.compare(plan, signature, _records(256, 512, _c_call(plan, 256, 512, out=None)))
    assert not found.identical
    assert any("NULL_PTR (a null descriptor for out)" in r.cutile_rs for r in found.differences)
    assert dry.stop_for(found, []).klass == "host"
