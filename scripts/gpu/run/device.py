"""``run``: the GPU half (standard library and ``bot.testresults``; the machine's python3 3.12 with torch and pytest).

Stages: ``unpack`` keeps every part found (bundle dir or earlier calls) under the state dir,
checks sha256s and extracts each archive once all of its parts are there; it is idempotent, so
parts can arrive in separate calls to a machine that stays warm. ``test`` sets up CUDA_HOME,
installs the carried wheels with ``pip --no-index --target``, then per op runs the pytest
selection on the hand-written tree (A) and ``agent-d verify`` on agent-d's tree (B) (same
pytest argv), the host-time benchmark, and writes results.json, summary.txt and logs.tar.gz.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpu import TREES
from gpu.bundle import all_parts, load_manifest, reassemble, sha256_file
from gpu.run.steps import Step, log, parse_pytest, parse_verify, run_step

STATE = Path("/tmp/agent-d-gpu")
BENCH = Path(__file__).resolve().parent / "bench.py"


# ------------------------------------------------------------------------------------ unpack


def unpack(bundle: Path, state: Path = STATE) -> dict:
    """Collect parts, extract complete archives; return {"ready": bool, "missing": [...], "manifest": ...}."""
    parts_dir, root = state / "parts", state / "root"
    parts_dir.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    manifest_path = Path(bundle) / "manifest.json"
    if manifest_path.is_file():
        shutil.copy2(manifest_path, state / "manifest.json")
    if not (state / "manifest.json").is_file():
        raise SystemExit(f"no manifest.json under {bundle} nor {state}: carry gpu_bundle/manifest.json")
    manifest = load_manifest(state)
    for part in all_parts(manifest):
        kept, here = parts_dir / part["name"], Path(bundle) / part["name"]
        if kept.is_file() and kept.stat().st_size == part["size"] and sha256_file(kept) == part["sha256"]:
            continue
        if here.is_file():
            if sha256_file(here) != part["sha256"]:
                raise SystemExit(f"{here}: sha256 does not match manifest.json (a part of another pack?)")
            shutil.copy2(here, kept)
            log(f"kept {part['name']} ({part['size'] / 2**20:.1f} MiB) in {parts_dir}")
    missing = [p["name"] for p in all_parts(manifest) if not (parts_dir / p["name"]).is_file()]
    for archive in manifest["archives"]:
        done = root / f"{archive['name']}.sha256"
        if done.is_file() and done.read_text().strip() == archive["sha256"]:
            continue
        if any(p["name"] in missing for p in archive["parts"]):
            continue
        joined = state / f"{archive['name']}.tar.xz"
        reassemble(archive, parts_dir, joined)
        shutil.rmtree(root / archive["name"], ignore_errors=True)
        start = time.monotonic()
        with tarfile.open(joined, "r:xz") as tf:
            if hasattr(tarfile, "tar_filter"):
                tf.extractall(root, filter="tar")
            else:
                tf.extractall(root)
        joined.unlink()
        done.write_text(archive["sha256"] + "\n")
        log(
            f"extracted {archive['name']} ({archive['size'] / 2**20:.1f} MiB, sha256 ok) in "
            f"{time.monotonic() - start:.0f}s"
        )
    ready = all((root / f"{a['name']}.sha256").is_file() for a in manifest["archives"]) and not missing
    if missing:
        log(
            f"waiting for {', '.join(missing)}: carry them in the next call while this machine is warm "
            f"(/tmp survives only while it is)"
        )
    else:
        log(f"bundle complete under {root}")
    return {"ready": ready, "missing": missing, "manifest": manifest}


# ------------------------------------------------------------------------------------ environment


def cuda_env(root: Path) -> dict[str, str]:
    """CUDA_HOME/PATH/LD_LIBRARY_PATH of gpu-recipe.md for the 13.4 tile toolchain."""
    home = root / "toolchain" / "cuda"
    return {
        "CUDA_HOME": str(home),
        "CUDA_PATH": str(home),
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "LD_LIBRARY_PATH": f"{home / 'lib'}"
        + (f"{os.pathsep}{os.environ['LD_LIBRARY_PATH']}" if os.environ.get("LD_LIBRARY_PATH") else ""),
        "CUTILE_TILEIRAS_PATH": str(home / "bin" / "tileiras"),
        "CUTILE_RS_AUTOBUILD": "0",
        "PYTHONUNBUFFERED": "1",
    }


def overlay_bot(site: Path) -> str:
    """This working tree's ``bot`` over the installed wheel's (a fix made after the pack); returns the
    commit it says it is ($AGENT_D_CHECKOUT_COMMIT, set by whoever sends the tree)."""
    checkout_bot = Path(__file__).resolve().parents[3] / "bot"
    shutil.rmtree(site / "bot", ignore_errors=True)
    shutil.copytree(checkout_bot, site / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    commit = os.environ.get("AGENT_D_CHECKOUT_COMMIT", "") or "unknown"
    log(f"bot/ from the working tree ({commit}) over the bundle's agent-d wheel")
    return commit


def install_wheels(python: str, root: Path, site: Path) -> str:
    wheels = sorted((root / "payload" / "wheels").glob("*.whl"))
    stamp = site / ".agent-d-wheels"
    key = "\n".join(w.name for w in wheels)
    if stamp.is_file() and stamp.read_text() == key:
        return "already installed"
    shutil.rmtree(site, ignore_errors=True)
    proc = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            str(site),
            *map(str, wheels),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"pip install of the carried wheels failed:\n{proc.stdout}{proc.stderr}")
    site.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key)
    return f"installed {len(wheels)} wheels into {site}"


PROBE = r"""
import json, importlib.util
info = {}
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = torch.cuda.is_available()
    if info["cuda"]:
        p = torch.cuda.get_device_properties(0)
        info["device"] = f"{p.name} (sm_{p.major}{p.minor})"
