"""The reports of a port run (docs/specification.md, "Reports and the returned block") and the block returned to the caller.

Files written by :func:`write_reports` in the per-kernel out folder ``<out root>/<op>/``:

- ``reports/correctness.md``: first line exactly ``VERDICT: ALL_PASS`` or ``VERDICT: FAIL``;
  a heading; the ``X passed, Y failed, Z skipped`` summary; the host artifacts; the results
  table (``| Test | Config | Result | Error | known_gaps |``, one row per test case); then the
  ``fail_class:``, ``host_fix:``, ``agent_b_followup:`` and ``pytest_log:`` lines.
- ``reports/agent_d.md`` and ``reports/agent_logs/agent_d.md``: the same decision log.
- ``correctness_cutile_rs.txt``: a byte copy of the raw pytest log, when its source is given
  and lives elsewhere.
- ``ffi.rs``: a byte copy of the checkout's generated ``ffi.rs``, when it exists (the
  upstream validator looks for it in the out folder).

BLOCKED runs. ``correctness.md`` has only two allowed first lines, and BLOCKED is not one of
them, so a BLOCKED run writes ``VERDICT: FAIL`` as the first line: whatever blocked the run,
the port is not proven correct. The block is stated right below the heading
(``Final verdict: **BLOCKED (block_class: <class>)**: <reason>``, the wording of every other
text, with a sentence on why the first line says FAIL) and again as a ``block_class:`` line
after ``pytest_log:``; ``fail_class:`` then carries the same class when it is ``host`` or
``kernel`` and stays empty for ``env``. The BLOCKED verdict itself is the last line of the
returned block (:func:`verdict_line`).

The returned block (:func:`validator_block`) holds ``exit=not-run`` for pytest when pytest
never started (a build failure, no GPU): there is no exit status to quote, and an invented
number would read like a real one.

Everything written is a function of the inputs: no clock, no host name. Writers never
raise on missing pieces (a None plan, build or test result); a report is always written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bot.classify.citation import citation
from bot.classify.types import Verdict, VerdictKind, verdict_headline
from bot.report.types import PortResult, ValidatorRun
from bot.testing.types import TestCase
from bot.testresults.cases import case_label, config_label

RAW_LOG_NAME = "correctness_cutile_rs.txt"
MAX_ERROR_CHARS = 160
_RESULT_WORD = {
    "passed": "PASS",
    "failed": "FAIL",
    "skipped": "SKIP",
    "error": "ERROR",
    "xfailed": "XFAIL",
    "xpassed": "XPASS",
}
FIRST_TIME_LINE = "first build and first pytest passed"
# a backend that could not be set up is no citation, whatever else the reason says (classify.py alike)


# --------------------------------------------------------------------------- small pieces


def verdict_line(verdict: Verdict | VerdictKind | str) -> str:
    """``VERDICT: ALL_PASS`` / ``VERDICT: FAIL`` / ``VERDICT: BLOCKED``."""
    if isinstance(verdict, Verdict):
        kind = verdict.kind
    elif isinstance(verdict, VerdictKind):
        kind = verdict
    else:
        kind = VerdictKind(str(verdict).removeprefix("VERDICT:").strip())
    return f"VERDICT: {kind.value}"


def md_cell(text: object, limit: int = 0) -> str:
    """One markdown table cell: one line, ``|`` escaped, optionally truncated with ``...``."""
    s = " ".join(str(text if text is not None else "").split())
    if limit and len(s) > limit:
        s = s[: limit - 3].rstrip() + "..."
    return s.replace("\\", "\\\\").replace("|", "\\|")


def _one_line(text: object) -> str:
    return " ".join(str(text or "").split())


def load_known_gaps(out_dir: Path) -> list[str]:
    """``known_gaps`` of ``reference/analysis.json`` as a list of one-line texts.

    Accepts a list of strings, a list of objects (their ``id``/``name`` and
    ``description``/``reason``/``gap`` fields, else the whole object as JSON) or an object
    mapping names to descriptions. Anything unreadable gives ``[]``.
    """
    try:
        data = json.loads((Path(out_dir) / "reference" / "analysis.json").read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return []
    gaps = data.get("known_gaps") if isinstance(data, dict) else None
    items: list[object]
    if isinstance(gaps, dict):
        items = [f"{k}: {v}" if v else str(k) for k, v in gaps.items()]
    elif isinstance(gaps, list):
        items = gaps
    elif isinstance(gaps, str) and gaps.strip():
        items = [gaps]
    else:
        return []
    out: list[str] = []
    for g in items:
        if isinstance(g, dict):
            name = next((str(g[k]) for k in ("id", "name", "key") if g.get(k)), "")
            desc = next((str(g[k]) for k in ("description", "reason", "gap", "detail") if g.get(k)), "")
            text = f"{name}: {desc}" if name and desc else name or desc or json.dumps(g, sort_keys=True)
        else:
            text = str(g)
        if _one_line(text):
            out.append(_one_line(text))
    return out


def cite_skip(reason: str, known_gaps: list[str], test_skips: list[str] | tuple[str, ...] = ()) -> str:
    """The citation that justifies a skip, or ``""`` when the skip is uncited: the verdict's own
    rule (``bot/classify/citation.py``)."""
    return citation(reason, known_gaps, test_skips)


def _rel(path: Path | str, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _copy_if_needed(src: Path, dst: Path) -> bool:
    """Copy ``src`` to ``dst`` unless they are the same file or already byte-identical."""
    try:
        if not src.is_file():
            return False
        if dst.exists() and (dst.resolve() == src.resolve() or dst.read_bytes() == src.read_bytes()):
            return True
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------- correctness.md


def _counts(result: PortResult) -> tuple[int, int, int, int]:
    t = result.tests
    if t is None:
        return 0, 0, 0, 0
    return t.passed, t.failed, t.skipped, t.errors


def summary_text(result: PortResult) -> str:
    """``X passed, Y failed, Z skipped`` (errors count as failed and are named after it)."""
    p, f, s, e = _counts(result)
    text = f"{p} passed, {f + e} failed, {s} skipped"
    if e:
        text += f" ({e} of the failed are pytest errors)"
    return text


def _when(when: str) -> str:
    if when in ("", "always"):
        return ""
    return " otherwise" if when == "else" else f" when {when}"


def _host_artifacts(result: PortResult, out_dir: Path) -> list[str]:
    target = result.target
    repo = Path(target.repo)
    symbol = result.plan.ffi.symbol if result.plan is not None else target.symbol
    lines = [_ffi_line(result, symbol, repo), *_cdylib_lines(result, symbol), _wrapper_line(result, repo)]
    if result.changed_files:
        lines.append(f"- files changed in the checkout: {', '.join(f'`{f}`' for f in result.changed_files)}")
    return lines


def _ffi_line(result: PortResult, symbol: str, repo: Path) -> str:
    """ffi.rs: the symbol it exports and the kernel variants it launches."""
    plan = result.plan
    ffi_rel = _rel(result.target.ffi_rs, repo)
    if plan is None or not plan.ffi.variants:
        return f"- ffi.rs: `{ffi_rel}` exports `{symbol}` (launch plan not available)"
    variants = "; ".join(
        v.entry + (f" [{v.tag}]" if v.tag else "") + _when(v.when) for v in plan.ffi.variants
    )
    style = f", {plan.ffi.style} style" if plan.ffi.style else ""
    dtypes = f", dtypes {', '.join(plan.ffi.dtypes)}" if plan.ffi.dtypes else ""
    return f"- ffi.rs: `{ffi_rel}` exports `{symbol}`{style}{dtypes}; launches {variants}"


def _cdylib_lines(result: PortResult, symbol: str) -> list[str]:
    """The cdylib: its path, the evidence that it exports the symbol, its build and ABI smoke call."""
    build = result.build
    if build is None:
        return ["- cdylib: not built in this run"]
    state = "built" if build.ok else "build FAILED"
    so = build.so_path or "(no path)"
    if build.symbol_found:
        evidence = f"`{symbol}` is a defined global FUNC in its ELF .dynsym (nm -D: `T {symbol}`)"
    elif build.ok:
        evidence = f"`{symbol}` NOT found among its exported functions"
    else:
        evidence = "no symbol check"
    others = [s for s in build.symbols if s != symbol]
    extra = f"; {len(others)} other cutile_* exports" if others else ""
    lines = [f"- cdylib: {state}, `{so}`; {evidence}{extra}"]
    if build.command:
        lines.append(f"  - build command: `{_one_line(build.command)}` ({build.seconds:.1f} s)")
    if build.smoke_detail or build.smoke_ok:
        lines.append(
            f"  - ABI smoke call: {'ok' if build.smoke_ok else 'FAILED'}"
            + (f" ({_one_line(build.smoke_detail)})" if build.smoke_detail else "")
        )
    return lines


def _wrapper_line(result: PortResult, repo: Path) -> str:
    """The wrapper: the name it registers for cutile-rs and its launch's config surface."""
    wrapper_rel = _rel(result.target.wrapper_py, repo)
    if result.plan is None:
        return f'- wrapper: `{wrapper_rel}` for backend "cutile-rs" (launch plan not available)'
    py = result.plan.python
    surface = f"launch {py.launch_mode}"
    if py.launch_mode == "autotune" or py.configs:
        keys = sorted({str(k) for c in py.configs for k in c})
        surface += f", {len(py.configs)} configs" + (f" over {', '.join(keys)}" if keys else "")
    if py.dtypes:
        surface += f", dtypes {', '.join(py.dtypes)}"
    return (
        f'- wrapper: `{wrapper_rel}` registers `{py.register_name}` for backend "cutile-rs" '
        f"({py.register_kind}); {surface}"
    )


