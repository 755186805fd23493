"""``table``: render docs/gpu.md from the results.json that ``run`` wrote."""

from __future__ import annotations

import json
from pathlib import Path

from gpu import TREES
from gpu.run.device import CUTILE_BASELINE, HAND_WRITTEN, mark

NOT_RUN = "not run"


def ran_commit(results: dict) -> str:
    """The agent-d that ran: the working tree's bot/ when the run put it over the bundle's wheel."""
    return str(results.get("agent_d_overlay") or results.get("agent_d_commit", "?"))


def _cell_counts(r: dict | None) -> str:
    if not r:
        return NOT_RUN
    s = f"{r.get('passed', 0)} / {r.get('failed', 0)} / {r.get('skipped', 0)}"
    if r.get("errors"):
        s += f" (+{r['errors']} errors)"
    if r.get("timed_out"):
        s += " (timed out, partial)"
    return s


def _exit(r: dict | None) -> str:
    if not r:
        return "-"
    if r.get("timed_out"):
        return "timed out"
    return "not run" if r.get("exit") is None else str(r["exit"])


def _first(r: dict | None) -> str:
    if not r or not r.get("first_failure"):
        return "-"
    return "`" + r["first_failure"].replace("|", "\\|").replace("`", "'")[:160] + "`"


def _us(d: dict | None) -> str:
    if not d:
        return "-"
    if "us_per_call" in d:
        return f"{d['us_per_call']:.1f} µs"
    return "error: " + str(d.get("error", "?")).replace("|", "\\|")[:80]


def merge(runs: list[dict]) -> dict:
    """Results of several runs against one TileGym commit as one. Per op, a later run's entries
    (its tests, its host times) replace an earlier run's, and the op records which run (bundle,
    agent-d commit, time) its tests and its host times come from."""
    # a run of the fault corpus alone used the tilegym wheel, no checkout: it merges with any
    commits = {r.get("tilegym_commit") for r in runs} - {""}
    if len(commits) > 1:
        raise ValueError(
            f"results of different TileGym commits cannot be merged: {sorted(map(str, commits))}"
        )
    merged = dict(runs[-1])
    merged["tilegym_commit"] = next(iter(commits), "")
    merged["ops"] = {}
    merged["runs"] = []
    for r in runs:
        origin = {
            "time_utc": r.get("time_utc", "?"),
            "agent_d_commit": ran_commit(r),
            "bundle": str(r.get("bundle", "?")),
            "stage": r.get("stage", "all"),
        }
        ran_tests = origin["stage"] not in ("bench", "perf")  # those carry an earlier call's tests
        for op, entry in r.get("ops", {}).items():
            into = merged["ops"].setdefault(op, {})
            tests = {t: entry[t] for t in TREES if t in entry}
            # a bench-only run carries the tests of an earlier call; an earlier file's own record wins
            if tests and (ran_tests or not any(t in into for t in TREES)):
                into.update(tests)
                into["tests_from"] = _when(origin, next(iter(tests.values())))
            into.update({k: v for k, v in entry.items() if k not in TREES})
            if "host_time" in entry:
                into["host_time_from"] = _when(origin, entry["host_time"])
            if "perf" in entry:
                into["perf_from"] = _when(origin, entry["perf"])
        ran = [
            op
            for op, entry in r.get("ops", {}).items()
            if "host_time" in entry or "perf" in entry or any(t in entry for t in TREES)
        ]
        merged["runs"].append({**origin, "ops": sorted(ran)})  # an op only packed in that run is not listed
    faults = {  # a later run's row wins, and says which run it is from
        name: {
            **row,
            "from": {"time_utc": r.get("time_utc", "?"), "agent_d_commit": ran_commit(r)},
        }
        for r in runs
        for name, row in r.get("faults", {}).items()
    }
    if faults:
        merged["faults"] = faults
    merged["time_utc"] = runs[0].get("time_utc", "?")
    merged["date"] = runs[0].get("date", "?")
    return merged


def _when(origin: dict, measured: dict) -> dict:
    """The run's origin, timed by the measurement's own stamp where it has one."""
    stamp = measured.get("finished_utc") if isinstance(measured, dict) else None
    return {**origin, "time_utc": stamp} if stamp else origin


def _origin(o: dict | None) -> str:
    return f"{o['time_utc']}, agent-d `{o['agent_d_commit'][:7]}`" if o else "-"


