#!/usr/bin/env python3
"""The planner's golden check: `agent-d plan` and the generated files for every fixture op,
written by one tree and compared byte for byte with another's (a refactoring of ``bot/plan`` or
``bot/infer`` must leave them all unchanged).

  plan_golden.py write OUT [--bot TREE]   every case below into OUT (``bot`` imported from TREE)
  plan_golden.py compare REV [--keep DIR] write from REV's ``bot`` (git archive) and from this
                                          tree's, then ``diff -r``; exit 1 when they differ

The cases, each planned in a checkout assembled from the tilegym 1.5.1 wheel (``$AGENT_D_CACHE``):
the wheel's five cutile-rs ops with and without tests/fixtures/contracts; tests/fixtures/ops with
and without their contracts; tests/fixtures/tilegym_ops (with a test that passes fp8 to attention)
and tilegym_ops_next; each tests/fixtures/kernels/*.rs as silu_and_mul's kernel; every variant of
the variant corpus (tests/variant_corpus.py). For each: ``plan.json`` and ``plan.txt`` (what
``agent-d plan --json`` and ``agent-d plan`` print, with the exit status), and ``files/`` (the
generated files, formatted, not applied) or ``generate.txt`` (why none were generated). Checkout
paths are written as ``$CHECKOUT``, so two runs compare.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"
OPS_DIR = "src/tilegym/ops/cutile_rs"
WHEEL_OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="plan_golden.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write every case into OUT")
    w.add_argument("out", type=Path)
    w.add_argument("--bot", type=Path, default=ROOT, help="the tree whose bot/ is run (default: this one)")
    c = sub.add_parser("compare", help="REV's output against this tree's, byte for byte")
    c.add_argument("rev")
    c.add_argument("--keep", type=Path, help="write both outputs here (DIR/before, DIR/after) and keep them")
    args = p.parse_args(argv)
    if args.command == "compare":
        return compare(args.rev, args.keep)
    sys.path[:0] = [str(args.bot.resolve()), str(TESTS)]
    write_all(args.out.resolve())
    return 0


# --------------------------------------------------------------------------- compare


def compare(rev: str, keep: Path | None) -> int:
    with tempfile.TemporaryDirectory(prefix="plan-golden-") as tmp:
        where = keep.resolve() if keep else Path(tmp)
        tree = Path(tmp) / "tree"
        tree.mkdir()
        archive = subprocess.run(["git", "archive", rev, "bot"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        env = dict(os.environ, AGENT_D_READER=str(_reader()))  # one reader for both (crate/ unchanged)
        for name, bot_tree in (("before", tree), ("after", ROOT)):
            out = where / name
            if out.exists():
                shutil.rmtree(out)
            cmd = [sys.executable, str(Path(__file__).resolve()), "write", str(out), "--bot", str(bot_tree)]
            subprocess.run(cmd, env=env, check=True)
        diff = subprocess.run(["diff", "-r", str(where / "before"), str(where / "after")])
        cases = sum(1 for _ in (where / "after").glob("*/*"))
        print(f"plan_golden: {cases} cases, " + ("no difference" if diff.returncode == 0 else "DIFFERENT"))
        return diff.returncode


def _reader() -> Path:
    sys.path.insert(0, str(ROOT))
    from bot.read.reader import reader_binary

    return reader_binary()


# --------------------------------------------------------------------------- the cases


def write_all(out: Path) -> None:
    from cargo_warm import TILEGYM_VERSION
    from test_tilegym_new_ops import FP8_TEST

    from bot.wheel import default_cache_dir, tilegym_wheel

    wheel = tilegym_wheel(default_cache_dir(), TILEGYM_VERSION)
    with tempfile.TemporaryDirectory(prefix="plan-golden-co-") as tmp:
        work = Path(tmp)
        five = _wheel_checkout(work / "wheel", wheel)
        _plan_each(out / "wheel_bare", five, WHEEL_OPS)
        _plan_variants(out / "variants", five, WHEEL_OPS)
        for contract in sorted((FIXTURES / "contracts").glob("*.yaml")):
            shutil.copy(contract, five / OPS_DIR / f"{contract.stem}_kernel" / "host_contract.yaml")
        _plan_each(out / "wheel_contracts", five, WHEEL_OPS)
        # a porter's contract over a kernel whose names it does not know
        _plan_variants(
            out / "variants_contracts", five, [c.stem for c in (FIXTURES / "contracts").glob("*.yaml")]
        )

        ops = _names(FIXTURES / "ops")
        ours = _kernels_checkout(work / "ops", wheel, FIXTURES / "ops", ops)
        _plan_each(out / "ops_contracts", ours, ops)
        for op in ops:
            (ours / OPS_DIR / f"{op}_kernel" / "host_contract.yaml").unlink(missing_ok=True)
        _plan_each(out / "ops_bare", ours, ops)

        new_ops = _names(FIXTURES / "tilegym_ops")
        new = _kernels_checkout(work / "new", wheel, FIXTURES / "tilegym_ops", new_ops)
        (new / "tests" / "ops" / "test_fmha_fp8.py").write_text(FP8_TEST)  # attention's dtypes follow it
        _plan_each(out / "tilegym_ops", new, new_ops)
        _plan_variants(out / "variants", new, new_ops)
        next_ops = _names(FIXTURES / "tilegym_ops_next")
        _plan_each(
            out / "tilegym_ops_next",
            _kernels_checkout(work / "next", wheel, FIXTURES / "tilegym_ops_next", next_ops),
            next_ops,
        )
        _plan_kernels(out / "kernels", _wheel_checkout(work / "silu", wheel, ["silu_and_mul"]))


def _names(folder: Path) -> list[str]:
    return sorted(d.name[: -len("_kernel")] for d in folder.iterdir() if (d / "kernel.rs").is_file())


def _wheel_checkout(dest: Path, wheel: Path, ops: list[str] = WHEEL_OPS) -> Path:
    from bot.demo import assemble_checkout

    return assemble_checkout(dest, wheel, ops, ops).repo


def _kernels_checkout(dest: Path, wheel: Path, kernels: Path, ops: list[str]) -> Path:
    from checkout_support import checkout_with_kernels

    return checkout_with_kernels(dest, wheel, kernels, ops)


def _plan_each(out: Path, repo: Path, ops: list[str]) -> None:
    for op in ops:
        write_case(out / op, repo, op)


def _plan_kernels(out: Path, repo: Path) -> None:
    """Each kernel of tests/fixtures/kernels in place of silu_and_mul's (as tests/test_plan_emit.py does)."""
    kernel_rs = repo / OPS_DIR / "silu_and_mul_kernel" / "kernel.rs"
    original = kernel_rs.read_text()
    for kernel in sorted((FIXTURES / "kernels").glob("*.rs")):
        kernel_rs.write_text(kernel.read_text())
        write_case(out / kernel.stem, repo, "silu_and_mul")
    kernel_rs.write_text(original)