def _table(cases: list[TestCase], known_gaps: list[str], test_skips: list[str]) -> list[str]:
    rows = [
        "| Test | Config | Result | Error | known_gaps |",
        "|------|--------|--------|-------|------------|",
    ]
    if not cases:
        rows.append("| (no test case ran) | | | | |")
        return rows
    for c in cases:
        word = _RESULT_WORD.get(c.outcome, c.outcome.upper())
        err = c.message if c.outcome in ("failed", "error", "xpassed", "xfailed") else ""
        gap = ""
        if c.outcome == "skipped":
            gap = cite_skip(c.message, known_gaps, test_skips) or "UNCITED"
            err = c.message
        rows.append(
            "| "
            + " | ".join(
                [
                    md_cell(case_label(c.nodeid)),
                    md_cell(config_label(c.nodeid)),
                    word,
                    md_cell(err, MAX_ERROR_CHARS),
                    md_cell(gap, MAX_ERROR_CHARS),
                ]
            )
            + " |"
        )
    return rows


def render_correctness(result: PortResult, out_dir: Path) -> str:
    """The text of ``reports/correctness.md`` (see the module docstring for BLOCKED)."""
    v = result.verdict
    kind = v.kind
    op = result.target.op
    blocked = kind == VerdictKind.BLOCKED
    first = "VERDICT: ALL_PASS" if kind == VerdictKind.ALL_PASS else "VERDICT: FAIL"
    lines = [first, "", f"# Agent D Report - {op}", ""]
    # The same words as the returned VERDICT line, the validator block, the review and the check.
    headline = verdict_headline(kind.value, v.klass or ("env" if blocked else ""))
    lines += [f"Final verdict: **{headline}**: {_one_line(v.reason)}", ""]
    if blocked:
        lines += [
            "The first line reads FAIL only because this file allows ALL_PASS or FAIL there: the run was "
            "blocked, so the tests proved nothing either way.",
            "",
        ]
    lines += ["## Summary", summary_text(result) + ".", ""]
    t = result.tests
    if t is not None and t.command:
        lines += [f"pytest: `{_one_line(t.command)}` (exit={_rc(t.exit_code)})", ""]
    elif t is None:
        lines += ["pytest: not run", ""]

    lines += ["## Host Artifacts", *_host_artifacts(result, out_dir), ""]

    cases = list(t.cases) if t is not None else []
    own_skips = list(t.test_skips) if t is not None else []
    lines += ["## Correctness Results", *_table(cases, load_known_gaps(out_dir), own_skips), ""]

    raw = Path(out_dir) / RAW_LOG_NAME
    fail_class = "" if kind == VerdictKind.ALL_PASS else (v.klass if v.klass in ("host", "kernel") else "")
    lines += [
        f"Summary: {summary_text(result)}",
        f"fail_class: {fail_class}",
        f"host_fix: {_one_line(v.host_fix)}",
        f"agent_b_followup: {_one_line(v.followup)}",
        f"pytest_log: {raw}" + ("" if raw.is_file() else _missing_log_note(t)),
    ]
    if blocked:
        lines.append(f"block_class: {v.klass or 'env'}")
    return "\n".join(lines) + "\n"


