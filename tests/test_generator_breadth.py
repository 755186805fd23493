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

from bot.cli import main
from bot.demo import assemble_checkout
from bot.pipeline import make_plan
from bot.plan import sweep
from bot.report.validator import exported_functions
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
    """The plan's own wrapper half (``--no-carry``), whose reading of the references these tests pin
    while it is retired (docs/carry.md): a carried plan keeps no python steps of its own."""
    return make_plan(Target(repo, op), repo / "out" / op, carry_always=False)[0]


def test_contract_lines_and_inferred_abi(five):
    lines = {op: _plan(five, op).contract_lines for op in OPS}
    assert lines["silu_and_mul"] == lines["swiglu"] == lines["matmul"] == 0
    assert all(lines[op] > 0 for op in ("bmm", "attention_sink"))
    matmul = _plan(five, "matmul")
    assert not matmul.missing
    assert [n for n, _ in matmul.ffi.c_params()][:3] == ["c", "a", "b"]  # outputs first
    assert {d.name: d.expr for d in matmul.ffi.derived}["cast_tf32"] == "cast_tf32(a)"
    assert [v.when for v in matmul.ffi.variants] == ["persistent != 0", "else"]
    # the wrapper side read from the cuTile reference ops/cutile/matmul.py
    py = matmul.python
    assert {k: s.kind for k, s in py.sources.items()} == {
        "python.signature": "ops_py",
        "python.alloc": "reference",
        "python.configs": "reference",
        "python.steps": "reference",
    }
    assert py.alloc == {"c": "torch.empty((M, N), device=a.device, dtype=a.dtype)"}
    assert [g["when"].split(" and ")[0] for g in py.configs][-1] == "always"
    assert all(
        set(c) >= {"BM", "BN", "BK", "NUM_CTAS", "OCCUPANCY"} for g in py.configs for c in g["configs"]
    )
    assert py.ffi_args["bm"] == "cfg.BM" and py.ffi_args["group_size_m"] == "getattr(cfg, 'GROUP_SIZE_M', 0)"
    assert "cdiv(M, cfg.BM) * cdiv(N, cfg.BN)" in py.ffi_args["num_programs"]
    assert any(s.kind == "check" and s.expr == "trans_a" for s in py.steps)  # kernel.rs has no transpose
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
    """Read from their cuTile references alone; bmm keeps the checks the hand-written host makes."""
    from bot.emit import wrapper_py

    for op in ("bmm", "attention_sink"):
        (five / "src/tilegym/ops/cutile_rs" / f"{op}_kernel" / "host_contract.yaml").unlink()
    bmm, attention = _plan(five, "bmm"), _plan(five, "attention_sink")
    for plan in (bmm, attention):
        assert plan.missing == [] and plan.contract_lines == 0, [m.key for m in plan.missing]
    # the transpose flags are 0 or 1 in the FFI; batch and K agree in the wrapper
    assert {"when": "trans_a != 0 and trans_a != 1", "rc": "INVALID_ARGS"} in bmm.ffi.checks
    checks = [s.expr for s in bmm.python.steps if s.kind == "check"]
    assert "not (K_A == K_B)" in checks and "not (Q_A == Q_B)" in checks
    assert bmm.python.ffi_args["trans_a"] == "int(bool(transpose_a))"  # ops.py's default is None
    # an autotuned wrapper honours TileGym's switch: the first config only when it is off
    assert "    if is_autotune_disabled():\n        configs = configs[:1]\n" in wrapper_py.render(bmm)
    # the reference's 18 sm_90 configs are more than a first call compiles inside pytest's 60 s
    sm90 = next(g for g in bmm.python.configs if "(9, 0)" in g["when"])
    assert len(sm90["configs"]) == sweep.SWEEP_LIMIT
    assert "8 of the reference's 18 configs" in bmm.python.sources["python.configs"].detail
    assert "# 8 of the reference's 18 configs (sweep limit 8" in wrapper_py.render(bmm)
