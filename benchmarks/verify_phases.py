"""agent-d's own checks before pytest on a GPU machine: two agent-d trees, one op, same run.

Runs ``agent-d verify --kernel OP --json`` on an unpacked GPU bundle (docs/gpu-proof.md) with
each of two ``bot`` trees in turn (``--before DIR`` and ``--after DIR``, each a folder holding a
``bot`` package), ``--rounds`` times, the trees alternating so that the machine's drift falls on
both. Prints, per tree, the median seconds of each stage of the verify (from its ``--json``), of
agent-d's checks before pytest (interpreter probe, registration check, dry run) and of the whole
process, and the ratio after / before of the checks and the wall.

    python3 benchmarks/verify_phases.py --before /tmp/before --after /tmp/after --op silu_and_mul

On the GPU machine, after ``scripts/gpu_proof.py run --stage unpack`` has made the bundle whole.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from gpu.run.device import cuda_env

CHECKS = ("interpreter", "registration", "dry run")  # agent-d's own, between the smoke and pytest


def verify_once(bot_tree: Path, op: str, python: str, out: Path, root: Path, site: Path) -> dict:
    """One verify with ``bot`` from ``bot_tree``: its stages' seconds and its wall."""
    repo = root / "payload" / "agent_d"
    argv = [python, "-m", "bot.cli", "verify", "--repo", str(repo), "--kernel", op, "--out", str(out),
            "--python", python, "--no-perf", "--json"]  # fmt: skip
    env = {**os.environ, **cuda_env(root), "PYTHONPATH": f"{bot_tree}{os.pathsep}{site}"}
    env["AGENT_D_READER"] = str(root / "payload" / "reader" / "kernel-reader")
    _check_bot_tree(python, env, repo, bot_tree)
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.monotonic() - start
    try:
        [result] = json.loads(proc.stdout)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"verify printed no result (exit {proc.returncode}): {proc.stderr[-800:]}") from exc
    stages = {s["name"]: s["seconds"] for s in result["stages"]}
    return {"verdict": result["verdict"], "stages": stages, "wall": wall}


def _check_bot_tree(python: str, env: dict, cwd: Path, bot_tree: Path) -> None:
    """Stop unless ``bot`` imports from ``bot_tree``: else both sides would time the installed wheel."""
    probe = [python, "-c", "import bot, pathlib; print(pathlib.Path(bot.__file__).resolve().parent.parent)"]
    proc = subprocess.run(probe, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)
    got = proc.stdout.strip()
    if got != str(bot_tree):
        raise SystemExit(f"bot imports from {got or proc.stderr[-400:]!r}, not from {bot_tree}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--op", default="silu_and_mul")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--python", default="python3")
    ap.add_argument("--json", type=Path, help="also write every run here")
    ap.add_argument("--root", type=Path, default=Path("/tmp/agent-d-gpu/root"), help="the unpacked bundle")
    ap.add_argument("--site", type=Path, default=Path("/tmp/agent-d-gpu/site"), help="its installed wheels")
    args = ap.parse_args()
    args.before, args.after = args.before.resolve(), args.after.resolve()  # verify runs in the TileGym tree
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for i in range(args.rounds):
        for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
            tree = args.before if name == "before" else args.after
            out = Path(f"/tmp/verify-phases/{name}-{i}")
            run = verify_once(tree, args.op, args.python, out, args.root, args.site)
            runs[name].append(run)
            print(
                f"round {i + 1} {name}: {run['verdict']} wall {run['wall']:.1f}s {run['stages']}", flush=True
            )
    names = [n for n in runs["before"][0]["stages"] if n in runs["after"][0]["stages"]]
    print(f"\n| phase (median s, {args.rounds} rounds, {args.op}) | before | after |\n|---|---|---|")
    medians = {}
    for name in [*names, "checks before pytest", "wall"]:
        row = []
        for tree in ("before", "after"):
            values = [
                r["wall"] if name == "wall"
                else sum(r["stages"].get(c, 0.0) for c in CHECKS) if name == "checks before pytest"
                else r["stages"].get(name, 0.0)
                for r in runs[tree]
            ]  # fmt: skip
            row.append(statistics.median(values))
        medians[name] = row
        print(f"| {name} | {row[0]:.2f} | {row[1]:.2f} |")
    checks, wall = medians["checks before pytest"], medians["wall"]
    print(
        f"\nratio after / before: checks before pytest {checks[1] / checks[0]:.2f}, wall {wall[1] / wall[0]:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps({"op": args.op, "runs": runs, "medians": medians}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
