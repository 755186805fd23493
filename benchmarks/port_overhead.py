"""Print agent-d's own overhead per kernel and the crate build time, cold and warm.

Overhead = every stage of `agent-d port` except the cargo build and the pytest run (reading
the kernel, facts, plan, generation with formatting, apply, ABI smoke, reports, validator).
Build time: cold = a fresh cargo target folder; warm = the same folder reused by a second
checkout (only the cutile_kernels crate itself recompiles). Figures, not assertions.

    python benchmarks/port_overhead.py [--runs 5] [--skip-cold]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bot.demo import assemble_checkout
from bot.pipeline import PortOptions, port_one
from bot.targets.types import Target
from bot.wheel import tilegym_wheel

OP = "silu_and_mul"
EXTERNAL = {"build", "test", "toolchain", "interpreter"}


def one_port(workdir: Path, cargo_target: Path, name: str) -> tuple[float, float, float]:
    repo = assemble_checkout(workdir / name, tilegym_wheel(), [OP], [OP]).repo
    start = time.monotonic()
    result = port_one(
        Target(repo, OP), PortOptions(repo=repo, cargo_target_dir=cargo_target, echo=lambda _: None)
    )
    total = time.monotonic() - start
    stages = {s.name: s.seconds for s in result.stages}
    overhead = total - sum(v for k, v in stages.items() if k in EXTERNAL)
    return overhead, stages.get("build", float("nan")), total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="warm runs to average")
    ap.add_argument("--skip-cold", action="store_true", help="skip the cold build (minutes on 2 cores)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="agent-d-bench-") as tmp:
        work = Path(tmp)
        target = work / "cargo-target"
        cold_build = None
        if not args.skip_cold:
            _, cold_build, total = one_port(work, target, "cold")
            print(f"cold build (fresh cargo target dir): {cold_build:7.1f} s   whole port {total:7.1f} s")
        else:
            one_port(work, target, "prime")
        overheads, builds = [], []
        for i in range(args.runs):
            overhead, build, _ = one_port(work, target, f"warm{i}")
            overheads.append(overhead)
            builds.append(build)
        print(
            f"warm build (reused target dir, new checkout): median {statistics.median(builds):6.1f} s "
            f"over {args.runs} runs"
        )
        print(
            f"agent-d overhead per kernel (all but cargo and pytest): median {statistics.median(overheads):.3f} s, "
            f"max {max(overheads):.3f} s"
        )
        if cold_build:
            print(f"warm/cold build ratio: {statistics.median(builds) / cold_build:.3f}")


if __name__ == "__main__":
    main()