except Exception as exc:
    info["error"] = f"torch: {exc}"
for mod in ("cffi", "cuda.tile", "pytest", "pytest_timeout", "bot"):
    try:
        info[mod] = importlib.util.find_spec(mod) is not None
    except Exception:
        info[mod] = False
try:
    import subprocess
    info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=30).stdout.strip()
except Exception:
    info["driver"] = ""
print(json.dumps(info))
"""


def probe(python: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, env=env, timeout=180)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": (proc.stderr.strip().splitlines() or ["probe failed"])[-1]}


# ------------------------------------------------------------------------------------ the plan


def plan(
    manifest: dict,
    root: Path,
    site: Path,
    ops: list[str],
    python: str,
    out_logs: Path,
    cross: list[str] | None = None,
) -> list[Step]:
    """The commands of ``run --stage test``, in order (pure: no process is started).

    Ops that agent-d generated come first (hand-written pytest, then ``agent-d verify`` on tree B,
    whose pytest run uses the same argv), then one benchmark process for both trees, then the
    baseline-only ops (agent-d blocked at pack time). Weights share the time budget.
    An op's hand-written pytest and its ``agent-d verify`` share a group: they run side by side
    (correctness only; the benchmark processes run alone, one after the other).
    """
    steps: list[Step] = []
    a, b = root / "payload" / "hand_written", root / "payload" / "agent_d"
    reader = root / "payload" / "reader" / "kernel-reader"
    generated = [op for op in ops if manifest["ops"][op]["pack"]["status"] == "generated"]
    baseline_only = [op for op in ops if op not in generated]

    def pytest_step(op: str, weight: float, group: int) -> Step:
        argv = [python, "-m", "pytest", *manifest["ops"][op]["pytest_args"]]
        return Step("pytest", op, "hand_written", argv, str(a), {"PYTHONPATH": f"{a / 'src'}{os.pathsep}{site}"},
                    str(out_logs / f"{op}.hand_written.txt"), weight, group=group)  # fmt: skip

    for op in generated:
        group = len(steps)
        steps.append(pytest_step(op, 3.0, group))
        argv = [python, "-m", "bot.cli", "verify", "--repo", str(b), "--kernel", op, "--out",
                str(b / "cutile_kernel_out"), "--python", python, "--test-timeout", "{timeout}", "--json",
                "--no-perf"]  # fmt: skip  # the perf stage is a stage of its own (--stage perf)
        steps.append(Step("verify", op, "agent_d", argv, str(b), {"PYTHONPATH": str(site), "AGENT_D_READER": str(reader)},
                          str(out_logs / f"{op}.agent_d.verify.txt"), 3.0, group=group))  # fmt: skip
    # a new op has no hand-written wrapper to time against: its tree-A run is the cuTile baseline
    benched = [op for op in generated if not manifest["ops"][op].get("new")]
    if benched:
        # One process times both trees' wrappers, interleaved (bench.py); ``cross`` ops are also
        # timed over the other tree's library (only for ops whose two C signatures agree).
        argv = [python, str(BENCH), "--hand-written", str(a), "--agent-d", str(b), "--ops", *benched,
                "--cross", *[o for o in (cross or []) if o in benched], "--json", str(out_logs / "bench.json")]  # fmt: skip
        steps.append(Step("bench", ",".join(benched), "both", argv, str(a), {"PYTHONPATH": str(site)},
                          str(out_logs / "bench.txt"), 1.0, list(benched), group=len(steps)))  # fmt: skip
    for op in baseline_only:
        steps.append(pytest_step(op, 1.0, len(steps)))
    return steps


def groups(steps: list[Step]) -> list[list[Step]]:
    """``steps`` cut into their run groups, in order."""
    out: list[list[Step]] = []
    for step in steps:
        if out and out[-1][0].group == step.group:
            out[-1].append(step)
        else:
            out.append([step])
    return out


def run_group(group: list[Step], base_env: dict[str, str], timeout: float) -> list[dict]:
    """Run the steps of one group side by side, each with ``timeout``; results in step order."""
    if len(group) == 1:
        return [run_step(group[0], base_env, timeout)]
    with ThreadPoolExecutor(max_workers=len(group)) as pool:
        return list(pool.map(lambda s: run_step(s, base_env, timeout), group))


# ------------------------------------------------------------------------------------ log parsing


def last_line(text: str) -> str:
    """The last meaningful output line (why a run ended without a pytest failure line)."""
    lines = [
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith(("[gpu_proof]", "$ "))
    ]
    return lines[-1][:200] if lines else "(no output)"


_CUTILE_RS_ID = re.compile(r"cutile[_-]rs")


HAND_WRITTEN = "with hand-written code"
CUTILE_BASELINE = "on the cuTile backend"  # a new op's baseline


def mark(other: str, where: str = HAND_WRITTEN) -> str:
    """What the baseline run did with a test agent-d's tree failed ("" when it did not reach it)."""
    if not other:
        return f"not reached in the {'cuTile baseline' if where == CUTILE_BASELINE else 'hand-written'} run"
    if other in ("FAILED", "ERROR"):
        return f"also fails {where}"
    return f"{'passes' if other == 'PASSED' else other.lower()} {where}"


