"""``verify``: the kernel's library built elsewhere and its host files taken as they are (GPU runners).

Instead of generation and the build: the built library's export is checked, and the contract's
launch differences (the classifier's evidence) are read again from the checkout.
"""

from __future__ import annotations

import shutil

from bot.build import build
from bot.build.types import BuildResult
from bot.emit import stage_generate
from bot.errors import Blocked, Failed
from bot.infer.contract import host_contract
from bot.job import Job
from bot.plan import build_plan
from bot.report.validator.elf import exported_functions
from bot.targets import checkout
from bot.targets.types import Target


def existing(job: Job) -> None:
    """``verify``: the library built elsewhere; the host files are taken as they are."""
    target = job.target
    job.result.build = job.run.stage(
        "built library", lambda: _existing_build(target), lambda b: f"{target.symbol} exported"
    )
    shutil.copy2(target.ffi_rs, job.out_dir / "ffi.rs")
    job.result.launch_differences, job.result.launch_unknown = verified_differences(job)


def verified_differences(job: Job) -> tuple[list[str], str]:
    """``verify``: the same evidence, read again from the checkout. When it cannot be read, the
    differences are none and, if the kernel has a contract, the second value says why: the
    classifier must then not claim the host launched the kernel as the reference does."""
    target, found = job.target, job.found
    assert found is not None
    try:
        signature = stage_generate.read_signature(target)
        co = checkout.inspect(target, found)
        facts = stage_generate.gather_facts(target, found, job.out_dir)
        plan = build_plan(target, signature, facts, co)
        job.signature, job.result.plan = signature, plan  # the dry run reads the launch through them
        return stage_generate.contract_differences(target, found, job.out_dir, signature, co, facts, plan), ""
    except Exception as exc:  # the tests still run; the classifier then has no contract evidence
        why = f"{type(exc).__name__}: {exc}"
        job.run.log.append(f"contract differences not read: {why}")
        return [], why if (target.kernel_dir / host_contract.CONTRACT_NAME).is_file() else ""


def _existing_build(target: Target) -> BuildResult:
    """``verify``: the library built elsewhere (no cargo here); its export is still checked."""
    so = target.crate_dir / "target" / "release" / build.SO_NAME
    if not so.is_file():
        raise Blocked("host", f"verify needs a built library: {so.relative_to(target.repo)} is missing")
    if not target.ffi_rs.is_file() or not target.wrapper_py.is_file():
        raise Blocked(
            "host", f"verify needs the generated host files of {target.op}: run `agent-d port` first"
        )
    symbols = exported_functions(so)
    if target.symbol not in symbols:
        raise Failed("host", f"{so.name} does not export {target.symbol} (ELF .dynsym)")
    return BuildResult(True, str(so), "(built before verify)", 0.0, "", {}, True, symbols)
