"""Stage E's files (bot/perf/reports.py) written from a parsed run, and their validators
(bot/perf/validate.py): agent-d's own checks, and TileGym's ``validate_perf_log.sh`` and
``validate_agent_e.sh`` run on the same folders when ``$AGENT_D_TILEGYM`` names a TileGym checkout
(the scripts are read there at run time, never copied into this repository).

The runs are the real ones of tests/fixtures/perf/ (tests/test_perf_records.py says how they were made).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from perf_support import tilegym_checkout
from test_perf_records import _read

from bot.perf import reports, summarise, validate
from bot.perf.result import CUTILE, CUTILE_RS, PYTORCH
from bot.report import report

OP = "silu_and_mul"


def _written(tmp_path: Path, fixture: str = "silu_and_mul_cpu") -> tuple[Path, object]:
    result = summarise.summarise(_read(fixture), command="python -m pytest ...", exit_code=0)
    out_dir = tmp_path / "out" / OP
    reports.write(result, OP, out_dir)
    reports.write_agent_log(result, OP, out_dir, "(validators)")
    return out_dir, result


def test_the_reports_of_a_done_run(tmp_path):
    out_dir, result = _written(tmp_path)
    md = (out_dir / "reports" / "performance.md").read_text()
    assert md.splitlines()[0] == "VERDICT: DONE"
    assert sum(ln.startswith("geomean_ratio=") for ln in md.splitlines()) == 1
    assert f"geomean_ratio={result.geomean_ratio:.4f}" in md and "Severity: DONE" in md
    assert "| 64-1024-512-torch.float16 | float16 |" in md
    for backend, name in reports.PERF_LOGS.items():
        text = (out_dir / name).read_text()
        assert text.count(reports.SECTION) == 2 and text.count("PASSED") == 2, backend
        assert "FAILED" not in text and "Traceback" not in text
    assert "'cutile-rs'" in (out_dir / reports.PERF_LOGS[CUTILE_RS]).read_text()
    assert "'cutile'" in (out_dir / reports.PERF_LOGS[CUTILE]).read_text()
    assert "'pytorch'" in (out_dir / reports.PERF_LOGS[PYTORCH]).read_text()
    assert (out_dir / reports.INVESTIGATION).read_text() == ""
    run = validate.check(out_dir, OP)
    assert run.exit_code == 0 and run.output.endswith("---\nPASS\n"), run.output


def test_a_blocked_run_says_so_and_keeps_failures_out_of_the_validator_input(tmp_path):
    out_dir, result = _written(tmp_path, "silu_and_mul_cpu_no_graphs")
    md = (out_dir / "reports" / "performance.md").read_text()
    assert md.splitlines()[0] == "VERDICT: INVESTIGATE"  # the only other word performance.md allows
    assert "Final verdict: **BLOCKED**" in md and "geomean_ratio=" not in md
    assert (out_dir / reports.PERF_LOGS[CUTILE_RS]).read_text() == ""  # nothing clean to give it
    investigation = (out_dir / reports.INVESTIGATION).read_text()
    assert investigation.count("CUDA driver version is insufficient") == 2
    run = validate.check(out_dir, OP)
    assert run.exit_code == 1 and "FAIL: 2 issue(s)" in run.output, run.output


def _mutate(out_dir: Path, how: str) -> None:
    md = out_dir / "reports" / "performance.md"
    if how == "bad_first_line":
        md.write_text("VERDICT: PASS\n" + md.read_text().split("\n", 1)[1])
    elif how == "two_geomeans":
        md.write_text(md.read_text() + "geomean_ratio=1.0000\n")
    elif how == "no_agent_log":
        (out_dir / "reports" / "agent_logs" / "agent_e.md").unlink()
    elif how == "failed_in_log":
        log = out_dir / reports.PERF_LOGS[CUTILE_RS]
        log.write_text(log.read_text() + "t.py::test_perf[x] FAILED\n")
    elif how == "empty_baseline":
        (out_dir / reports.PERF_LOGS[CUTILE]).write_text("")
    elif how == "no_report":
        md.unlink()


@pytest.mark.parametrize(
    "how",
    [
        "none",
        "bad_first_line",
        "two_geomeans",
        "no_agent_log",
        "failed_in_log",
        "empty_baseline",
        "no_report",
    ],
)
def test_the_upstream_validators_agree_with_ours(tmp_path, how):
    tilegym = tilegym_checkout()
    if validate.scripts_dir(tilegym) is None:
        pytest.skip(f"{tilegym} has no validate_agent_e.sh")
    out_dir, _ = _written(tmp_path)
    _mutate(out_dir, how)
    theirs = validate.upstream(tilegym, out_dir, OP)
    ours = validate.check(out_dir, OP)
    assert [r.command.split("bash ")[1].split()[0].rsplit("/", 1)[1] for r in theirs] == [
        "validate_perf_log.sh", "validate_perf_log.sh", "validate_agent_e.sh",
    ]  # fmt: skip
    agent_e = theirs[-1]
    assert (ours.exit_code, ours.output.splitlines()[-1]) == (
        agent_e.exit_code,
        agent_e.output.splitlines()[-1],
    ), (
        ours.output,
        agent_e.output,
    )
    if how == "none":
        assert [r.exit_code for r in theirs] == [0, 0, 0], [r.output for r in theirs]
        assert theirs[0].output.startswith("perf_cutile_rs: perf_sections=2 passed=2 failed=0")
        block = report.validator_block("python -m pytest ...", 0, [ours, *theirs])
        assert block.count("exit=0") == 5


def test_no_upstream_scripts_no_upstream_runs(tmp_path):
    assert validate.upstream(tmp_path, tmp_path / "out" / OP, OP) == []
