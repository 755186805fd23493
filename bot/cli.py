"""The ``agent-d`` command: argument parsing only, one function per command.

Exit status: 0 ALL_PASS, 1 FAIL, 3 BLOCKED, 2 usage error (bad arguments, no kernel found),
4 agent-d itself failed (one redacted line on stderr, never a traceback).
With several kernels the worst verdict decides. ``agent-d demo`` exits 0 whenever the demo
ran to a verdict.

Streams: stdout carries the result (the validator block and the verdict line, or with
``--json`` exactly one JSON document); progress and logs go to stderr. A usage error is one
line on stderr, exit 2, before anything is written to disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import NoReturn

from bot import __version__, children, progress
from bot.classify import machine_errors
from bot.classify.types import VerdictKind
from bot.cli_args import add_perf, add_sandbox, add_test_jobs, perf_choice, positive_seconds
from bot.errors import StageStop, UsageError
from bot.github.cli import add_subcommands
from bot.pipeline import EXIT_CODES, USAGE_EXIT, PortOptions, port
from bot.report.types import PortResult
from bot.targets.targets import existing_dir

EPILOG = "exit status: 0 ALL_PASS, 1 FAIL, 3 BLOCKED, 2 usage error, 4 agent-d itself failed"
INTERNAL_EXIT = 4


def main(argv: list[str] | None = None) -> int:
    previous = _on_sigterm_stop()
    try:
        status = _run(argv)
        sys.stdout.flush()  # a reader that went away shows up here, not at interpreter exit
        return status
    except BrokenPipeError:
        return pipe_closed()
    except (KeyboardInterrupt, Interrupted) as exc:
        return interrupted(signal.SIGTERM if isinstance(exc, Interrupted) else signal.SIGINT)
    finally:
        _restore_sigterm(previous)


class Interrupted(BaseException):
    """SIGTERM, raised where the main thread is, as Python raises KeyboardInterrupt for SIGINT."""


def _on_sigterm_stop():
    if threading.current_thread() is not threading.main_thread():
        return None  # only the main thread may set a handler (tests call main() from threads)

    def handler(_signum, _frame):
        raise Interrupted

    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(previous) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def interrupted(signum: signal.Signals) -> int:
    """Ctrl-C or SIGTERM: end the builds and tests agent-d started, say in one line what was stopped
    and what is left, no traceback; 128 + the signal's number, as a shell reports it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
    stopped = children.stop_all()
    ended = f"stopped {', '.join(stopped)}" if stopped else "nothing of its own was running"
    print(
        f"agent-d: interrupted by {signum.name}: {ended}. Files already written stay as they are "
        "(the generated host files, the wiring, cutile_kernel_out/): `git status` shows them.",
        file=sys.stderr,
        flush=True,
    )
    return 128 + signum


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.error("name a command: " + ", ".join(COMMANDS))
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"agent-d: error: {exc}", file=sys.stderr)
        return USAGE_EXIT
    except BrokenPipeError:
        raise  # the reader went away: main() ends quietly
    except Exception as exc:  # a traceback can carry a token (a GitHub error echoing it): one line, scrubbed
        from bot.github.redact import redact

        what = "stopped" if machine_errors.explain(exc) else "internal error"  # a full disk is no bug
        print(redact(f"agent-d: {what}: {machine_errors.one_line(exc)}")[:2000], file=sys.stderr)
        return INTERNAL_EXIT


def pipe_closed() -> int:
    """The reader of stdout went away (``agent-d plan | head -1``): stop quietly, as a shell tool does.

    stdout is pointed at /dev/null so the interpreter's own final flush cannot fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE


class Parser(argparse.ArgumentParser):
    """Bad flags end in one line that says what to do, not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


