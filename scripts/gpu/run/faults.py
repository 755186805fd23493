"""``run --stage faults``: the fault corpus on the GPU machine (standard library and ``bot.testresults``).

Each case ``decided`` on the GPU gets a fresh copy of its tree (the library built at pack time),
its ``after_port`` edits, its environment and interpreter, and ``agent-d verify --json``; the
verdict, class, reason and fix line it printed are set beside what the case expects. Cases decided
at pack time carry the pack's result. The control (no change) runs first and alone; the other cases a few at a time, each in its own
process and tree.
"""

from __future__ import annotations

import fnmatch
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpu import faults
from gpu.run.steps import Step, log, parse_pytest, parse_verify, run_step

WORKERS = 4
GRACE_S = 120  # verify's own stages around its pytest run (probe, registration, reports)


def run_faults(
    manifest: dict,
    root: Path,
    site: Path,
    python: str,
    env: dict[str, str],
    state: Path,
    logs: Path,
    only: list[str] | None = None,
) -> dict:
    """Every case's row (faults.row) with how its verify ran: exit, seconds, first failure, logs.
    ``only``: the cases whose names match one of these fnmatch patterns."""
    cases = manifest.get("faults", {}).get("cases", {})
    if only:
        cases = {n: c for n, c in cases.items() if any(fnmatch.fnmatch(n, pattern) for pattern in only)}
    rows = {name: dict(case["result"]) for name, case in cases.items() if case["decided"] == "pack"}
    on_gpu = [(name, case) for name, case in cases.items() if case["decided"] == "gpu"]
    log(
        f"fault corpus: {len(rows)} cases decided at pack time, {len(on_gpu)} to run here, {WORKERS} at a time"
    )
    # The control first and alone: its seconds are one kernel's verify path on an otherwise idle runner.
    controls = [(name, case) for name, case in on_gpu if not case["change"]]
    for name, case in controls:
        rows[name] = _one(name, case, root, site, python, env, state, logs)
    rest = [item for item in on_gpu if item not in controls]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = pool.map(lambda item: _one(*item, root, site, python, env, state, logs), rest)
        rows.update(dict(zip([name for name, _ in rest], done, strict=True)))
    matched = sum(1 for r in rows.values() if r.get("match"))
    log(f"fault corpus: {matched} of {len(rows)} classified as expected")
    return {name: rows[name] for name in cases}


def _one(
    name: str, case: dict, root: Path, site: Path, python: str, env: dict[str, str], state: Path, logs: Path
) -> dict:
    case = {**case, "name": name}
    tree = state / "fault_trees" / name
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(root / "payload" / "faults" / case["tree"], tree, symlinks=True)
    faults.apply_after_port(tree, case)
    out = state / "fault_out" / name
    shutil.rmtree(out, ignore_errors=True)
    interpreter = faults.interpreter(case, python, state)
    timeout = int(case["test_timeout"])
    argv = [python, "-m", "bot.cli", "verify", "--repo", str(tree), "--kernel", case["op"], "--out", str(out),
            "--python", interpreter, "--test-timeout", str(timeout), "--json"]  # fmt: skip
    reader = root / "payload" / "reader" / "kernel-reader"
    step_env = faults.environment(case, {"PYTHONPATH": str(site), "AGENT_D_READER": str(reader)})
    step = Step(
        "fault", case["op"], name, argv, str(tree), step_env, str(logs / "faults" / f"{name}.verify.txt")
    )
    log(f"fault {name}: {case['fault']}")
    ran = run_step(step, env, timeout + GRACE_S)
    text = Path(step.log).read_text(encoding="utf-8", errors="replace")
    got = parse_verify(text)
    row = faults.row(case, got)
    row.update({"exit": ran["exit"], "timed_out": ran["timed_out"], "seconds": ran["seconds"]})
    kept = logs / "faults" / name
    if out.is_dir():  # the reports and pytest logs of this verify, for the table and as recorded logs
        shutil.copytree(out, kept, dirs_exist_ok=True)
        pylog = out / case["op"] / "correctness_cutile_rs.txt"
        if pylog.is_file():
            row["first_failure"] = parse_pytest(pylog.read_text(encoding="utf-8", errors="replace"))[
                "first_failure"
            ]
    mark = "as expected" if row["match"] else f"NOT as expected ({', '.join(row['wrong'])})"
    log(f"  {name}: {got.get('verdict')} {got.get('class')} in {ran['seconds']}s: {mark}")
    return row


def summary_lines(rows: dict) -> list[str]:
    lines = []
    for name, r in rows.items():
        got, expected = r["got"], r["expected"]
        mark = "ok" if r["match"] else "MISMATCH"
        lines.append(
            f"fault {name}: expected {expected['verdict']} {expected['class']}, got {got['verdict']} {got['class']} "
            f"[{mark}]; fix: {got['fix']}"
        )
    return lines