def _plan_variants(out: Path, repo: Path, ops: list[str]) -> None:
    from variant_corpus import original, variants_of

    for op in sorted(ops):
        orig = original(repo, op)
        kernel_rs = repo / OPS_DIR / f"{op}_kernel" / "kernel.rs"
        for variant in variants_of(repo, op, orig):
            kernel_rs.write_text(variant.kernel_rs)
            try:
                write_case(out / f"{op}~{variant.kind}", repo, op)
            finally:
                kernel_rs.write_text(orig.text)


# --------------------------------------------------------------------------- one case


def write_case(out: Path, repo: Path, op: str) -> None:
    """``agent-d plan`` (JSON and text) and the generated files of ``op`` in ``repo``, into ``out``."""
    out.mkdir(parents=True)
    scrub = lambda text: text.replace(str(repo), "$CHECKOUT")  # noqa: E731
    for name, extra in (("plan.json", ["--json"]), ("plan.txt", [])):
        status, printed = _cli(["plan", "--repo", str(repo), "--kernel", op, *extra])
        (out / name).write_text(scrub(f"exit {status}\n{printed}"))
    why, files = _generated(repo, op)
    if why:
        (out / "generate.txt").write_text(scrub(why) + "\n")
    for path, text in files.items():
        dest = out / "files" / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(scrub(text))


def _cli(argv: list[str]) -> tuple[int, str]:
    from bot.cli import main as agent_d

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        status = agent_d(argv)
    return status, printed.getvalue()


def _generated(repo: Path, op: str) -> tuple[str, dict[str, str]]:
    """(why nothing was generated, "" when the files were; relative path -> generated text)."""
    from bot.apply import apply
    from bot.emit import generate
    from bot.errors import StageStop
    from bot.pipeline import make_plan
    from bot.targets.types import Target

    target = Target(repo, op)
    try:
        plan, _facts, co = make_plan(target, repo / "out" / op)
        if plan.missing:
            return "missing: " + ", ".join(m.key for m in plan.missing), {}
        files = apply.formatted(generate.generate(target, plan, co), repo)
    except StageStop as stop:
        return f"{stop.kind} {stop.klass}: {stop.reason}", {}
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {exc}", {}
    return "", {f.path: f.content for f in files.files}


if __name__ == "__main__":
    sys.exit(main())