COMMANDS = (
    "port",
    "verify",
    "plan",
    "demo",
    "validate",
    "check",
    "dispatch",
    "finalize",
    "conclude",
    "port-job",
    "run",
    "seed-cache",
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="agent-d",
        description="Generate, build and test the host side of a TileGym cutile-rs kernel port.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"agent-d {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")
    _add_port(sub)
    _add_verify(sub)
    _add_plan(sub)
    _add_demo(sub)
    _add_validate(sub)
    _add_check(sub)
    add_subcommands(sub)
    return parser


def _add_port(sub) -> None:
    p = sub.add_parser(
        "port",
        help="run the host stage on a checkout",
        epilog=EPILOG,
        description="Find the kernel.rs added by the newest commit (or --base..HEAD, or the named "
        "kernel), generate ffi.rs, the wrapper and the wiring, build, test, report, validate.",
    )
    _common(p)
    _reports_and_interpreter(p)
    p.add_argument("--cargo-target-dir", type=Path, help="reuse compiled dependencies across checkouts")
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite your uncommitted edits of the files agent-d writes whole (the wrapper, ffi.rs); "
        "without it the port refuses and names them",
    )
    _test_run(p)
    p.set_defaults(func=cmd_port)


def _add_verify(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="test an already generated and built checkout (no cargo: GPU runners)",
        epilog=EPILOG,
        description="The second half of `port` for machines without Rust: "
        "export check, ABI smoke, pytest, classification, reports and validator.",
    )
    p.add_argument("--repo", type=Path, default=Path("."), help="TileGym checkout (default: .)")
    p.add_argument(
        "--kernel",
        required=True,
        action="append",
        help="kernel name; repeat it to verify several (--test-jobs)",
    )
    _reports_and_interpreter(p)
    _test_run(p)
    p.set_defaults(func=cmd_verify)


def _reports_and_interpreter(p: argparse.ArgumentParser) -> None:
    """Where port and verify write their reports and which Python runs pytest."""
    p.add_argument(
        "--out", type=Path, help="reports root (default: $CUTILE_KERNEL_OUT_ROOT or REPO/cutile_kernel_out)"
    )
    p.add_argument("--python", default="", help="interpreter that runs pytest (default: this one)")


def _test_run(p: argparse.ArgumentParser) -> None:
    """How port and verify run the kernel's tests and what they print."""
    p.add_argument(
        "--test-timeout", type=positive_seconds, default=3600.0, help="seconds for the whole pytest run"
    )
    add_test_jobs(p)
    add_sandbox(p, default=False)
    add_perf(p)
    p.add_argument("--show-pytest", action="store_true", help="echo pytest output while it runs")
    p.add_argument(
        "--json", action="store_true", help="print one JSON document on stdout (docs/port-json.schema.json)"
    )
    _quiet(p)


def _add_plan(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="print the launch plan and where each value came from",
        epilog="exit status: 0 planned, 3 a fact is missing or a stage stopped, 2 usage error",
        description="Read kernel.rs and the checkout, merge the facts into the launch plan and print it "
        "with the source of every value. Writes nothing into the checkout.",
    )
    _common(p)
    p.add_argument(
        "--json", action="store_true", help="print one JSON document on stdout (docs/plan-json.schema.json)"
    )
    p.set_defaults(func=cmd_plan)


def _add_demo(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="assemble a TileGym checkout from the tilegym 1.5.1 wheel and port silu_and_mul",
        description="Builds a git repo from the PyPI wheel whose newest commit adds "
        "silu_and_mul's kernel.rs, then runs `agent-d port` on it.",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("agent-d-demo"),
        help="where to assemble (its checkout is replaced; WORKDIR/cargo-target is kept)",
    )
    p.add_argument("--python", default="", help="interpreter that runs pytest (default: this one)")
    p.add_argument(
        "--cargo-target-dir", type=Path, help="reuse compiled dependencies (default: WORKDIR/cargo-target)"
    )
    _quiet(p)
    p.set_defaults(func=cmd_demo)


def _add_check(sub) -> None:
    p = sub.add_parser(
        "check",
        help="check a port's own ffi.rs and wrapper as they are (changes nothing)",
        description="For an op whose ffi.rs and cffi wrapper already exist (written by hand or by another "
        "tool): the wrapper's _FFI_CDEF against ffi.rs's export (count, order, C types, names), and the host "
        "rules on both files, each finding on its line. Builds and runs nothing.",
        epilog="exit status: 0 every check holds, 1 findings, 2 usage error",
    )
    p.add_argument("--repo", type=Path, default=Path("."), help="TileGym checkout (default: .)")
    p.add_argument("--kernel", required=True, help="kernel name (the <op> of <op>_kernel/)")
    p.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with torch and cuda.tile for the launch dry run (default: this one; "
        "without them the dry run is skipped and the output says so); '' skips it",
    )
    p.add_argument(
        "--cargo-target-dir", type=Path, help="where the device compile builds (default: the crate's target/)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    from bot.check.run import check
    from bot.read.reader import reader_binary
    from bot.targets.targets import existing_dir

    repo = existing_dir(args.repo, "--repo").resolve()
    result = check(repo, args.kernel, str(reader_binary()), args.python, args.cargo_target_dir)
    print(json.dumps(result.as_json(repo), indent=2) if args.json else result.shown(repo))
    return 0 if result.holds else 1


def _add_validate(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="run the built-in validator on a reports folder",
        description="Check a finished port the way TileGym's validate_agent_d.sh does: the reports, the raw "
        "pytest log, ffi.rs, the exported symbol, the wrapper and the wiring.",
        epilog="exit status: 0 PASS, 1 FAIL, 3 checks not run because the port was BLOCKED, 2 usage error",
    )
    p.add_argument("op", help="kernel name")
    p.add_argument("--repo", type=Path, default=Path("."), help="TileGym checkout (default: .)")
    p.add_argument("--out", type=Path, help="reports root (default: REPO/cutile_kernel_out)")
    p.add_argument("--so", type=Path, help="built library (default: the crate's target/release)")
    p.set_defaults(func=cmd_validate)


def _quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet", action="store_true", help="no progress lines on stderr (the result still prints)"
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", type=Path, default=Path("."), help="TileGym checkout (default: .)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kernel", help="kernel name (the <op> of <op>_kernel/kernel.rs)")
    group.add_argument("--base", help="compare against this git ref instead of HEAD~1")


def checked_python(python: str) -> str:
    """``python`` when it names an interpreter that runs; a usage error before any build otherwise
    (a wrong ``--python`` was found only after the whole build, 516 s on a cold cache)."""
    if not python:
        return python
    found = shutil.which(python)
    if found is None:
        raise UsageError(f"--python {python}: no such program; name the interpreter that runs the tests")
    try:
        proc = subprocess.run([found, "-c", "import sys"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--python {python}: it does not run ({exc})") from None
    if proc.returncode != 0:
        raise UsageError(f"--python {python}: it does not run Python (exit {proc.returncode})")
    return python


def _options(args, **extra) -> PortOptions:
    return PortOptions(
        repo=args.repo,
        kernel=getattr(args, "kernel", None),
        base=getattr(args, "base", None),
        out_root=getattr(args, "out", None),
        python=checked_python(getattr(args, "python", "")),
        cargo_target_dir=getattr(args, "cargo_target_dir", None),
        sandbox=getattr(args, "sandbox", False),
        force=getattr(args, "force", False),
        **extra,
    )


def cmd_port(args) -> int:
    return cmd_port_like(args, verify_only=False)


def cmd_port_like(args, verify_only: bool) -> int:
    echo = progress.silent if args.quiet else progress.to_stderr
    options = _options(
        args,
        test_timeout=args.test_timeout,
        test_jobs=args.test_jobs,
        dry_run_first=args.dry_run_first,
        echo_pytest=args.show_pytest,
        verify_only=verify_only,
        perf=perf_choice(args.perf, dict(os.environ)),
        perf_timeout=args.perf_timeout,
        perf_configs=args.perf_configs,
        echo=echo,
        answer=echo if args.json else print,  # with --json stdout holds the JSON alone
    )
    results = port(options)
    if args.json:
        print(json.dumps(port_summary(results), indent=2))
    return max(EXIT_CODES[r.verdict.kind] for r in results)


def port_summary(results: list[PortResult]) -> list[dict]:
    """The ``port --json`` / ``verify --json`` document (docs/port-json.schema.json)."""
    return [
        {
            "op": r.target.op,
            "verdict": r.verdict.kind.value,
            "class": r.verdict.klass,
            "reason": r.verdict.reason,
            "fix": r.verdict.fix,
            "out_dir": r.out_dir,
            "changed": r.changed_files,
            "stages": [
                {"name": s.name, "status": s.status, "seconds": round(s.seconds, 3), "detail": s.detail}
                for s in r.stages
            ],
            "perf": None if r.perf is None else r.perf.summary(),
            "tests": None
            if r.tests is None
            else {
                "exit_code": r.tests.exit_code,
                "passed": r.tests.passed,
                "failed": r.tests.failed,
                "skipped": r.tests.skipped,
                "errors": r.tests.errors,
            },
        }
        for r in results
    ]


def cmd_verify(args) -> int:
    args.base = None
    return cmd_port_like(args, verify_only=True)


def cmd_plan(args) -> int:
    from bot.pipeline import make_plan
    from bot.plan.show import render_plan
    from bot.targets.targets import find_targets

    status = 0
    documents: list[dict] = []
    for target in find_targets(args.repo.resolve(), args.kernel, args.base):
        try:
            plan, _facts, _co = make_plan(target, PortOptions(repo=target.repo).out_dir(target.op))
        except StageStop as stop:
            status = max(status, EXIT_CODES[VerdictKind(stop.kind)])
            stopped = {"kind": stop.kind, "class": stop.klass, "reason": stop.reason}
            documents.append({"op": target.op, "status": "stopped", "stop": stopped, "plan": None})
            if not args.json:
                print(f"{target.op}: {stop.kind} ({stop.klass}): {stop.reason}")
            continue
        if plan.missing:
            status = max(status, EXIT_CODES[VerdictKind.BLOCKED])
        plan_data = json.loads(json.dumps(asdict(plan), default=str))
        state = "missing" if plan.missing else "planned"
        documents.append({"op": target.op, "status": state, "stop": None, "plan": plan_data})
        if not args.json:
            print(render_plan(plan))
    if args.json:  # one document for every kernel (docs/plan-json.schema.json)
        print(json.dumps(documents, indent=2))
    return status


def cmd_demo(args) -> int:
    from bot.demo import assemble_demo, demo_cargo_target

    python = checked_python(args.python)
    workdir = args.workdir.resolve()
    if workdir.exists() and not workdir.is_dir():
        raise UsageError(f"--workdir {workdir}: a file, not a folder; name a folder to assemble the demo in")
    echo = progress.silent if args.quiet else progress.to_stderr
    checkout_ = assemble_demo(workdir)
    echo(
        f"[agent-d] demo checkout: {checkout_.repo} (base {checkout_.base_sha[:12]}, head {checkout_.head_sha[:12]})"
    )
    # The checkout is replaced on every run; its compiled dependencies live beside it and stay.
    target_dir = args.cargo_target_dir or demo_cargo_target(workdir)
    results = port(PortOptions(repo=checkout_.repo, python=python, cargo_target_dir=target_dir, echo=echo))
    return 0 if results else 1


def cmd_validate(args) -> int:
    from bot.report.validator.builtin import validate
    from bot.report.validator.files import default_so_path

    repo = existing_dir(args.repo, "--repo")
    out_root = (args.out or repo / "cutile_kernel_out").resolve()
    if not (out_root / args.op).is_dir():
        raise UsageError(f"no reports folder {out_root / args.op}: run `agent-d port` first or pass --out")
    so = args.so or default_so_path(repo)
    run = validate(out_root / args.op, args.op, repo, so if so and Path(so).is_file() else None)
    print(f"$ {run.command}\n{run.output.rstrip()}\nexit={run.exit_code}")
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
