#!/usr/bin/env python3
"""Prove agent-d's host code on a GPU machine without network, against TileGym's hand-written code.

  pack   (CPU machine with registry access) TileGym checkout -> gpu_bundle/part-NN.bin + manifest.json
  run    (GPU machine) unpack the parts, run the tests of both trees, benchmark, write results.json
  table  results.json -> docs/gpu.md (and docs/perf.md where a run has the perf stage's results)

See docs/gpu-proof.md. ``run`` and ``table`` need the standard library and this checkout's
``bot`` package (its stdlib-only log reader), which travels with the working tree.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # the repository root: ``bot``

from gpu import OPS

NEW_KERNELS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tilegym_ops"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="gpu_proof.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("pack", help="build both trees and the bundle (CPU machine)")
    s.add_argument(
        "--tilegym", type=Path, help="TileGym checkout (work tree or bare git dir); without it, only --faults"
    )
    s.add_argument("--out", type=Path, default=Path("gpu_bundle"))
    s.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS, help="TileGym's own cutile-rs ports")
    s.add_argument(
        "--new-kernels",
        type=Path,
        default=NEW_KERNELS,
        help="folder of <op>_kernel/kernel.rs for ops TileGym has no cutile-rs port of (default: %(default)s; "
        "their baseline is the cuTile backend)",
    )
    s.add_argument("--new-ops", nargs="*", help="only these of --new-kernels (default: all of them)")
    s.add_argument(
        "--faults",
        type=Path,
        help="the fault corpus (tests/fixtures/faults): each case's tree built from the tilegym wheel and "
        "ported, for `run --stage faults`",
    )
    s.add_argument(
        "--faults-tilegym",
        type=Path,
        help="also build each fault case on this TileGym checkout (work tree or bare git dir), the op's "
        "host side removed and regenerated as on a pull request; those cases are named <case>@main",
    )
    s.add_argument(
        "--cargo-target-dir",
        type=Path,
        help="shared cargo target folder (default: cargo-target under agent-d's cache, $AGENT_D_CACHE)",
    )
    s.add_argument(
        "--cache",
        type=Path,
        help="wheels and the toolchain archive, reused across packs (default: gpu-proof under agent-d's cache)",
    )

    s = sub.add_parser("run", help="unpack and test (GPU machine)")
    s.add_argument("--bundle", type=Path, default=Path("gpu_bundle"))
    s.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu_out"))
    s.add_argument("--ops", nargs="+", help="default: every op of the bundle")
    s.add_argument(
        "--stage",
        choices=("unpack", "test", "all", "bench", "faults", "perf", "review"),
        default="all",
        help="unpack: keep/extract the parts present (idempotent); test/all: unpack what is there, then test "
        "and time; bench: unpack, then only time the wrappers; faults: unpack, then run the fault corpus; "
        "perf: unpack, then `agent-d verify --perf` of each generated op, one at a time (the perf stage after "
        "its ALL_PASS: TileGym's test_perf for cutile-rs, cuTile and PyTorch); review: unpack, then `agent-d verify` "
        "of each generated op with the dry run before pytest and beside it, alternated (the time-to-review table)",
    )
    s.add_argument("--budget", type=float, default=510.0, help="seconds for the whole command (default 510)")
    s.add_argument("--python", default="python3", help="interpreter with torch and pytest")
    s.add_argument(
        "--cross",
        nargs="*",
        default=[],
        help="ops whose C signatures agree in both trees: also time each wrapper over the other tree's library",
    )
    s.add_argument("--state", type=Path, default=Path("/tmp/agent-d-gpu"), help="kept between warm calls")
    s.add_argument(
        "--faults-only",
        nargs="+",
        metavar="GLOB",
        help="--stage faults: only the cases whose names match (fnmatch), e.g. '*@main'",
    )
    s.add_argument(
        "--bot-from-checkout",
        action="store_true",
        help="run this working tree's bot/ instead of the bundle's agent-d wheel (a fix made after the "
        "pack); results.json records it, with $AGENT_D_CHECKOUT_COMMIT when set",
    )

    s.add_argument(
        "--perf-configs",
        type=int,
        help="--stage perf: agent-d's --perf-configs (stage E's cap on configs; default: agent-d's)",
    )
    s.add_argument(
        "--gate-share",
        type=float,
        default=0.3,
        help="--stage perf: the share of each op's seconds for its correctness gate; the perf stage gets "
        "the rest less a margin (default 0.3)",
    )

    s = sub.add_parser("table", help="render docs/gpu.md from results.json")
    s.add_argument(
        "--results",
        type=Path,
        nargs="+",
        required=True,
        help="results.json of one or more runs of one bundle; a later file's op entries override an earlier one's",
    )
    s.add_argument("--out", type=Path, default=Path("docs/gpu.md"))
    s.add_argument(
        "--perf-out",
        type=Path,
        default=Path("docs/perf.md"),
        help="the perf stage's table, written when a results file has perf entries (default: %(default)s)",
    )

    s = sub.add_parser("carry", help="print the carry plan of an existing bundle")
    s.add_argument("--bundle", type=Path, default=Path("gpu_bundle"))

    args = p.parse_args(argv)
    if args.cmd == "pack" and args.tilegym is None and args.faults is None:
        p.error("pack needs --tilegym, --faults or both")
    if args.cmd == "pack":
        from gpu.pack.trees import pack

        from bot.wheel import default_cache_dir  # the tests' cache too, so compiled crates are shared

        cache = default_cache_dir()
        cargo_target = args.cargo_target_dir or cache / "cargo-target"
        from gpu.pack.trees import new_kernels

        new = new_kernels(args.new_kernels) if args.tilegym is not None else {}
        if args.new_ops is not None:
            unknown = sorted(set(args.new_ops) - set(new))
            if unknown:
                p.error(
                    f"--new-ops {', '.join(unknown)}: not in {args.new_kernels} ({', '.join(new) or 'none'})"
                )
            new = {op: new[op] for op in args.new_ops}
        pack(
            args.tilegym,
            args.out,
            args.ops,
            cargo_target.resolve(),
            (args.cache or cache / "gpu-proof").resolve(),
            new,
            args.faults.resolve() if args.faults else None,
            args.faults_tilegym.resolve() if args.faults_tilegym else None,
        )
        return 0
    if args.cmd == "run":
        from gpu.run.device import run

        return run(
            args.bundle,
            args.out.resolve(),
            args.ops,
            args.stage,
            args.budget,
            args.python,
            args.state,
            args.cross,
            faults_only=args.faults_only,
            bot_from_checkout=args.bot_from_checkout,
            perf_options={"configs": args.perf_configs, "gate_share": args.gate_share},
        )
    if args.cmd == "table":
        from gpu.tables.gpu_md import table

        print(table(args.results, args.out), end="")
        from gpu.tables.perf_md import perf_table

        written = perf_table(args.results, args.perf_out)
        if written:
            print(f"[gpu_proof] {args.perf_out}: the perf stage of {written}")
        return 0
    if args.cmd == "carry":
        from gpu.bundle import load_manifest
        from gpu.pack.trees import report_carry

        report_carry(load_manifest(args.bundle), args.bundle.resolve())
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
