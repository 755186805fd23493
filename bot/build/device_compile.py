"""Stage "device compile": each kernel.rs entry compiled for the runner's GPU on the CPU, with the
generics and strides its launches pass, before any GPU time.

cutile 0.2.0 lowers an entry to Tile IR and writes its bytecode without a GPU
(``cutile::compile_api::KernelCompiler``); ``tileiras``, a host program, compiles the bytecode for
an arch (``sm_90`` unless ``AGENT_D_GPU_ARCH`` says otherwise) where it is installed. Only loading
the result needs the device. A small probe crate is generated beside the cargo target. It includes
kernel.rs by path, is built like the checkout's crate (same dependencies, same target folder, in
the sandbox) and compiles one job per line it prints. An error at any step is the kernel's:
``FAIL (kernel)`` with the step, the message and the entry's line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bot import sandbox
from bot.build.toolchain import Toolchain

ARCH_ENV = "AGENT_D_GPU_ARCH"
DEFAULT_ARCH = "sm_90"  # H100 and H200
MAX_JOBS = 16  # distinct (entry, generics, strides) compiled for one kernel
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GENERIC = re.compile(r"[A-Za-z0-9_.\-]{1,40}")


@dataclass(frozen=True)
class CompileJob:
    entry: str
    generics: tuple[str, ...]
    strides: tuple[tuple[str, tuple[int, ...]], ...] = ()
    case: str = ""  # the test case it came from, for the message


@dataclass(frozen=True)
class Outcome:
    job: CompileJob
    step: str  # ok | lower | bytecode | tileiras | panic
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.step == "ok"


def arch() -> str:
    wanted = os.environ.get(ARCH_ENV, "").strip()
    return wanted if re.fullmatch(r"sm_\d{2,3}[a-z]?", wanted) else DEFAULT_ARCH


def _rust_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def probe_source(kernel_rs: Path, module: str, jobs: list[CompileJob], target: str) -> str:
    """The probe's main.rs: each job compiled in turn, one ``JOB<TAB>i<TAB>step<TAB>message`` line
    each, its bytecode written to ``<out>/<i>.bc``. Names are identifiers and generics plain words
    (checked here), so nothing of kernel.rs reaches the probe but through ``#[path]``."""
    if not _IDENT.fullmatch(module):
        raise ValueError(f"module name {module!r} is not an identifier")
    lines = [
        f"#[path = {_rust_str(str(kernel_rs.resolve()))}]",
        "#[allow(dead_code, unused_imports, unused_variables)]",
        "mod kernel;",
        "",
        "use cutile::compile_api::KernelCompiler;",
        "",
        "fn report(i: usize, step: &str, message: &str) {",
        "    println!(\"JOB\\t{i}\\t{step}\\t{}\", message.replace(['\\n', '\\t'], \" \"));",
        "}",
        "",
        "fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {",
        "    p.downcast_ref::<&str>().map(|s| s.to_string())",
        '        .or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "panic".to_string())',
        "}",
        "",
        "fn main() {",
        "    std::panic::set_hook(Box::new(|_| {}));",
        '    let out = std::env::args().nth(1).expect("the bytecode folder");',
    ]
    for i, job in enumerate(jobs):
        if not _IDENT.fullmatch(job.entry) or not all(_GENERIC.fullmatch(g) for g in job.generics):
            raise ValueError(f"job {job}: an entry or generic agent-d does not write into Rust")
        generics = ", ".join(f"{_rust_str(g)}.to_string()" for g in job.generics)
        strides = ", ".join(
            f"({_rust_str(name)}, &[{', '.join(str(int(s)) for s in values)}][..])"
            for name, values in job.strides
            if _IDENT.fullmatch(name)
        )
        lines += [
            "    {",
            "        let compiled = std::panic::catch_unwind(|| {",
            f"            KernelCompiler::new(kernel::{module}::__module_ast_self, {_rust_str(module)}, "
            f"{_rust_str(job.entry)})",
            f"                .generics(vec![{generics}])",
            f"                .strides(&[{strides}])",
            f"                .target({_rust_str(target)})",
            "                .compile()",
            "        });",
            "        match compiled {",
            "            Ok(Ok(artifacts)) => match artifacts.bytecode() {",
            f'                Ok(bc) => match std::fs::write(format!("{{out}}/{i}.bc"), bc) {{',
            f'                    Ok(()) => report({i}, "ok", ""),',
            f'                    Err(e) => report({i}, "bytecode", &e.to_string()),',
            "                },",
            f'                Err(e) => report({i}, "bytecode", &e.to_string()),',
            "            },",
            f'            Ok(Err(e)) => report({i}, "lower", &e.to_string()),',
            f'            Err(p) => report({i}, "panic", &panic_text(p)),',
            "        }",
            "    }",
        ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def probe_manifest(name: str, dependencies: str) -> str:
    """The probe's Cargo.toml: the checkout crate's own ``[dependencies]`` (cutile pinned there)."""
    return (
        f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2024"\npublish = false\n\n'
        f'[[bin]]\nname = "{name}"\npath = "main.rs"\n\n[workspace]\n\n{dependencies.strip()}\n'
    )


def dependencies_of(cargo_toml: Path) -> str:
    """The ``[dependencies]`` table of the checkout crate's Cargo.toml, as written."""
    text = cargo_toml.read_text(encoding="utf-8")
    m = re.search(r"^\[dependencies\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if m is None:
        raise ValueError(f"{cargo_toml} has no [dependencies] table")
    return "[dependencies]" + m.group(1)


def run(
    op: str,
    kernel_rs: Path,
    module: str,
    jobs: list[CompileJob],
    crate_toml: Path,
    tools: Toolchain,
    target_dir: Path,
    timeout: float = 600.0,
) -> list[Outcome] | str:
    """Build the probe and compile ``jobs``; a string: why nothing could be compiled (the probe
    did not build or run: the environment's, not the kernel's)."""
    jobs = list(dict.fromkeys(jobs))[:MAX_JOBS]
    name = f"agent-d-device-compile-{op.replace('_', '-')}"
    crate = target_dir / "agent-d-device-compile" / op
    out = crate / "bytecode"
    shutil.rmtree(crate, ignore_errors=True)
    out.mkdir(parents=True)
    target = arch()
    (crate / "main.rs").write_text(probe_source(kernel_rs, module, jobs, target), encoding="utf-8")
    (crate / "Cargo.toml").write_text(probe_manifest(name, dependencies_of(crate_toml)), encoding="utf-8")
    lock = crate_toml.with_name("Cargo.lock")
    if lock.is_file():  # the versions the checkout's build resolved, all in the registry cache
        shutil.copy2(lock, crate / "Cargo.lock")
    env = tools.env()
    env["CARGO_TARGET_DIR"] = str(target_dir)
    env["CARGO_NET_OFFLINE"] = "true"  # the checkout's build fetched every dependency already
    build = [tools.cargo, "build", "--release", "--quiet"]
    readable = (kernel_rs.parent.resolve(),)
    try:
        made = subprocess.run(
            sandbox.wrap(build, crate, env, readable=readable, writable=(target_dir,)),
            cwd=crate, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            tail = (made.stderr.strip().splitlines() or [f"exit {made.returncode}"])[-3:]
            return "the device-compile probe did not build: " + " | ".join(tail)[:500]
        probe = target_dir / "release" / name
        ran = subprocess.run(
            sandbox.wrap([str(probe), str(out)], crate, env, writable=(out,)),
            cwd=crate, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"the device-compile probe outlasted {timeout:.0f} s"
    outcomes = _outcomes(ran.stdout, jobs)
    if len(outcomes) < len(jobs):
        tail = (ran.stderr.strip().splitlines() or [f"exit {ran.returncode}"])[-1]
        return f"the device-compile probe stopped after {len(outcomes)} of {len(jobs)} jobs: {tail[:300]}"
    return [_tileiras(o, out / f"{i}.bc", target, env) for i, o in enumerate(outcomes)]


def _outcomes(stdout: str, jobs: list[CompileJob]) -> list[Outcome]:
    found = []
    for line in stdout.splitlines():
        parts = line.split("\t", 3)
        if len(parts) == 4 and parts[0] == "JOB" and parts[1].isdigit() and int(parts[1]) < len(jobs):
            found.append(Outcome(jobs[int(parts[1])], parts[2], parts[3][:1000]))
    return found


def _tileiras(outcome: Outcome, bytecode: Path, target: str, env: dict[str, str]) -> Outcome:
    """The bytecode compiled for ``target`` where tileiras is installed; as it was otherwise."""
    program = env.get("CUTILE_TILEIRAS_PATH") or shutil.which("tileiras", path=env.get("PATH"))
    if not outcome.ok or not program:
        return outcome
    argv = [
        program,
        "--gpu-name",
        target,
        "--opt-level",
        "3",
        "-o",
        str(bytecode.with_suffix(".cubin")),
        str(bytecode),
    ]
    try:
        done = subprocess.run(
            sandbox.wrap(argv, bytecode.parent, env, writable=(bytecode.parent,)),
            cwd=bytecode.parent, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Outcome(outcome.job, "tileiras", "tileiras outlasted 300 s")
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()
        return Outcome(outcome.job, "tileiras", " ".join(said[-3:])[:1000])
    return Outcome(outcome.job, "ok", f"{target} cubin")
