"""``pack --faults``: the fault corpus into the bundle (CPU machine; needs this repository's ``bot``, cargo).

Each distinct source of the corpus (op, kernel edits, contract: ``faults.tree_key``) becomes one
checkout under ``payload/faults/<key>/``: the tilegym 1.5.1 wheel's runtime with our tests
(``bot.demo.assemble_checkout``), the case's sources, then ``agent-d port`` as a pull request would
run it, with a real cargo build (the library stripped). A case ``decided`` at pack time (its port
stops before a GPU could matter) keeps that port's verdict; the others are judged by ``run
--stage faults`` with ``agent-d verify`` on a copy of their tree.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from gpu import faults
from gpu.pack.porting import SO_REL, export_checkout, log, port_op, sh, strip_op

MAIN_SUFFIX = "@main"  # a case built on the TileGym checkout instead of the wheel


def on_tilegym(cases: dict[str, dict], tilegym: Path) -> dict[str, dict]:
    """Each case again, named ``<case>@main``, for the ops the TileGym checkout has a cutile-rs port of."""
    ported = {p.name.removesuffix("_kernel") for p in _kernel_dirs(tilegym)}
    out = {}
    for name, case in cases.items():
        if case["op"] in ported:
            out[name + MAIN_SUFFIX] = {**case, "name": name + MAIN_SUFFIX, "base": "tilegym"}
    return out


def _kernel_dirs(tilegym: Path) -> list[Path]:
    bare = (tilegym / "HEAD").is_file() and (tilegym / "objects").is_dir()
    if bare:
        listed = subprocess.run(
            ["git", "-C", str(tilegym), "ls-tree", "-d", "--name-only", "HEAD", faults.OPS_DIR + "/"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        return [Path(x) for x in listed if x.endswith("_kernel")]
    return [p for p in (tilegym / faults.OPS_DIR).glob("*_kernel") if (p / "ffi.rs").is_file()]


def pack_faults(
    folder: Path, stage: Path, cargo_target_dir: Path, logs: Path, tilegym: Path | None = None
) -> dict:
    """Build the corpus's trees under ``stage/faults``; return the manifest's ``faults`` entry.
    ``tilegym``: also each case on that TileGym checkout (the op's host side stripped, then ported)."""
    from bot.demo import assemble_checkout
    from bot.wheel import tilegym_wheel

    cases = faults.load(folder)
    if tilegym is not None:
        cases.update(on_tilegym(cases, tilegym))
    trees: dict[str, dict] = {}
    for case in cases.values():
        main = case.get("base") == "tilegym"
        key = ("main-" if main else "") + faults.tree_key(case)
        case["tree"] = key
        if key in trees:
            continue
        tree = stage / "faults" / key
        log(f"fault corpus: tree {key} ({case['op']}, as in case {case['name']})")
        if main:
            assert tilegym is not None
            export_checkout(tilegym, tree)
            strip_op(tree, case["op"])  # the pull request: its kernel.rs, nothing of the host side
        else:
            assemble_checkout(tree, tilegym_wheel(), [case["op"]], [case["op"]])
        faults.apply_sources(tree, case)
        outcome = port_op(tree, case["op"], cargo_target_dir, logs / f"fault_{key}.txt")
        if (tree / SO_REL).is_file():
            sh(["strip", "--strip-unneeded", str(tree / SO_REL)])
        for scratch in (".git", "cutile_kernel_out"):  # the run writes its own reports
            shutil.rmtree(tree / scratch, ignore_errors=True)
        trees[key] = outcome
        log(
            f"  {key}: port {outcome['port_verdict']} {outcome['port_class']}: {outcome['verdict_reason'][:120]}"
        )
    meta_cases = {}
    for name, case in cases.items():
        entry = {k: case[k] for k in ("op", "fault", "class", "change", "expect", "decided", "tree")}
        entry["test_timeout"] = case.get("test_timeout", faults.DEFAULT_TEST_TIMEOUT)
        if case["decided"] == "pack":
            port = trees[case["tree"]]
            got = {"verdict": port["port_verdict"], "class": port["port_class"],
                   "reason": port["verdict_reason"], "fix": port["fix"]}  # fmt: skip
            entry["result"] = faults.row(case, got)
        meta_cases[name] = entry
    return {"trees": trees, "cases": meta_cases}
