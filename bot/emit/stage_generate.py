"""Stages "kernel signature" to "apply" of one kernel: everything before the build.

The kernel's signature (refused before the reader when it uses what a kernel may not), the
checkout, the facts in their order of authority, the launch plan, the generated files, applied
to the checkout. ``make_plan`` and ``generate_only`` are the same steps without a port around
them (``agent-d plan``, the finalizer's trusted regeneration).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.apply import apply
from bot.build import annotations
from bot.classify import launch_diff
from bot.classify.types import VerdictKind
from bot.emit import generate, soundness
from bot.emit.draft import write_draft
from bot.errors import Blocked, Failed, StageStop
from bot.infer import analysis, ops_py, test_dtypes
from bot.infer.contract import host_contract
from bot.infer.facts import Facts
from bot.infer.reference import op as reference_op
from bot.job import Job, PortOptions
from bot.plan import build_plan
from bot.read.reader import KernelRefused, ReaderError, ReaderUnavailable, read_kernel
from bot.targets import checkout, discover
from bot.targets.types import Discovery, Target

PORTER = ("contract", "agent_b")  # the sources a porter writes


def generate_files(job: Job) -> None:
    """Signature, checkout, facts, plan, generated files, applied: everything before the build."""
    target, run, result, out_dir = job.target, job.run, job.result, job.out_dir
    found = job.found
    assert found is not None
    signature = run.stage(
        "kernel signature",
        lambda: read_signature(target),
        lambda s: f"{s.module}: " + ", ".join(e.name for e in s.entries),
    )
    job.signature = signature
    co = run.stage("checkout", lambda: checkout.inspect(target, found), lambda c: f"ffi style {c.style}")
    facts = run.stage(
        "facts", lambda: gather_facts(target, found, out_dir), lambda f: f"{len(f.items)} facts"
    )
    plan = run.stage(
        "launch plan",
        lambda: build_plan(target, signature, facts, co),
        lambda p: f"{len(p.ffi.c_params())} C parameters, {len(p.missing)} missing",
    )
    result.plan = plan
    result.launch_differences = contract_differences(target, found, out_dir, signature, co, facts, plan)
    if plan.missing:
        draft = write_draft(target, plan, facts)
        names = ", ".join(m.key for m in plan.missing)
        # the porter is asked only about a kernel that compiles: the build compiles it first
        job.awaiting_facts = Blocked(
            "host",
            f"cannot infer: {names}; fill {draft.relative_to(target.repo)}",
            host_fix=f"copy {draft.name} to host_contract.yaml and fill the marked keys",
        )
        return
    run.stage("check plan", lambda: soundness.check_plan(plan), lambda _: "every wrapper name bound")
    files = run.stage(
        "generate",
        lambda: apply.formatted(generate.generate(target, plan, co), target.repo),
        lambda g: f"{len(g.files)} files",
    )
    run.stage(
        "check generated",
        lambda: soundness.check_files(files, target.repo),
        lambda _: f"ruff --select {soundness.RUFF_RULES} clean",
    )
    run.stage(
        "check contents",
        lambda: soundness.check_contents(files, plan),
        lambda _: "only what the emitters write",
    )
    applied = run.stage(
        "apply",
        lambda: apply.apply(files, target.repo, force=job.force),
        lambda a: f"{len(a.changed)} changed, {len(a.unchanged)} unchanged",
    )
    result.changed_files = applied.changed
    job.applied = applied
    shutil.copy2(target.ffi_rs, out_dir / "ffi.rs")


def contract_differences(
    target: Target, found: Discovery, out_dir: Path, signature, co, facts, plan
) -> list[str]:
    """What the porter's contract changes in the launch: the classifier's evidence against the host side.
    A contract that states the wrapper (any ``python.*`` key) is compared with the plan's own wrapper
    half without it (a row kernel has one); a carried plan with the carried plan without it."""
    if not any(f.source.kind in PORTER for f in facts.items.values()):
        return []
    unaided = gather_facts(target, found, out_dir, porter=False)
    return launch_diff.differences(
        plan, build_plan(target, signature, unaided, co, own_half=plan.carry is None)
    )


def read_signature(target: Target):
    try:
        return read_kernel(target.kernel_rs)
    except KernelRefused as exc:  # the reader's allow-list, before cargo ever sees the file
        raise Failed(
            "kernel",
            f"kernel.rs holds what a kernel may not: {'; '.join(exc.found[:5])}",
            followup=f"remove from {target.op}_kernel/kernel.rs: {exc.found[0]}",
            annotations=annotations.from_refusals(target, exc.refusals),
        ) from None
    except ReaderError as exc:
        raise Failed(
            "kernel",
            f"kernel.rs does not parse: {exc}",
            followup=f"fix {target.op}_kernel/kernel.rs: {exc}",
            annotations=annotations.from_parse_error(target, exc.line, exc.column, exc.message),
        ) from None
    except ReaderUnavailable as exc:
        raise Blocked("env", f"the kernel reader is unavailable: {exc}") from None


def make_plan(target: Target, out_dir: Path):
    """Signature, checkout facts and sources merged into the launch plan (what ``agent-d plan`` shows).

    Returns ``(plan, facts, checkout)``; raises ``StageStop`` like the pipeline's stages.
    """
    found = discover.discover(target)
    co = checkout.inspect(target, found)
    signature = read_signature(target)
    facts = gather_facts(target, found, out_dir)
    return build_plan(target, signature, facts, co), facts, co


def generate_only(repo: Path, op: str) -> str:
    """Write ``op``'s generated files into ``repo`` as a port does, building and running nothing.

    The finalizer's trusted copy of the port's "generate" and "apply" stages: same facts, same
    plan, same formatting. Returns why nothing was written ("" when the files were written);
    an environment problem (no reader, no rustfmt) raises, since then no answer is possible.
    """
    target = Target(repo, op)
    try:
        if not target.kernel_rs.is_file():
            return f"{target.kernel_rs.relative_to(repo)} does not exist"
        plan, _facts, co = make_plan(target, PortOptions(repo=repo).out_dir(op))
        if plan.missing:
            return "cannot infer: " + ", ".join(m.key for m in plan.missing)
        soundness.check_plan(plan)
        files = apply.formatted(generate.generate(target, plan, co), repo)
        soundness.check_files(files, repo)
        soundness.check_contents(files, plan)
        apply.apply(files, repo)
    except StageStop as stop:
        if stop.kind == VerdictKind.BLOCKED.value and stop.klass == "env":
            raise
        return f"{stop.kind} {stop.klass}: {stop.reason}"
    return ""


def gather_facts(target: Target, found: Discovery, out_dir: Path, porter: bool = True) -> Facts:
    """``porter=False``: without the porter's contract and stage B's block (what agent-d reads alone)."""
    facts = Facts()
    if porter:
        host_contract.gather(target, facts)
        host_contract.gather_agent_b(out_dir / "reports" / "agent_b.md", facts)
    analysis.gather(out_dir / "reference" / "analysis.json", facts)
    ops_py.gather(target, found, facts)
    reference_op.gather(target, facts, reference_op.load(target, found))
    test_dtypes.gather(target, found, facts)
    return facts
