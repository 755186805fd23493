"""The five cutile-rs ops of tilegym 1.5.1, from a tree where only their kernel.rs is present.

agent-d generates every host side (silu_and_mul, swiglu and matmul from inference alone; bmm and
attention_sink with the host contracts in tests/fixtures/contracts), the aggregated crate with all
five generated ffi.rs compiles against the real cutile 0.2.0 crates, each symbol is exported and
each ABI smoke check passes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from port_support import port_json

from bot.apply import apply
from bot.cli import main
from bot.demo import assemble_checkout
from bot.emit import generate
from bot.pipeline import make_plan
from bot.plan import sweep
from bot.report.validator import exported_functions
from bot.targets import checkout
from bot.targets.discover import discover
from bot.targets.types import Target

pytestmark = pytest.mark.slow
OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]
CONTRACTS = Path(__file__).parent / "fixtures" / "contracts"


@pytest.fixture()
def five(tmp_path, tilegym_wheel):
    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, OPS, OPS).repo
    for contract in CONTRACTS.glob("*.yaml"):
        shutil.copy(
            contract, repo / "src/tilegym/ops/cutile_rs" / f"{contract.stem}_kernel" / "host_contract.yaml"
        )
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "host contracts"], cwd=repo, check=True)
    return repo


def _plan(repo: Path, op: str):
    return make_plan(Target(repo, op), repo / "out" / op)[0]


def test_contract_lines_and_inferred_abi(five):
    lines = {op: _plan(five, op).contract_lines for op in OPS}
    assert lines["silu_and_mul"] == lines["swiglu"] == lines["matmul"] == 0
    assert all(lines[op] > 0 for op in ("bmm", "attention_sink"))
    matmul = _plan(five, "matmul")
    assert not matmul.missing
    assert [n for n, _ in matmul.ffi.c_params()][:3] == ["c", "a", "b"]  # outputs first
    assert {d.name: d.expr for d in matmul.ffi.derived}["cast_tf32"] == "cast_tf32(a)"
    assert [v.when for v in matmul.ffi.variants] == ["persistent != 0", "else"]
    assert matmul.carry is not None  # the wrapper: the cuTile reference's host code, carried over
    bmm = _plan(five, "bmm")
    assert {d.name: d.expr for d in bmm.ffi.derived}["rt_m"] == "sel(trans_a != 0, dim(a,2), dim(a,1))"
    attention = _plan(five, "attention_sink")
    start_q = next(t for t in attention.ffi.tensors if t.name == "start_q")
    assert (start_q.elem, start_q.rank) == ("i32", 1)
    assert [s.name for s in attention.ffi.scalars if s.role == "grid"] == ["grid_x", "grid_y"]


def test_all_five_generate_build_export_and_smoke(five, cargo_target_dir, capsys):
    code, err, results = port_json(five, "HEAD~2", cargo_target_dir, capsys)
    assert code == 3, err  # BLOCKED: only because this machine has no GPU
    for op in OPS:
        stages = {s["name"]: s for s in results[op]["stages"]}
        assert stages["build"]["status"] == "ok" and f"cutile_{op} exported" in stages["build"]["detail"]
        assert "1 build for 5 kernels" in stages["build"]["detail"], stages["build"]  # one build per change
        assert stages["abi smoke"]["status"] == "ok" and "returned -5" in stages["abi smoke"]["detail"]
        assert (results[op]["verdict"], results[op]["class"]) == ("BLOCKED", "env")
        assert results[op]["reason"].startswith("no CUDA GPU"), results[op]["reason"]
    so = five / "src/tilegym/ops/cutile_rs/cutile_kernels/target/release/libcutile_kernels.so"
    assert {f"cutile_{op}" for op in OPS} <= set(exported_functions(so))
    for op in OPS:  # rustc has nothing to say about the generated launchers
        log = (five / "cutile_kernel_out" / op / "build_cargo.txt").read_text()
        assert not re.findall(r"--> src/\.\./\.\./\w+_kernel/ffi\.rs", log), log
    lib_rs = (five / "src/tilegym/ops/cutile_rs/cutile_kernels/src/lib.rs").read_text()
    assert all(f"mod {op} {{" in lib_rs for op in OPS)


def test_missing_contract_is_blocked_host_with_a_draft(five, capsys, cargo_target_dir):
    # bmm is read from its cuTile reference since 091e233: without that reference, only a
    # contract can say what it said
    (five / "src/tilegym/ops/cutile_rs/bmm_kernel/host_contract.yaml").unlink()
    (five / "src/tilegym/ops/cutile/bmm.py").write_text('"""No reference here."""\n')
    code = main(["port", "--repo", str(five), "--kernel", "bmm", "--cargo-target-dir", str(cargo_target_dir)])
    out = capsys.readouterr().err
    assert code == 3
    assert "BLOCKED (block_class: host): cannot infer: python.alloc" in out
    assert (
        "kernel.rs compiles (cargo build, without a launcher)" in out
    )  # compiled before the porter is asked
    draft = (five / "src/tilegym/ops/cutile_rs/bmm_kernel/host_contract.draft.yaml").read_text()
    assert "python.alloc: null  # MISSING" in draft and "python.args.num_programs: null  # MISSING" in draft


def test_generation_benchmark_still_runs(five):
    """benchmarks/generate_speed.py drives the stages directly; keep it in step with their signatures."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "generate_speed.py"
    spec = importlib.util.spec_from_file_location("generate_speed", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    marks = bench.generate_once(five, "matmul")
    assert set(marks) == {"read", "discover", "plan", "render", "format", "total"}
    assert marks["total"] >= marks["plan"] > 0


def test_bmm_and_attention_sink_need_no_contract(five):
    """Carried from their cuTile references alone; bmm keeps the checks the hand-written host makes."""
    for op in ("bmm", "attention_sink"):
        (five / "src/tilegym/ops/cutile_rs" / f"{op}_kernel" / "host_contract.yaml").unlink()
    bmm, attention = _plan(five, "bmm"), _plan(five, "attention_sink")
    for plan in (bmm, attention):
        assert plan.missing == [] and plan.contract_lines == 0, [m.key for m in plan.missing]
        assert plan.carry is not None
    # the transpose flags are 0 or 1 in the FFI; batch and K agree in the carried reference's code
    assert {"when": "trans_a != 0 and trans_a != 1", "rc": "INVALID_ARGS"} in bmm.ffi.checks
    target = Target(five, "bmm")
    files = apply.formatted(generate.generate(target, bmm, checkout.inspect(target, discover(target))), five)
    wrapper = next(f.content for f in files.files if f.path.endswith("ops/cutile_rs/bmm.py"))
    assert 'assert K_A == K_B, "incompatible dimensions"' in wrapper
    assert 'assert Q_A == Q_B, "incompatible dimensions"' in wrapper
    # an autotuned search honours TileGym's switch, and sweeps at most the limit of its configs
    assert "configs = configs[:1] if is_autotune_disabled() else _rs_sweep(configs)" in wrapper
    assert f"def _rs_sweep(configs, limit={sweep.SWEEP_LIMIT}):" in wrapper