def _missing_log_note(tests: object) -> str:
    ran = getattr(tests, "ran", False)
    return " (missing)" if ran else " (not written: pytest did not run)"


# --------------------------------------------------------------------------- decision log


def _rc(rc: int | None) -> str:
    return "not-run" if rc is None else str(rc)


def first_time_pass(result: PortResult) -> bool:
    """ALL_PASS with no host fix and no failed or repeated build/test stage."""
    if result.verdict.kind != VerdictKind.ALL_PASS or _one_line(result.verdict.host_fix):
        return False
    if any(s.status == "failed" for s in result.stages):
        return False
    names = [s.name for s in result.stages]
    return all(names.count(n) == 1 for n in set(names) if "build" in n or "test" in n)


def render_decision_log(result: PortResult, decision_log: list[str], out_dir: Path) -> str:
    """The text of ``reports/agent_d.md`` (and its copy under ``agent_logs/``)."""
    v = result.verdict
    op = result.target.op
    lines = [f"# Agent D decision log - {op}", "", f"{verdict_line(v)}", ""]
    if v.reason:
        lines += [f"Reason: {_one_line(v.reason)}", ""]
    if v.klass:
        label = "block_class" if v.kind == VerdictKind.BLOCKED else "fail_class"
        lines += [f"{label}: {v.klass}", ""]

    lines += ["## Commands run"]
    cmds: list[str] = []
    if result.build is not None and result.build.command:
        b = result.build
        cmds.append(f"- build: `{_one_line(b.command)}` ({'ok' if b.ok else 'failed'}, {b.seconds:.1f} s)")
    if result.tests is not None and result.tests.command:
        t = result.tests
        cmds.append(f"- pytest: `{_one_line(t.command)}` (exit={_rc(t.exit_code)})")
    lines += cmds or ["- (no build or pytest command ran)"]
    lines.append("")

    lines += ["## Stages", "| Stage | Status | Seconds | Detail |", "|-------|--------|---------|--------|"]
    for s in result.stages:
        lines.append(
            f"| {md_cell(s.name)} | {md_cell(s.status)} | {s.seconds:.1f} | {md_cell(s.detail, 200)} |"
        )
    if not result.stages:
        lines.append("| (none recorded) | | | |")
    lines.append("")

    lines += ["## Decisions"]
    lines += [f"- {_one_line(d)}" for d in decision_log if _one_line(d)] or ["- (none recorded)"]
    lines.append("")

    lines += ["## Host fixes", f"- {_one_line(v.host_fix)}" if _one_line(v.host_fix) else "- none", ""]

    skips = [c for c in (result.tests.cases if result.tests else []) if c.outcome == "skipped"]
    lines += ["## Skips"]
    if skips:
        gaps = load_known_gaps(out_dir)
        for c in skips:
            cite = cite_skip(c.message, gaps, result.tests.test_skips if result.tests else [])
            lines.append(
                f"- `{c.nodeid}`: {_one_line(c.message) or '(no reason)'} -> "
                + (f"cited ({cite})" if cite else "UNCITED")
            )
    else:
        lines.append("- none")
    lines.append("")

    lines += ["## Outcome"]
    if first_time_pass(result):
        lines.append(FIRST_TIME_LINE)
    else:
        lines.append(f"{verdict_line(v)}: {_one_line(v.reason)}")
    if v.followup:
        lines.append(f"agent_b_followup: {_one_line(v.followup)}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- writers


def write_reports(
    out_dir: Path, result: PortResult, decision_log: list[str], pytest_log_src: Path | None
) -> None:
    """Write every report file of section 8 into ``out_dir``. Never raises on missing inputs.

    ``pytest_log_src`` is the raw pytest log; it is copied to ``correctness_cutile_rs.txt``
    unless it already is that file. When it is None an existing raw log is left alone (no
    log is ever made up).
    """
    out_dir = Path(out_dir)
    reports = out_dir / "reports"
    (reports / "agent_logs").mkdir(parents=True, exist_ok=True)

    if pytest_log_src is not None:
        _copy_if_needed(Path(pytest_log_src), out_dir / RAW_LOG_NAME)
    _copy_if_needed(Path(result.target.ffi_rs), out_dir / "ffi.rs")

    (reports / "correctness.md").write_text(render_correctness(result, out_dir), encoding="utf-8")
    log = render_decision_log(result, decision_log, out_dir)
    (reports / "agent_d.md").write_text(log, encoding="utf-8")
    (reports / "agent_logs" / "agent_d.md").write_text(log, encoding="utf-8")


def validator_block(pytest_cmd: str, pytest_rc: int | None, runs: list[ValidatorRun]) -> str:
    """The ``<VALIDATOR_OUTPUT>`` block, without the verdict line that follows it.

    ``pytest_rc`` None (pytest never ran) prints ``exit=not-run``. Each validator run's
    output is kept verbatim; a newline is added only when it does not end with one, so that
    ``exit=`` starts its own line.
    """
    lines = ["<VALIDATOR_OUTPUT>", f"$ {_one_line(pytest_cmd)}", f"exit={_rc(pytest_rc)}"]
    text = "\n".join(lines) + "\n"
    for run in runs:
        out = run.output
        if out and not out.endswith("\n"):
            out += "\n"
        text += f"\n$ {run.command}\n{out}exit={run.exit_code}\n"
    return text + "</VALIDATOR_OUTPUT>"


def returned_text(pytest_cmd: str, pytest_rc: int | None, runs: list[ValidatorRun], verdict: Verdict) -> str:
    """The whole answer of a run: the validator block, then the one verdict line."""
    return validator_block(pytest_cmd, pytest_rc, runs) + "\n" + verdict_line(verdict) + "\n"
