"""Print how long agent-d takes to generate each of the five tilegym 1.5.1 ops' host side.

Per op: read kernel.rs (the syn reader), gather facts, build the plan, render ffi.rs, the
wrapper and the wiring, and format them with rustfmt and ruff. No cargo, no pytest.
Figures, not assertions: the median of --runs runs per op.

    python benchmarks/generate_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.emit import generate
from bot.pipeline import gather_facts
from bot.plan import build_plan
from bot.read.reader import read_kernel, reader_binary
from bot.targets import checkout
from bot.targets.discover import discover
from bot.targets.types import Target
from bot.wheel import tilegym_wheel

OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]
CONTRACTS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "contracts"


def generate_once(repo: Path, op: str) -> dict[str, float]:
    target = Target(repo, op)
    marks = {}
    start = time.perf_counter()
    signature = read_kernel(target.kernel_rs)
    marks["read"] = time.perf_counter()
    found = discover(target)
    marks["discover"] = time.perf_counter()
    co = checkout.inspect(target, found)
    plan = build_plan(target, signature, gather_facts(target, found, repo / "out" / op), co)
    marks["plan"] = time.perf_counter()
    files = generate.generate(target, plan, co)
    marks["render"] = time.perf_counter()
    apply.formatted(files, repo)
    marks["format"] = time.perf_counter()
    out, last = {}, start
    for name, t in marks.items():
        out[name] = t - last
        last = t
    out["total"] = last - start
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    reader_binary()  # build the reader once, outside the timings
    with tempfile.TemporaryDirectory(prefix="agent-d-gen-") as tmp:
        repo = assemble_checkout(Path(tmp) / "tg", tilegym_wheel(), OPS, OPS).repo
        for contract in CONTRACTS.glob("*.yaml"):
            shutil.copy(
                contract,
                repo / "src/tilegym/ops/cutile_rs" / f"{contract.stem}_kernel" / "host_contract.yaml",
            )
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        print(
            f"{'op':<16}{'read':>8}{'plan':>8}{'render':>8}{'format':>8}{'total':>8}  (ms, median of {args.runs})"
        )
        for op in OPS:
            runs = [generate_once(repo, op) for _ in range(args.runs)]
            med = {k: statistics.median(r[k] for r in runs) * 1000 for k in runs[0]}
            print(
                f"{op:<16}" + "".join(f"{med[k]:8.1f}" for k in ("read", "plan", "render", "format", "total"))
            )


if __name__ == "__main__":
    main()
