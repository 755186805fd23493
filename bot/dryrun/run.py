"""Stage "dry run": a few of the op's own test cases, run on a CPU for the cuTile reference and for
the generated wrapper, every launch recorded instead of run, then compared (``compare.py``).

It needs torch (a CPU build does) and ``cuda.tile`` in the interpreter that runs the tests; where
they are missing it says so in one line and the port goes on. Two pytest processes, side by side,
record the two backends (``plugin.py``; both choose the same cases, each keeps its own side's);
the merged records and the compared table are written into the reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

from bot import sandbox
from bot.dryrun.compare import compare
from bot.dryrun.result import DryRun, Row, describe_row
from bot.errors import Failed
from bot.testing import testrun

__all__ = ["DryRun", "dry_run", "host_fix", "table"]
from bot.plan.types import LaunchPlan
from bot.read.types import KernelSignature
from bot.targets.types import Target

SIDES = ("cutile", "cutile-rs")  # each recorded by its own pytest process
CASES = 3  # test cases compared: enough to tell one quantity from a coincidence
TIMEOUT_S = 300.0
RECORDS_NAME = "dry_run.json"
TABLE_NAME = "dry_run.md"
AGENT_D_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the `bot` package


def case_count(setting: str) -> int:
    """The number of cases a setting asks for: a positive whole number, else :data:`CASES`."""
    return int(setting) if setting.strip().isdigit() and int(setting) > 0 else CASES


def dry_run(
    target: Target,
    plan: LaunchPlan,
    signature: KernelSignature,
    python: str,
    tests: testrun.TestFile,
    out_dir: Path,
    cases: int | None = None,
    timeout: float = TIMEOUT_S,
    reference_module: str = "",
) -> DryRun:
    """``cases``: how many of the test file's cases to compare; by default ``$AGENT_D_DRYRUN_CASES``
    when that is a positive number (a porter's wider check), else :data:`CASES`."""
    data = record(target, python, tests, out_dir, cases, timeout)
    if isinstance(data, str):
        return DryRun("not run", data)
    found = compare(plan, signature, data.get("cases", {}), reference_module)
    if found.status == "not compared" and data.get("skipped_files"):
        found.why = "pytest skipped the test file: " + "; ".join(data["skipped_files"])
    return found


def record(
    target: Target,
    python: str,
    tests: testrun.TestFile,
    out_dir: Path,
    cases: int | None = None,
    timeout: float = TIMEOUT_S,
    autotune: bool = False,
) -> dict | str:
    """The plugin's records of the op's test cases on the CPU (``{"cases": {nodeid: ...}, ...}``),
    every launch and C call recorded instead of run; a string: why there are none. ``autotune``:
    TileGym's autotuning left on, so each side takes its autotuned path, the search recorded and
    its first config launched (the plugin tunes nothing); off, each takes its untuned path."""
    cases = cases or case_count(os.environ.get("AGENT_D_DRYRUN_CASES", ""))
    records = out_dir / RECORDS_NAME
    records.unlink(missing_ok=True)
    missing = _missing_modules(python)
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        return f"{', '.join(missing)} {verb} not importable by {python}"
    argv, selection = testrun.command(python, tests, backend="cutile")  # both cutile and cutile_rs ids
    argv = [python, "-m", "pytest", "-p", "bot.dryrun.plugin", "-p", "no:cacheprovider", *tests.paths]
    argv += ["-k", selection, "-q", "--tb=line", "-o", "addopts="]
    env = dict(os.environ)
    env.update(
        {
            # the checkout's src/ first, as the tests run (bot/testing/testrun.py), then the plugin's package
            "PYTHONPATH": os.pathsep.join(
                x for x in (str(target.repo / "src"), str(AGENT_D_ROOT), env.get("PYTHONPATH", "")) if x
            ),
            "AGENT_D_DRYRUN_OUT": "",  # below: where this run may write it
            "AGENT_D_DRYRUN_CASES": str(cases),
            "AGENT_D_DRYRUN_TESTS": " ".join(tests.functional),
            "TILEGYM_DISABLE_AUTOTUNE": "0" if autotune else "1",  # both sides launch their first config
        }
    )
    parts = {side: out_dir / f"dry_run.{side}.json" for side in SIDES}
    try:
        finished = _record_sides(argv, env, target.repo, parts, timeout)
    except OSError as exc:
        return f"{python} could not be started ({exc})"
    if isinstance(finished, str):
        return finished
    missing = [side for side, part in parts.items() if not part.is_file()]
    if missing:
        proc = finished[missing[0]]
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        return f"pytest wrote no records for {missing[0]} (exit {proc.returncode}: {tail[0][:200]})"
    data = _merged([json.loads(part.read_text(encoding="utf-8")) for part in parts.values()])
    records.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    for part in parts.values():
        part.unlink()
    if data.get("unavailable"):
        return "; ".join(data["unavailable"])
    return data


def _record_sides(
    argv: list[str], env: dict[str, str], repo: Path, parts: dict[str, Path], timeout: float
) -> dict[str, subprocess.CompletedProcess] | str:
    """One pytest process per side, side by side (each imports torch and runs its cases on its
    own cores); each writes its part. A string: why they did not finish."""
    procs: dict[str, subprocess.Popen] = {}
    done: dict[str, subprocess.CompletedProcess] = {}
    with contextlib.ExitStack() as stack:  # each part lands where it belongs once its process ended
        try:
            for side, part in parts.items():
                part.unlink(missing_ok=True)
                written = stack.enter_context(sandbox.result_file(part))
                side_env = {**env, "AGENT_D_DRYRUN_OUT": str(written), "AGENT_D_DRYRUN_SIDE": side}
                boxed = sandbox.wrap(
                    argv, repo, side_env, readable=(AGENT_D_ROOT,), writable=(written.parent,)
                )
                procs[side] = subprocess.Popen(
                    boxed, cwd=repo, env=side_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            deadline = time.monotonic() + timeout
            for side, proc in procs.items():
                out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
                done[side] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            return f"the dry run outlasted {timeout:.0f} s"
        finally:
            for proc in procs.values():  # a timeout, an interrupt: no pytest is left behind
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return done


def _merged(parts: list[dict]) -> dict:
    """The two sides' records as one run's: every case, and each reason said once."""
    merged: dict = {"cases": {}, "unavailable": [], "skipped_files": []}
    for part in parts:
        merged["cases"].update(part.get("cases", {}))
        for key in ("unavailable", "skipped_files"):
            merged[key] += [x for x in part.get(key, []) if x not in merged[key]]
    return merged


_PROBE = (
    "import importlib.util as u\n"
    "for name in ('torch', 'cuda.tile', 'pytest'):\n"
    "    try:\n"
    "        found = u.find_spec(name)\n"
    "    except ImportError:\n"
    "        found = None\n"
    "    if found is None:\n"
    "        print(name)\n"
)


def _missing_modules(python: str) -> list[str]:
    """What the dry run needs and ``python`` lacks, found without importing torch (seconds)."""
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"anything ({exc})"]
    if proc.returncode != 0:
        return [f"anything (exit {proc.returncode})"]
    return proc.stdout.split()


def table(run: DryRun, op: str) -> str:
    """The dry run as a report: its verdict line, each compared value, each case not compared."""
    lines = [f"# Launch dry run: {op}", "", run.headline(), ""]
    if run.rows:
        lines += [
            "| Case | Parameter | What | cuTile reference | cutile-rs | Same |",
            "|---|---|---|---|---|---|",
        ]
        lines += [_row(r) for r in run.rows]
        lines.append("")
    lines += [f"- not compared: {why}" for why in run.skipped]
    lines += [f"- note: {note}" for note in run.notes]
    return "\n".join(lines).rstrip() + "\n"


def _row(r: Row) -> str:
    cells = [r.case, r.param, r.what, r.reference, r.cutile_rs, "yes" if r.same else "**no**"]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def stop_for(run: DryRun, contract_differences: list[str]) -> Failed | None:
    """The verdict a dry run's differences make: the port launching otherwise than the reference
    is the host's (``FAIL (host)``, both values); a tensor passed as the reference passes it, of an
    element type kernel.rs does not declare for it, is the kernel's (``FAIL (kernel)``)."""
    if run.host_differences:
        return Failed("host", run.headline(), host_fix=host_fix(run, contract_differences))
    if run.kernel_differences:
        first = run.kernel_differences[0]
        return Failed(
            "kernel",
            f"kernel.rs cannot take {first.param} as the reference passes it: {first.reference}, "
            f"the reference passes {first.cutile_rs} ({first.case})",
            followup=f"declare {first.param} in kernel.rs with the element type the reference passes "
            f"({first.cutile_rs}), or convert it in the kernel",
        )
    return None


def host_fix(run: DryRun, contract_differences: list[str]) -> str:
    """The fix line of a dry-run difference: the contract key when the porter's contract changed the
    launch, else what agent-d launched otherwise."""
    first = (run.host_differences or run.differences)[0]
    if contract_differences:
        return f"host_contract.yaml: {contract_differences[0]}: launch as the reference does ({describe_row(first)})"
    return f"launch {first.param} as the reference does: {describe_row(first)}"
