"""The device compile as a stage of the port: the launches the dry run recorded for agent-d's port
(entry, generics, strides) compiled for the GPU on the CPU, after the dry run and before pytest.
A step that fails is the kernel's: ``FAIL (kernel)`` with the step, the message and the entry's line.
"""

from __future__ import annotations

from pathlib import Path

from bot.build import build, device_compile
from bot.errors import Failed
from bot.job import Job


def jobs_of(launches: list) -> list[device_compile.CompileJob]:
    """One job per distinct (entry, generics, tensor strides) of the dry run's launches."""
    jobs = []
    for case, launch in launches:
        if not launch.generics:
            continue
        strides = tuple(
            (name, tuple(value["strides"]))
            for name, value in launch.values.items()
            if launch.kinds.get(name) == "ten" and isinstance(value, dict) and "strides" in value
        )
        jobs.append(device_compile.CompileJob(launch.entry, launch.generics, strides, case))
    unique: dict[tuple, device_compile.CompileJob] = {}
    for job in jobs:
        unique.setdefault((job.entry, job.generics, job.strides), job)
    return list(unique.values())


def stage(job: Job, tools, cargo_target_dir: Path | None) -> None:
    found, signature = job.result.dry_run, job.signature
    if tools is None:  # `agent-d verify` builds nothing: the library it tests was compiled already
        job.run.record("device compile", 0.0, "skipped", "no toolchain: this run built nothing")
        return
    if found is None or not found.launches or signature is None:
        job.run.record("device compile", 0.0, "skipped", "no launch recorded by the dry run to compile")
        return
    compile_jobs = jobs_of(found.launches)
    if not compile_jobs:
        job.run.record(
            "device compile", 0.0, "skipped", "no launch whose generics the dry run could evaluate"
        )
        return
    target = job.target
    target_dir = cargo_target_dir or target.crate_dir / "target"

    def compiled():
        with build.exclusive(target_dir, job.run.echo):
            return device_compile.run(
                target.op, target.kernel_rs, signature.module, compile_jobs, target.crate_dir / "Cargo.toml",
                tools, target_dir,
            )  # fmt: skip

    outcomes = job.run.stage(
        "device compile",
        compiled,
        lambda o: o if isinstance(o, str) else f"{len(o)} launch(es) for {device_compile.arch()}",
        status=lambda o: "skipped" if isinstance(o, str) else ("ok" if all(x.ok for x in o) else "failed"),
    )
    if isinstance(outcomes, str):  # the probe could not be built here: the environment's, said, not judged
        job.run.log.append(f"device compile not run: {outcomes}")
        return
    failed = [o for o in outcomes if not o.ok]
    if failed:
        first = failed[0]
        line = next((e.line for e in signature.entries if e.name == first.job.entry), 0)
        where = (
            f"{target.kernel_rs.relative_to(target.repo)}:{line}"
            if line
            else str(target.kernel_rs.relative_to(target.repo))
        )
        generics = ", ".join(first.job.generics)
        raise Failed(
            "kernel",
            f"the kernel does not compile for {device_compile.arch()} on the CPU: entry `{first.job.entry}` "
            f"<{generics}> ({first.job.case or 'a launch'}) fails at the {first.step} step: {first.message}",
            followup=f"fix {where}: {first.message}",
        )