def render(results: dict, sources: list[str] | None = None) -> str:
    """Markdown tables of ``results``; ``sources`` (the results files, as given) go in the header."""
    out = ["# agent-d on a GPU: TileGym's cutile-rs correctness tests", ""]
    out.append(
        f"- Date: {results.get('date', '?')} (run at {results.get('time_utc', '?')}, bundle packed "
        f"{results.get('packed', '?')})"
    )
    if len(results.get("runs", [])) > 1:
        out.append(
            "- Runs merged here (each op's table says which run its figures come from): "
            + "; ".join(
                f"{r['time_utc']} ({r['stage']}{': ' if r['ops'] else ''}{', '.join(r['ops'])}; "
                f"agent-d `{r['agent_d_commit'][:7]}`)"
                for r in results["runs"]
            )
        )
    out.append(f"- TileGym commit: `{results.get('tilegym_commit', '?')}`")
    dirty = " (with uncommitted changes)" if results.get("agent_d_dirty") else ""
    if len(results.get("runs", [])) <= 1:
        out.append(f"- agent-d commit: `{results.get('agent_d_commit', '?')}`{dirty}")
    device = results.get("device") or "no GPU"
    extra = ", ".join(
        x
        for x in (
            f"driver {results['driver']}" if results.get("driver") else "",
            f"torch {results['torch']}" if results.get("torch") else "",
        )
        if x
    )
    out.append(f"- Device: {device}" + (f" ({extra})" if extra else ""))
    out.append(
        "- Reproduce: `python scripts/gpu_proof.py pack --tilegym <checkout>` on a CPU machine, "
        "`python3 scripts/gpu_proof.py run --bundle gpu_bundle --out OUT` on the GPU machine, "
        "`python scripts/gpu_proof.py table --results OUT/results.json [MORE.json ...] --out docs/gpu.md` "
        "(docs/gpu-proof.md)."
    )
    if sources:
        out.append(f"{RENDERED_FROM}{' '.join(f'`{x}`' for x in sources)}")
    out.append("")
    out.append(
        "Each op runs twice in the same run: on a checkout whose host files and wiring were removed and "
        "regenerated by `agent-d port` (column *agent-d*), and on the same checkout with TileGym's "
        "hand-written host code (column *hand-written*). Same pytest command for both "
        "(docs/specification.md, The correctness run: `-x --timeout=60 --tb=short -v`, so a run stops at its first failure); "
        "the agent-d column is the pytest run of `agent-d verify`, whose verdict is shown. "
        "Host time: median host time per call of each tree's wrapper, called directly on the same "
        "inputs and running the same kernel (autotuning pinned to the first config), both wrappers "
        "timed in one process, interleaved round by round; ratio = median over rounds of "
        "agent-d / hand-written (`scripts/gpu/run/bench.py`)."
    )
    if results.get("blocked"):
        out += ["", f"**Nothing was tested: {results['blocked']}**"]
    for op, r in results.get("ops", {}).items():
        pack = r.get("pack", {})
        generated = pack.get("status") == "generated"
        ad, hw = r.get("agent_d"), r.get("hand_written")
        ht = r.get("host_time", {})
        out += ["", f"## {op}", ""]
        new = bool(r.get("new"))
        if new:
            out += _new_op_rows(r, ad, hw)
        else:
            out.append("| | agent-d host code | hand-written host code |")
            out.append("| --- | --- | --- |")
        if generated and not new:
            out.append(f"| Tests passed / failed / skipped | {_cell_counts(ad)} | {_cell_counts(hw)} |")
            out.append(f"| pytest exit | {_exit(ad)} | {_exit(hw)} |")
            out.append(f"| First failure | {_first(ad)} | {_first(hw)} |")
            v = (ad or {}).get("verdict") or {}
            verdict = f"`VERDICT: {v['verdict']}`" if v.get("verdict") else "-"
            if v.get("class"):
                verdict += f" ({v['class']}: {v.get('reason', '')})".replace("|", "\\|")
            out.append(f"| Verdict agent-d posted | {verdict} | - |")
            out.append(f"| Host time per call | {_us(ht.get('agent_d'))} | {_us(ht.get('hand_written'))} |")
            ratio = ht.get("ratio")
            out.append(
                f"| Host time ratio agent-d / hand-written | {ratio:.2f} | |"
                if ratio
                else "| Host time ratio agent-d / hand-written | - | |"
            )
            if "tests_from" in r or "host_time_from" in r:
                out.append(f"| Tests run in | {_origin(r.get('tests_from'))} | the same run |")
                out.append(
                    f"| Host time measured in | {_origin(r.get('host_time_from'))} | the same process |"
                )
            crossed = [k for k in ("agent_d_py+hand_written_so", "hand_written_py+agent_d_so") if k in ht]
            if crossed:
                out.append(
                    "| Host time, this wrapper over the other tree's library | "
                    + " | ".join(
                        f"{_us(ht.get(k))} (over the {k.split('+')[1][:-3].replace('_', '-')} .so)"
                        for k in crossed
                    )
                    + " |"
                )
        elif not new:
            why = f"not generated (BLOCKED host: {pack.get('reason', '?')})".replace("|", "\\|")
            out.append(f"| Tests passed / failed / skipped | {why} | {_cell_counts(hw)} |")
            out.append(f"| pytest exit | - | {_exit(hw)} |")
            out.append(f"| First failure | - | {_first(hw)} |")
            out.append(
                f"| Verdict agent-d posted | `VERDICT: {pack.get('port_verdict') or 'BLOCKED'}` "
                f"({pack.get('port_class') or 'host'}, at pack time) | - |"
            )
            out.append("| Host time ratio agent-d / hand-written | - | |")
        failures = (ad or {}).get("compared") or []
        if failures:
            where = CUTILE_BASELINE if new else HAND_WRITTEN
            out += ["", "Failures with agent-d's host code:", ""]
            for f in failures:
                out.append(f"- `{f['test']}`: {f['outcome']}, {mark(f.get('hand_written', ''), where)}")
    if results.get("faults"):
        out += _fault_rows(results["faults"])
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fault_rows(rows: dict) -> list[str]:
    """The fault corpus (scripts/gpu/faults.py): each faulty port, what agent-d must say, what it said."""
    matched = sum(1 for r in rows.values() if r.get("match"))
    out = [
        "",
        "## Fault corpus",
        "",
        f"Faulty ports built by us from working ones (`tests/fixtures/faults/`, docs/classification.md): "
        f"{matched} of {len(rows)} classified as expected. *Expected* is the verdict and class the case "
        "must get; *fix line* is the one line agent-d printed for whoever must act, and it must contain "
        "the case's expected text. A case decided at pack time stopped before anything ran on the GPU.",
        *_fault_runs(rows),
        "",
        "| fault | class of the fault | expected | got | fix line agent-d printed | as expected |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in rows.items():
        expected, got = r["expected"], r["got"]
        where = ", at pack time" if r.get("decided") == "pack" else ""
        verdict = f"{got.get('verdict') or '-'} ({got.get('class') or '-'})"
        ok = "yes" if r.get("match") else "no: " + ", ".join(r.get("wrong", []))
        out.append(
            f"| {_cell(r['fault'])} (`{name}`{where}) | {r.get('class_of_fault', '')} | "
            f"{expected['verdict']} ({expected['class']}); fix has `{_cell(expected['fix'])}` | {verdict} | "
            f"{_cell(got.get('fix') or '-')} | {ok} |"
        )
    return out


def _fault_runs(rows: dict) -> list[str]:
    """Which run the rows come from (merged results say it per row; one run's rows do not)."""
    runs = sorted(
        {(r["from"]["time_utc"], r["from"]["agent_d_commit"]) for r in rows.values() if "from" in r}
    )
    if not runs:
        return []
    return [
        "",
        "Rows from: " + "; ".join(f"{when}, agent-d `{str(commit)[:7]}`" for when, commit in runs) + ".",
    ]


def _new_op_rows(r: dict, ad: dict | None, base: dict | None) -> list[str]:
    """An op TileGym has no cutile-rs port of: our kernel with agent-d's host code against the same
    test cases on the cuTile backend (tree A runs them with ``-k cutile``)."""
    pack = r.get("pack", {})
    rows = [
        "| | cutile-rs: our kernel.rs, agent-d host code | cuTile backend, same test cases |",
        "| --- | --- | --- |",
        f"| Contract lines the porter wrote | {r.get('contract_lines', 0)} | |",
    ]
    if pack.get("status") != "generated":
        why = f"not generated ({pack.get('port_verdict') or 'BLOCKED'} {pack.get('port_class') or 'host'}: "
        why = (why + f"{pack.get('reason', '?')})").replace("|", "\\|")
        return rows + [f"| Tests passed / failed / skipped | {why} | {_cell_counts(base)} |"]
    v = (ad or {}).get("verdict") or {}
    verdict = f"`VERDICT: {v['verdict']}`" if v.get("verdict") else "-"
    if v.get("class"):
        verdict += f" ({v['class']}: {v.get('reason', '')})".replace("|", "\\|")
    return rows + [
        f"| Tests passed / failed / skipped | {_cell_counts(ad)} | {_cell_counts(base)} |",
        f"| pytest exit | {_exit(ad)} | {_exit(base)} |",
        f"| First failure | {_first(ad)} | {_first(base)} |",
        f"| Verdict agent-d posted | {verdict} | - |",
    ]


# the header line that lists the results files, so the tables can be checked against them
RENDERED_FROM = "- Tables rendered by `table --results` from: "
NOTES = "\n## What these runs show"  # a hand-written section after the tables, kept across renders


def _shown(path: Path) -> str:
    """A results path as the header shows it: relative to here when below here, so no machine path."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return resolved.name


def table(results_paths: list[Path], out_path: Path) -> str:
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in results_paths]
    text = render(merge(runs) if len(runs) > 1 else runs[0], [_shown(p) for p in results_paths])
    old = Path(out_path).read_text(encoding="utf-8") if Path(out_path).is_file() else ""
    if NOTES in old:
        text += old[old.index(NOTES) :]
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(text, encoding="utf-8")
    return text