def compare(agent: dict, hand: dict, where: str = HAND_WRITTEN) -> list[dict]:
    """agent-d's failures, each marked with what the baseline run did for the same test id (a new
    op's baseline ran the cuTile backend: its id names ``cutile`` where ours names ``cutile_rs``)."""
    rows = []
    theirs = hand.get("outcomes", {})
    for test, outcome in agent.get("outcomes", {}).items():
        if outcome not in ("FAILED", "ERROR"):
            continue
        other = theirs.get(test, theirs.get(_CUTILE_RS_ID.sub("cutile", test))) or ""
        rows.append({"test": test, "outcome": outcome, "hand_written": other, "mark": mark(other, where)})
    return rows


# ------------------------------------------------------------------------------------ run


def run(
    bundle: Path,
    out: Path,
    ops: list[str] | None,
    stage: str,
    budget: float,
    python: str,
    state: Path = STATE,
    cross: list[str] | None = None,
    faults_only: list[str] | None = None,
    bot_from_checkout: bool = False,
    perf_options: dict | None = None,
) -> int:
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    got = unpack(bundle, state)
    manifest = got["manifest"]
    if stage == "unpack" or not got["ready"]:
        (out / "summary.txt").write_text(f"unpack: ready={got['ready']} missing={got['missing']}\n")
        if stage != "unpack":
            log("cannot test: the bundle is incomplete")
            return 2
        return 0
    root, site = state / "root", state / "site"
    ops = [op for op in (ops or list(manifest["ops"])) if op in manifest["ops"]]
    env = cuda_env(root)
    info = probe(python, {**os.environ, **env})
    results = _previous(state, manifest) or {"ops": {}}
    results.update(
        {
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tilegym_commit": manifest.get("tilegym_commit", ""),
            "agent_d_commit": manifest.get("agent_d_commit", ""),
            "agent_d_dirty": manifest.get("agent_d_dirty", False),
            "packed": manifest.get("created", ""),
            "bundle": manifest["archives"][-1]["sha256"],
            "device": info.get("device", ""),
            "driver": info.get("driver", ""),
            "torch": info.get("torch", ""),
        }
    )
    results.pop("blocked", None)
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for op in ops:
        # a bench-only or perf-only run keeps the op's test results from an earlier run of this bundle
        entry = results["ops"].get(op, {}) if stage in ("bench", "perf", "review") else {}
        entry.update({"pack": manifest["ops"][op]["pack"], "pytest_args": manifest["ops"][op]["pytest_args"]})
        if manifest["ops"][op].get("new"):  # no hand-written port: tree A ran the cuTile baseline
            entry.update({"new": True, "contract_lines": manifest["ops"][op].get("contract_lines", 0)})
        results["ops"][op] = entry
    if not info.get("cuda"):
        why = info.get("error") or "torch sees no CUDA device"
        log(f"no GPU here ({why}): the tests cannot run on this machine (BLOCKED env); nothing was tested")
        results["blocked"] = f"no CUDA GPU: {why}"
        _write_out(results, out, logs, root, state)
        return 3
    log(install_wheels(python, root, site))
    if bot_from_checkout:
        results["agent_d_overlay"] = overlay_bot(site)
    info = probe(python, {**os.environ, **env, "PYTHONPATH": str(site)})
    results["environment"] = info
    log(f"probe: {json.dumps(info)}")
    missing = [m for m in ("cffi", "cuda.tile", "pytest", "pytest_timeout", "bot") if not info.get(m)]
    if missing:
        log(f"warning: not importable with the carried wheels: {', '.join(missing)}")
    if stage == "faults":  # the fault corpus alone (scripts/gpu/run/faults.py)
        from gpu.run.faults import run_faults

        results["stage"] = stage
        results["faults"] = run_faults(manifest, root, site, python, env, state, logs, faults_only)
        _write_out(results, out, logs, root, state)
        return 0
    if stage == "perf":  # the perf stage of each generated op, one at a time (scripts/gpu/run/perf.py)
        from gpu.run.perf import perf_steps

        steps = perf_steps(manifest, root, site, ops, python, logs, **(perf_options or {}))
    elif stage == "review":  # the port job's seconds, the CPU checks before and beside pytest
        from gpu.run.review import review_steps

        steps = review_steps(manifest, root, site, ops, python, logs)
    else:
        steps = plan(manifest, root, site, ops, python, logs, cross)
    if stage == "bench":  # host time only, e.g. on a later machine for a bundle already tested
        steps = [s for s in steps if s.kind == "bench"]
    results["stage"] = stage
    deadline = t0 + budget
    cut = groups(steps)
    for i, group in enumerate(cut):
        left = sum(max(s.weight for s in g) for g in cut[i:])
        timeout = max(20.0, (deadline - time.monotonic() - 20) * max(s.weight for s in group) / left)
        for step in group:
            log(f"{step.kind} {step.op} [{step.tree}] (timeout {timeout:.0f}s)")
            if step.kind == "verify":  # the pack-time log (no GPU there) must not be read as this run's
                _pytest_log(root, step.op).unlink(missing_ok=True)
        for step, res in zip(group, run_group(group, env, timeout), strict=True):
            _record(step, res, results, root)
    for op in ops:
        r = results["ops"][op]
        if "agent_d" in r and "hand_written" in r:
            where = CUTILE_BASELINE if r.get("new") else HAND_WRITTEN
            r["agent_d"]["compared"] = compare(r["agent_d"], r["hand_written"], where)
        ht = r.get("host_time", {})
        a, b = ht.get("agent_d", {}).get("us_per_call"), ht.get("hand_written", {}).get("us_per_call")
        if a and b and "ratio" not in ht:
            ht["ratio"] = round(a / b, 3)
    _write_out(results, out, logs, root, state)
    return 0


