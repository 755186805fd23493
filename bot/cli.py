"""The ``agent-d`` command: argument parsing only, one function per command.

Exit status: 0 ALL_PASS, 1 FAIL, 3 BLOCKED, 2 usage error (bad arguments, no kernel found),
4 agent-d itself failed (one redacted line on stderr, never a traceback).
With several kernels the worst verdict decides. ``agent-d demo`` exits 0 whenever the demo
ran to a verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from bot import __version__
from bot.errors import StageStop, UsageError
from bot.github.cli import add_subcommands
from bot.pipeline import EXIT_CODES, USAGE_EXIT, PortOptions, port
from bot.types import VerdictKind

EPILOG = "exit status: 0 ALL_PASS, 1 FAIL, 3 BLOCKED, 2 usage error, 4 agent-d itself failed"
INTERNAL_EXIT = 4


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return USAGE_EXIT
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"agent-d: error: {exc}", file=sys.stderr)
        return USAGE_EXIT
    except Exception as exc:  # a traceback can carry a token (a GitHub error echoing it): one line, scrubbed
        from bot.github.redact import redact

        line = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(redact(f"agent-d: internal error: {line}")[:2000], file=sys.stderr)
        return INTERNAL_EXIT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-d",
        description="Generate, build and test the host side of a TileGym cutile-rs kernel port.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"agent-d {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")

    p = sub.add_parser(
        "port",
        help="run the host stage on a checkout",
        epilog=EPILOG,
        description="Find the kernel.rs added by the newest commit (or --base..HEAD, or the named "
        "kernel), generate ffi.rs, the wrapper and the wiring, build, test, report, validate.",
    )
    _common(p)
    p.add_argument(
        "--out", type=Path, help="reports root (default: $CUTILE_KERNEL_OUT_ROOT or REPO/cutile_kernel_out)"
    )
    p.add_argument("--python", default="", help="interpreter that runs pytest (default: this one)")
    p.add_argument("--cargo-target-dir", type=Path, help="reuse compiled dependencies across checkouts")
    p.add_argument("--test-timeout", type=float, default=3600.0, help="seconds for the whole pytest run")
    p.add_argument("--show-pytest", action="store_true", help="echo pytest output while it runs")
    p.add_argument("--json", action="store_true", help="print a JSON summary of the result at the end")
    p.set_defaults(func=cmd_port)

    p = sub.add_parser(
        "verify",
        help="test an already generated and built checkout (no cargo: GPU runners)",
        epilog=EPILOG,
        description="The second half of `port` for machines without Rust: "
        "export check, ABI smoke, pytest, classification, reports and validator.",
    )
    p.add_argument("--repo", type=Path, default=Path("."), help="TileGym checkout (default: .)")
    p.add_argument("--kernel", required=True, help="kernel name")
    p.add_argument(
        "--out", type=Path, help="reports root (default: $CUTILE_KERNEL_OUT_ROOT or REPO/cutile_kernel_out)"
    )
    p.add_argument("--python", default="", help="interpreter that runs pytest (default: this one)")
    p.add_argument("--test-timeout", type=float, default=3600.0, help="seconds for the whole pytest run")
    p.add_argument("--show-pytest", action="store_true", help="echo pytest output while it runs")
    p.add_argument("--json", action="store_true", help="print a JSON summary of the result at the end")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("plan", help="print the launch plan and where each value came from")
    _common(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser(
        "demo",
        help="assemble a TileGym checkout from the tilegym 1.5.1 wheel and port silu_and_mul",
        description="Builds a git repo from the PyPI wheel whose newest commit adds "
        "silu_and_mul's kernel.rs, then runs `agent-d port` on it.",
    )
    p.add_argument("--workdir", type=Path, default=Path("agent-d-demo"), help="where to assemble (replaced)")
    p.add_argument("--python", default="", help="interpreter that runs pytest (default: this one)")
    p.add_argument("--cargo-target-dir", type=Path, help="reuse compiled dependencies")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("validate", help="run the built-in validator on a reports folder")
    p.add_argument("op", help="kernel name")
    p.add_argument("--repo", type=Path, default=Path("."), help="TileGym checkout (default: .)")
    p.add_argument("--out", type=Path, help="reports root (default: REPO/cutile_kernel_out)")
    p.add_argument("--so", type=Path, help="built library (default: the crate's target/release)")
    p.set_defaults(func=cmd_validate)

    add_subcommands(sub)
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", type=Path, default=Path("."), help="TileGym checkout (default: .)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kernel", help="kernel name (the <op> of <op>_kernel/kernel.rs)")
    group.add_argument("--base", help="compare against this git ref instead of HEAD~1")


def _options(args, **extra) -> PortOptions:
    return PortOptions(
        repo=args.repo,
        kernel=getattr(args, "kernel", None),
        base=getattr(args, "base", None),
        out_root=getattr(args, "out", None),
        python=getattr(args, "python", ""),
        cargo_target_dir=getattr(args, "cargo_target_dir", None),
        **extra,
    )


def cmd_port(args) -> int:
    return cmd_port_like(args, verify_only=False)


def cmd_port_like(args, verify_only: bool) -> int:
    options = _options(
        args, test_timeout=args.test_timeout, echo_pytest=args.show_pytest, verify_only=verify_only
    )
    results = port(options)
    if args.json:
        summary = [
            {
                "op": r.target.op,
                "verdict": r.verdict.kind.value,
                "class": r.verdict.klass,
                "reason": r.verdict.reason,
                "out_dir": r.out_dir,
                "changed": r.changed_files,
            }
            for r in results
        ]
        print(json.dumps(summary, indent=2))
    return max(EXIT_CODES[r.verdict.kind] for r in results)


def cmd_verify(args) -> int:
    args.base = None
    return cmd_port_like(args, verify_only=True)


def cmd_plan(args) -> int:
    from bot.pipeline import make_plan
    from bot.plan.show import render_plan
    from bot.targets import find_targets

    status = 0
    for target in find_targets(args.repo.resolve(), args.kernel, args.base):
        try:
            plan, _facts, _co = make_plan(target, PortOptions(repo=target.repo).out_dir(target.op))
        except StageStop as stop:
            print(f"{target.op}: {stop.kind} ({stop.klass}): {stop.reason}")
            status = max(status, EXIT_CODES[VerdictKind(stop.kind)])
            continue
        print(json.dumps(asdict(plan), indent=2, default=str) if args.json else render_plan(plan))
        if plan.missing:
            status = max(status, EXIT_CODES[VerdictKind.BLOCKED])
    return status


def cmd_demo(args) -> int:
    from bot.demo import assemble_demo

    checkout_ = assemble_demo(args.workdir.resolve())
    print(
        f"[agent-d] demo checkout: {checkout_.repo} (base {checkout_.base_sha[:12]}, head {checkout_.head_sha[:12]})"
    )
    results = port(
        PortOptions(repo=checkout_.repo, python=args.python, cargo_target_dir=args.cargo_target_dir)
    )
    return 0 if results else 1


def cmd_validate(args) -> int:
    from bot import validator

    repo = args.repo.resolve()
    out_root = (args.out or repo / "cutile_kernel_out").resolve()
    so = args.so or validator.default_so_path(repo)
    run = validator.validate(out_root / args.op, args.op, repo, so if so and Path(so).is_file() else None)
    print(f"$ {run.command}\n{run.output.rstrip()}\nexit={run.exit_code}")
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
