"""Precise env reasons: each way a machine cannot prove a kernel has its own reason and fix.

The probe runs for real, in a real interpreter. What the machine lacks is arranged around it: a
wrapper script that puts our own ``libcuda.so.1`` (a few C lines: the driver version and the
device count it reports) on LD_LIBRARY_PATH, and a ``torch`` module of our making on PYTHONPATH.
"""

from __future__ import annotations

import pytest
from env_support import interpreter, no_tileiras_env, with_tileiras
from validator_support import needs_cc

from bot.classify import classify
from bot.classify.types import VerdictKind
from bot.testing import envcheck, testrun
from bot.testing.types import TestResult


def only(problems: list[envcheck.EnvProblem]) -> envcheck.EnvProblem:
    assert len(problems) == 1, problems
    return problems[0]


def test_interpreter_not_found():
    problem = only(testrun.probe("/nonexistent/bin/python3").env_problems())
    assert problem.reason == "interpreter not found: /nonexistent/bin/python3"
    assert "--python" in problem.fix


@needs_cc
def test_torch_not_importable_is_not_called_no_gpu(tmp_path):
    python = interpreter(tmp_path / "i", torch="broken")
    problem = only(testrun.probe(python, with_tileiras(tmp_path)).env_problems())
    assert (
        problem.reason
        == f"torch is not importable by {python} (libcudart.so.13: cannot open shared object file)"
    )
    assert "GPU" not in problem.reason and "install a CUDA build of torch" in problem.fix


@needs_cc
def test_no_cuda_device_visible(tmp_path):
    python = interpreter(tmp_path / "i", gpus=0)
    problem = only(testrun.probe(python, with_tileiras(tmp_path)).env_problems())
    assert problem.reason == "no CUDA GPU on this machine (the driver reports 0 devices)"
    assert "nvidia-smi" in problem.fix and "CUDA_VISIBLE_DEVICES" in problem.fix


@needs_cc
def test_no_driver_at_all_and_no_torch_names_both(tmp_path):
    python = interpreter(tmp_path / "i", gpus=None, torch=None)
    reasons = [p.reason for p in testrun.probe(python, with_tileiras(tmp_path)).env_problems()]
    assert reasons[0].startswith("no CUDA GPU on this machine (libcuda.so.1 not loadable")
    assert reasons[1] == f"torch is not importable by {python} (No module named 'torch')"


@needs_cc
def test_driver_too_old_for_the_toolchain(tmp_path):
    python = interpreter(tmp_path / "i", driver=12080)
    problem = only(testrun.probe(python, with_tileiras(tmp_path)).env_problems())
    assert problem.reason == (
        "CUDA driver too old for the toolchain: it supports CUDA 12.8, the kernels are built against CUDA 13.0"
    )
    assert "580" in problem.fix


@needs_cc
def test_tile_toolchain_missing(tmp_path):
    python = interpreter(tmp_path / "i")
    problem = only(testrun.probe(python, no_tileiras_env()).env_problems())
    assert (
        problem.reason
        == "the CUDA tile toolchain is missing: no tileiras in $CUTILE_TILEIRAS_PATH or on PATH"
    )
    assert "nvidia-cuda-tileiras" in problem.fix and "CUDA_HOME" in problem.fix


@needs_cc
def test_torch_without_cuda(tmp_path):
    python = interpreter(tmp_path / "i", torch="cpu")
    problem = only(testrun.probe(python, with_tileiras(tmp_path)).env_problems())
    assert problem.reason == f"torch 2.11.0+cu130 under {python} sees no CUDA device (a CPU-only build?)"


@needs_cc
def test_a_ready_machine_has_no_problem(tmp_path):
    python = interpreter(tmp_path / "i")
    interp = testrun.probe(python, with_tileiras(tmp_path))
    assert interp.env_problems() == [] and interp.env_problem() == ""
    assert (interp.device, interp.driver_version) == ("Fake H200 (sm_90)", 13000)


@pytest.mark.parametrize(("encoded", "shown"), [(13000, "13.0"), (12080, "12.8"), (13020, "13.2")])
def test_driver_versions_read_as_cuda_versions(encoded, shown):
    assert envcheck.cuda_version(encoded) == shown


@needs_cc
def test_the_verdict_says_each_reason_once_and_each_fix_once(tmp_path):
    python = interpreter(tmp_path / "i", gpus=0, torch=None)
    interp = testrun.probe(python, with_tileiras(tmp_path))
    result = TestResult(True, "pytest", 4, "log", env_problem=interp.env_problem(), env_fix=interp.env_fix())
    verdict = classify.classify(result, [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.BLOCKED, "env")
    assert len(interp.env_problems()) >= 2
    said = f"{verdict.reason}\n{verdict.fix}"
    for problem in interp.env_problems():
        assert said.count(problem.reason) == 1 and said.count(problem.fix) == 1, said
    assert problem.reason in verdict.reason and problem.fix in verdict.fix
    assert verdict.reason.startswith("no CUDA GPU on this machine (the driver reports 0 devices); ")


@needs_cc
def test_a_cuda_home_without_the_tile_toolchain_is_named_before_any_test(tmp_path):
    python = interpreter(tmp_path / "i")
    env = {**with_tileiras(tmp_path), "CUDA_HOME": str(tmp_path / "elsewhere")}
    problem = only(testrun.probe(python, env).env_problems())
    assert problem.reason == (
        f"the CUDA tile toolchain is incomplete: CUDA_HOME={tmp_path / 'elsewhere'} holds no libnvvm, "
        "so tileiras cannot compile a kernel"
    )
    assert "set CUDA_HOME to the folder of the tile toolchain" in problem.fix
    # without CUDA_HOME, the folder around tileiras is where it looks: a full toolkit passes
    unset = {k: v for k, v in with_tileiras(tmp_path).items() if k != "CUDA_HOME"}
    assert testrun.probe(python, unset).env_problems() == []
    bare = tmp_path / "bare" / "tileiras"
    bare.parent.mkdir()
    bare.write_text("#!/bin/sh\nexit 0\n")
    bare.chmod(0o755)
    alone = {**unset, envcheck.TILEIRAS_ENV: str(bare)}
    assert "CUDA_HOME is not set" in only(testrun.probe(python, alone).env_problems()).reason


@needs_cc
def test_the_verdicts_fix_line_is_every_fix_of_the_runner(tmp_path):
    python = interpreter(tmp_path / "i", gpus=0, torch=None)
    interp = testrun.probe(python, with_tileiras(tmp_path))
    result = TestResult(True, "pytest", 4, "log", env_problem=interp.env_problem(), env_fix=interp.env_fix())
    verdict = classify.classify(result, [])
    assert verdict.fix == "; ".join(p.fix for p in interp.env_problems())
    assert "CUDA_VISIBLE_DEVICES" in verdict.fix and "install a CUDA build of torch" in verdict.fix