def _pytest_log(root: Path, op: str) -> Path:
    return root / "payload" / "agent_d" / "cutile_kernel_out" / op / "correctness_cutile_rs.txt"


def _record(step: Step, res: dict, results: dict, root: Path) -> None:
    """Parse one finished step's log into ``results``."""
    pylog = _pytest_log(root, step.op)
    text = Path(step.log).read_text(encoding="utf-8", errors="replace")
    # when this step finished: a later bench-only call carries these results, not their time
    res["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if step.kind == "review":
        from gpu.run.review import record_review

        log(f"  review {step.op} [{step.tree}] -> exit={res['exit']}: {record_review(step, res, results)}")
        return
    if step.kind == "perf":
        from gpu.run.perf import record_perf

        detail = record_perf(step, res, results)
        log(
            f"  perf {step.op} -> exit={res['exit']}{' (timed out)' if res['timed_out'] else ''} in {res['seconds']}s: {detail}"
        )
        return
    if step.kind == "pytest":
        res.update(parse_pytest(text))
        if res["exit"] not in (0, None) and not res["first_failure"]:
            res["first_failure"] = last_line(text)
        results["ops"][step.op][step.tree] = res
    elif step.kind == "verify":
        res["verdict"] = parse_verify(text)
        res["verify_exit"] = res["exit"]
        cmd = re.search(r"^\$ (\S+ -m pytest .*)\nexit=(\S+)$", text, re.M)
        res["pytest_command"] = cmd.group(1) if cmd else ""
        res["exit"] = int(cmd.group(2)) if cmd and cmd.group(2).lstrip("-").isdigit() else None
        if pylog.is_file():
            ptext = pylog.read_text(encoding="utf-8", errors="replace")
            res.update(parse_pytest(ptext))
            res["pytest_log"] = str(pylog)
            if res["exit"] not in (0, None) and not res["first_failure"]:
                res["first_failure"] = last_line(ptext)
        else:
            res["first_failure"] = f"pytest not run by verify: {res['verdict'].get('reason', '')}"
        results["ops"][step.op]["agent_d"] = res
    else:
        bench = Path(step.argv[step.argv.index("--json") + 1])
        data = json.loads(bench.read_text()) if bench.is_file() else {}
        why = "timed out" if res["timed_out"] else f"no result: {last_line(text)}"
        for op in step.ops:
            got = data.get(op) or {"hand_written": {"error": why}, "agent_d": {"error": why}}
            if "error" in got:
                got = {"hand_written": {"error": got["error"]}, "agent_d": {"error": got["error"]}}
            results["ops"][op]["host_time"] = {**got, "finished_utc": res["finished_utc"]}
    detail = {"pytest": res.get("summary") or res.get("first_failure", ""), "bench": ""}.get(step.kind)
    if step.kind == "verify":
        v = res["verdict"]
        detail = f"pytest exit={res['exit']} ({res.get('summary', '')}); VERDICT: {v.get('verdict')} {v.get('class')}"
    log(
        f"  {step.kind} {step.op} [{step.tree}] -> exit={res.get('verify_exit', res['exit'])}{' (timed out)' if res['timed_out'] else ''} "
        f"in {res['seconds']}s" + (f": {detail}" if detail else "")
    )


def _previous(state: Path, manifest: dict) -> dict | None:
    """results.json of an earlier call on this warm machine for the same bundle (ops accumulate)."""
    path = state / "results.json"
    if not path.is_file():
        return None
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None
    return old if old.get("bundle") == manifest["archives"][-1]["sha256"] else None


def _write_out(results: dict, out: Path, logs: Path, root: Path, state: Path) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    (state / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    slim = json.loads(json.dumps(results))
    for r in slim["ops"].values():  # per-test outcomes stay in the logs, not in results.json
        for tree in TREES:
            if isinstance(r.get(tree), dict):
                outcomes = r[tree].pop("outcomes", {})
                r[tree]["tests_seen"] = len(outcomes)
    (out / "results.json").write_text(json.dumps(slim, indent=2) + "\n", encoding="utf-8")
    summary = summary_text(slim)
    (out / "summary.txt").write_text(summary, encoding="utf-8")
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tf:
        tf.add(logs, arcname="logs")
        reports = root / "payload" / "agent_d" / "cutile_kernel_out"
        if reports.is_dir():
            tf.add(reports, arcname="agent_d_reports")
        pack_logs = root / "payload" / "pack_logs"
        if pack_logs.is_dir():
            tf.add(pack_logs, arcname="pack_logs")
    print(summary, flush=True)


def summary_text(results: dict) -> str:
    lines = [
        f"{results['date']} device={results.get('device') or '-'} tilegym={results['tilegym_commit'][:12]}"
    ]
    if results.get("blocked"):
        lines.append(f"BLOCKED: {results['blocked']}")
    for op, r in results["ops"].items():
        hw, ad = r.get("hand_written", {}), r.get("agent_d", {})
        lines.append(
            f"{op}: hand-written {_counts(hw)}; agent-d "
            + (
                _counts(ad)
                if r["pack"]["status"] == "generated"
                else f"not generated (BLOCKED host: {r['pack']['reason']})"
            )
        )
        if ad.get("verdict"):
            lines.append(
                f"  agent-d verdict: {ad['verdict'].get('verdict')} {ad['verdict'].get('class')}: "
                f"{ad['verdict'].get('reason')}"
            )
        ht = r.get("host_time", {})
        if ht:
            lines.append(
                f"  host us/call: agent-d {ht.get('agent_d', {}).get('us_per_call')} hand-written "
                f"{ht.get('hand_written', {}).get('us_per_call')} ratio {ht.get('ratio')}"
            )
    if results.get("faults"):
        from gpu.run.faults import summary_lines

        lines += summary_lines(results["faults"])
    from gpu.run.perf import summary_lines as perf_lines

    lines += perf_lines(results)
    return "\n".join(lines) + "\n"


def _counts(r: dict) -> str:
    if not r:
        return "not run"
    s = f"{r.get('passed', 0)} passed, {r.get('failed', 0)} failed, {r.get('skipped', 0)} skipped"
    if r.get("timed_out"):
        s += " (timed out)"
    return s + f" exit={r.get('exit')}"
