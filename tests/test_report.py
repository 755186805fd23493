"""bot.report.report: correctness.md, the decision logs, the returned block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.build.types import BuildResult
from bot.classify.citation import FORWARD_ONLY_CITATION
from bot.classify.types import Verdict, VerdictKind
from bot.plan.types import FfiPlan, LaunchPlan, PyPlan, TestWiring, Variant
from bot.report import report as R
from bot.report import validator
from bot.report.types import PortResult, StageRecord, ValidatorRun
from bot.targets.types import Source, Target
from bot.testing.types import TestCase, TestResult

OP = "demo_op"


def plan() -> LaunchPlan:
    src = Source("kernel", "kernel.rs")
    ffi = FfiPlan(
        symbol=f"cutile_{OP}",
        module=f"{OP}_module",
        style="macros",
        tensors=[],
        dtype_from="x",
        dtype_generic="E",
        dtypes=["f32", "f16"],
        scalars=[],
        derived=[],
        variants=[
            Variant("persistent != 0", "static_persistent_demo", [], [], [], "persistent", src),
            Variant("else", "non_persistent_demo", [], [], [], "", src),
        ],
    )
    py = PyPlan(
        register_name=OP,
        register_kind="direct",
        signature="x",
        inner_signature="",
        dtypes=["float32", "float16"],
        steps=[],
        alloc={},
        launch_mode="autotune",
        configs=[{"TILE_M": 64, "num_ctas": 1}, {"TILE_M": 128, "num_ctas": 2}],
        autotune_key="",
        python_grid={},
        device_of="x",
        tensors_py={},
        ffi_args={},
        result="out",
        out_param="",
    )
    return LaunchPlan(op=OP, ffi=ffi, python=py, tests=TestWiring("tests/ops/test_demo_op.py", "class"))


CASES = [
    TestCase("tests/ops/test_demo_op.py::Test_Demo::test_op[64-float16-cutile_rs]", "passed"),
    TestCase("tests/ops/test_demo_op.py::Test_Demo::test_op[64-float32-cutile-rs]", "passed"),
]


def result(
    tmp_path: Path,
    kind=VerdictKind.ALL_PASS,
    klass="",
    reason="all cutile-rs cases passed",
    cases=None,
    with_plan=True,
    with_build=True,
    tests=True,
    host_fix="",
    followup="",
    stages=None,
) -> PortResult:
    repo = tmp_path / "repo"
    target = Target(repo=repo, op=OP)
    cases = list(CASES if cases is None else cases)
    counts = {o: sum(c.outcome == o for c in cases) for o in ("passed", "failed", "skipped", "error")}
    tr = TestResult(
        ran=True,
        command="python -m pytest tests/ops/test_demo_op.py -k cutile_rs --tb=short -v -x --timeout=60",
        exit_code=0 if kind == VerdictKind.ALL_PASS else 1,
        log_path=str(tmp_path / "pytest.log"),
        passed=counts["passed"],
        failed=counts["failed"],
        skipped=counts["skipped"],
        errors=counts["error"],
        cases=cases,
        gpu=True,
    )
    build = BuildResult(
        ok=True,
        so_path=str(repo / "libcutile_kernels.so"),
        command="cargo build --release",
        seconds=12.34,
        log_tail="",
        symbol_found=True,
        symbols=[f"cutile_{OP}", "cutile_other"],
        smoke_ok=True,
        smoke_detail="null descriptors gave -5",
    )
    return PortResult(
        target=target,
        verdict=Verdict(kind, klass, reason, followup=followup, host_fix=host_fix),
        stages=stages
        if stages is not None
        else [StageRecord("build", 12.3, "ok"), StageRecord("test", 40.0, "ok", "2 passed")],
        out_dir=str(tmp_path / "out" / OP),
        plan=plan() if with_plan else None,
        build=build if with_build else None,
        tests=tr if tests else None,
        changed_files=["src/tilegym/ops/cutile_rs/demo_op.py"],
    )


def write(tmp_path: Path, res: PortResult, log: list[str] | None = None, src: Path | None = None) -> Path:
    out = Path(res.out_dir)
    R.write_reports(out, res, log if log is not None else ["chose variant flag from analysis.json"], src)
    return out


def read(out: Path, rel: str) -> str:
    return (out / rel).read_text(encoding="utf-8")


def tail_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        for key in ("fail_class", "host_fix", "agent_b_followup", "pytest_log", "block_class"):
            if line.startswith(key + ":"):
                fields[key] = line[len(key) + 1 :].strip()
    return fields


# --------------------------------------------------------------------------- correctness.md


def test_all_pass_report(tmp_path):
    log = tmp_path / "pytest.log"
    log.write_text("platform linux -- Python 3.12\nrootdir: /r\nt.py::a PASSED\n")
    out = write(tmp_path, result(tmp_path), src=log)
    text = read(out, "reports/correctness.md")
    lines = text.splitlines()
    assert lines[0] == "VERDICT: ALL_PASS"
    assert f"# Agent D Report - {OP}" in lines
    assert "2 passed, 0 failed, 0 skipped." in lines
    assert "| Test | Config | Result | Error | known_gaps |" in lines
    assert "| Test_Demo::test_op | 64-float16 | PASS |  |  |" in lines
    assert "| Test_Demo::test_op | 64-float32 | PASS |  |  |" in lines
    f = tail_fields(text)
    assert f == {
        "fail_class": "",
        "host_fix": "",
        "agent_b_followup": "",
        "pytest_log": str(out / "correctness_cutile_rs.txt"),
    }
    # host artifacts from the plan and the build
    assert "static_persistent_demo [persistent] when persistent != 0" in text
    assert "non_persistent_demo otherwise" in text
    assert f"`cutile_{OP}` is a defined global FUNC" in text
    assert f'registers `{OP}` for backend "cutile-rs"' in text
    assert "2 configs over TILE_M, num_ctas" in text
    # the raw log was copied verbatim
    assert (out / "correctness_cutile_rs.txt").read_bytes() == log.read_bytes()


def test_fail_report_lines(tmp_path):
    cases = [
        *CASES[:1],
        TestCase(
            "tests/ops/test_demo_op.py::Test_Demo::test_op[128-bfloat16-cutile_rs]",
            "failed",
            "AssertionError: Tensor-likes are not close! | max abs diff 0.7\n second line",
        ),
    ]
    res = result(
        tmp_path,
        VerdictKind.FAIL,
        "kernel",
        "numeric mismatch with a correct ABI",
        cases=cases,
        followup="reduce in f32 before the bf16 cast in non_persistent_demo",
    )
    text = read(write(tmp_path, res), "reports/correctness.md")
    assert text.splitlines()[0] == "VERDICT: FAIL"
    assert "1 passed, 1 failed, 0 skipped." in text
    assert "Final verdict: **FAIL (fail_class: kernel)**: numeric mismatch with a correct ABI" in text
    row = next(ln for ln in text.splitlines() if "128-bfloat16" in ln)
    assert row == (
        "| Test_Demo::test_op | 128-bfloat16 | FAIL | AssertionError: Tensor-likes are not close! "
        "\\| max abs diff 0.7 second line |  |"
    )
    f = tail_fields(text)
    assert f["fail_class"] == "kernel"
    assert f["agent_b_followup"] == "reduce in f32 before the bf16 cast in non_persistent_demo"
    assert "block_class" not in f


def test_blocked_report_says_fail_first_and_block_below(tmp_path):
    res = result(tmp_path, VerdictKind.BLOCKED, "env", "no CUDA device visible", tests=False)
    out = write(tmp_path, res)
    text = read(out, "reports/correctness.md")
    lines = text.splitlines()
    assert lines[0] == "VERDICT: FAIL"
    assert "Final verdict: **BLOCKED (block_class: env)**: no CUDA device visible" in lines[:6]
    f = tail_fields(text)
    assert f["block_class"] == "env" and f["fail_class"] == ""
    assert f["pytest_log"].endswith("(not written: pytest did not run)")
    assert "| (no test case ran) | | | | |" in lines
    assert "0 passed, 0 failed, 0 skipped." in lines
    assert "pytest: not run" in lines
    res2 = result(tmp_path, VerdictKind.BLOCKED, "host", "cargo error in ffi.rs", tests=False)
    f2 = tail_fields(read(write(tmp_path, res2), "reports/correctness.md"))
    assert (f2["fail_class"], f2["block_class"]) == ("host", "host")


def test_nothing_available_still_writes_everything(tmp_path):
    res = result(
        tmp_path,
        VerdictKind.BLOCKED,
        "host",
        "internal error",
        with_plan=False,
        with_build=False,
        tests=False,
        stages=[],
    )
    out = write(tmp_path, res, log=[])
    for rel in ("reports/correctness.md", "reports/agent_d.md", "reports/agent_logs/agent_d.md"):
        assert (out / rel).stat().st_size > 0
    text = read(out, "reports/correctness.md")
    assert "(launch plan not available)" in text and "cdylib: not built in this run" in text
    assert not (out / "correctness_cutile_rs.txt").exists()  # never made up


def test_errors_count_as_failed_and_long_messages_are_cut(tmp_path):
    long = "RuntimeError: " + "x" * 500
    cases = [TestCase("tests/ops/test_demo_op.py::test_op[a-cutile_rs]", "error", long)]
    res = result(tmp_path, VerdictKind.FAIL, "host", "rc -3", cases=cases)
    text = read(write(tmp_path, res), "reports/correctness.md")
    assert "0 passed, 1 failed, 0 skipped (1 of the failed are pytest errors)." in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| test_op |"))
    cell = row.split(" | ")[3]
    assert cell.endswith("...") and len(cell) == R.MAX_ERROR_CHARS


def test_skips_cited_and_uncited(tmp_path):
    out_dir = tmp_path / "out" / OP
    (out_dir / "reference").mkdir(parents=True)
    (out_dir / "reference" / "analysis.json").write_text(
        json.dumps({"known_gaps": [{"id": "fp8-inputs", "description": "f8e5m2 inputs are not ported"}]})
    )
    cases = [
        *CASES,
        TestCase("t.py::test_op[f8-cutile_rs]", "skipped", "fp8-inputs: f8e5m2 inputs are not ported"),
        TestCase("t.py::test_op[big-cutile_rs]", "skipped", "too slow"),
    ]
    res = result(tmp_path, VerdictKind.FAIL, "host", "uncited skip", cases=cases)
    out = write(tmp_path, res)
    text = read(out, "reports/correctness.md")
    rows = {ln.split(" | ")[1]: ln for ln in text.splitlines() if ln.startswith("| test_op |")}
    assert rows["f8"].endswith("| known_gaps: fp8-inputs: f8e5m2 inputs are not ported |")
    assert " SKIP | fp8-inputs: f8e5m2 inputs are not ported |" in rows["f8"]
    assert rows["big"].endswith("| SKIP | too slow | UNCITED |")
    log = read(out, "reports/agent_d.md")
    assert "- `t.py::test_op[f8-cutile_rs]`: fp8-inputs: f8e5m2 inputs are not ported -> cited (" in log
    assert "- `t.py::test_op[big-cutile_rs]`: too slow -> UNCITED" in log


def test_forward_only_skip_of_a_backward_test_is_listed_as_cited(tmp_path):
    """The skip wiring puts in each backward test (a run of every cutile-rs case reaches them)."""
    from bot.emit.testfile_wiring import FORWARD_ONLY_SKIP

    case = TestCase("t.py::Test_X::test_op_backward[cutile-rs]", "skipped", FORWARD_ONLY_SKIP)
    out = write(tmp_path, result(tmp_path, cases=[*CASES, case]))
    row = next(ln for ln in read(out, "reports/correctness.md").splitlines() if "test_op_backward" in ln)
    assert row.endswith(f"| SKIP | {FORWARD_ONLY_SKIP} | {FORWARD_ONLY_CITATION} |")
    log = read(out, "reports/agent_d.md")
    assert f"- `{case.nodeid}`: {FORWARD_ONLY_SKIP} -> cited ({FORWARD_ONLY_CITATION})" in log


def test_reports_are_deterministic(tmp_path):
    out = write(tmp_path, result(tmp_path))
    first = {p: p.read_bytes() for p in sorted(out.rglob("*.md"))}
    write(tmp_path, result(tmp_path))
    assert {p: p.read_bytes() for p in sorted(out.rglob("*.md"))} == first


def test_ffi_copy_and_log_copy_rules(tmp_path):
    res = result(tmp_path)
    res.target.ffi_rs.parent.mkdir(parents=True)
    res.target.ffi_rs.write_text("// generated\n")
    out = Path(res.out_dir)
    out.mkdir(parents=True)
    raw = out / "correctness_cutile_rs.txt"
    raw.write_text("existing log\n")
    R.write_reports(out, res, [], None)  # None: keep what is there
    assert raw.read_text() == "existing log\n"
    assert (out / "ffi.rs").read_text() == "// generated\n"
    R.write_reports(out, res, [], raw)  # the same file: untouched
    assert raw.read_text() == "existing log\n"
    R.write_reports(out, res, [], tmp_path / "absent.log")  # missing source: no crash, nothing lost
    assert raw.read_text() == "existing log\n"


# --------------------------------------------------------------------------- decision log


def test_decision_log_first_time_pass(tmp_path):
    out = write(tmp_path, result(tmp_path), log=["picked the macros style", ""])
    a = read(out, "reports/agent_d.md")
    assert a == read(out, "reports/agent_logs/agent_d.md")
    assert R.FIRST_TIME_LINE in a.splitlines()
    assert "- build: `cargo build --release` (ok, 12.3 s)" in a
    assert "- pytest: `python -m pytest tests/ops/test_demo_op.py" in a
    assert "| build | ok | 12.3 |  |" in a and "| test | ok | 40.0 | 2 passed |" in a
    assert "- picked the macros style" in a and "- \n" not in a


@pytest.mark.parametrize(
    "change",
    [
        {"host_fix": "passed num_cta_in_cga through"},
        {"stages": [StageRecord("build", 1, "failed"), StageRecord("build", 2, "ok")]},
        {"stages": [StageRecord("test", 1, "ok"), StageRecord("test", 2, "ok")]},
        {"kind": VerdictKind.FAIL, "klass": "host"},
    ],
)
def test_decision_log_not_first_time(tmp_path, change):
    a = read(write(tmp_path, result(tmp_path, **change)), "reports/agent_d.md")
    assert R.FIRST_TIME_LINE not in a


# --------------------------------------------------------------------------- the returned block


def test_validator_block_exact():
    runs = [
        ValidatorRun("agent-d validate demo_op --out /o", "OK: a\n---\nPASS\n", 0),
        ValidatorRun("cd /r && bash x.sh demo_op 2>&1", "FAIL: b\n---\nFAIL: 1 issue(s)", 1),
    ]
    block = R.validator_block("python -m pytest t.py -v", 0, runs)
    assert block == (
        "<VALIDATOR_OUTPUT>\n"
        "$ python -m pytest t.py -v\n"
        "exit=0\n"
        "\n"
        "$ agent-d validate demo_op --out /o\n"
        "OK: a\n---\nPASS\n"
        "exit=0\n"
        "\n"
        "$ cd /r && bash x.sh demo_op 2>&1\n"
        "FAIL: b\n---\nFAIL: 1 issue(s)\n"
        "exit=1\n"
        "</VALIDATOR_OUTPUT>"
    )


def test_validator_block_pytest_not_run_and_empty_output():
    block = R.validator_block("python -m pytest t.py", None, [ValidatorRun("v", "", 1)])
    assert block.splitlines() == [
        "<VALIDATOR_OUTPUT>",
        "$ python -m pytest t.py",
        "exit=not-run",
        "",
        "$ v",
        "exit=1",
        "</VALIDATOR_OUTPUT>",
    ]


def test_returned_text_ends_with_the_verdict():
    v = Verdict(VerdictKind.BLOCKED, "env", "no GPU")
    text = R.returned_text("pytest", None, [], v)
    assert text.endswith("</VALIDATOR_OUTPUT>\nVERDICT: BLOCKED\n")


def test_verdict_line_forms():
    assert R.verdict_line(Verdict(VerdictKind.ALL_PASS, "", "ok")) == "VERDICT: ALL_PASS"
    assert R.verdict_line(VerdictKind.FAIL) == "VERDICT: FAIL"
    assert R.verdict_line("BLOCKED") == "VERDICT: BLOCKED"
    assert R.verdict_line("VERDICT: FAIL") == "VERDICT: FAIL"
    with pytest.raises(ValueError):
        R.verdict_line("PASS")


# --------------------------------------------------------------------------- helpers


def test_md_cell():
    assert R.md_cell("a | b\nc") == "a \\| b c"
    assert R.md_cell(None) == ""
    assert R.md_cell("abcdefghij", 8) == "abcde..."


@pytest.mark.parametrize(
    "gaps, expected",
    [
        (["fp8 not supported"], ["fp8 not supported"]),
        ({"fp8": "not ported", "tma": ""}, ["fp8: not ported", "tma"]),
        ([{"name": "g1", "reason": "r1"}, {"other": 1}], ["g1: r1", '{"other": 1}']),
        ("one gap", ["one gap"]),
        (None, []),
        (42, []),
    ],
)
def test_load_known_gaps_shapes(tmp_path, gaps, expected):
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "analysis.json").write_text(json.dumps({"known_gaps": gaps}))
    assert R.load_known_gaps(tmp_path) == expected


def test_load_known_gaps_unreadable(tmp_path):
    assert R.load_known_gaps(tmp_path) == []
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "analysis.json").write_text("[not json")
    assert R.load_known_gaps(tmp_path) == []


def test_cite_skip():
    gaps = ["fp8-inputs: f8e5m2 inputs are not ported", "tma descriptors unsupported"]
    assert R.cite_skip("skip: FP8-INPUTS (see analysis)", gaps) == f"known_gaps: {gaps[0]}"
    assert R.cite_skip("tma descriptors unsupported on sm80", gaps) == f"known_gaps: {gaps[1]}"
    assert R.cite_skip("descriptors unsupported", gaps) == f"known_gaps: {gaps[1]}"
    assert R.cite_skip("see references/coding-rules.md rule 4", gaps) == "coding-rules"
    assert R.cite_skip("too slow", gaps) == ""
    # the forward-only rule, in our wiring's words or a test's own; never a backend that failed to set up
    assert R.cite_skip("cutile-rs backend does not support the backward pass", []) == FORWARD_ONLY_CITATION
    assert R.cite_skip("Backend is not supported: backward", []) == ""
    assert R.cite_skip("", gaps) == ""


# --------------------------------------------------------------------------- with the validator


def test_written_reports_satisfy_the_report_checks(tmp_path):
    log = tmp_path / "pytest.log"
    log.write_text(
        "platform linux -- Python 3.12.3, pytest-8.3.4\nrootdir: /repo\nplugins: timeout-2.3.1\n"
        "tests/ops/test_demo_op.py::Test_Demo::test_op[64-float16-cutile_rs] PASSED [100%]\n"
    )
    for kind, klass in (
        (VerdictKind.ALL_PASS, ""),
        (VerdictKind.FAIL, "kernel"),
        (VerdictKind.BLOCKED, "env"),
    ):
        res = result(tmp_path, kind, klass)
        res.target.ffi_rs.parent.mkdir(parents=True, exist_ok=True)
        res.target.ffi_rs.write_text("// x\n")
        out = write(tmp_path, res, src=log)
        run = validator.validate(out, OP, res.target.repo, None)
        report_fails = [
            ln
            for ln in run.output.splitlines()
            if ln.startswith("FAIL: ")
            and any(
                k in ln
                for k in ("correctness", "verdict", "first line", "table", "agent_d.md", "ffi.rs missing")
            )
        ]
        assert report_fails == [], run.output


SKIP_REASONS = [
    "fp8-inputs: f8e5m2 inputs are not ported",  # a known gap's text
    "cutile-rs backend does not support the backward pass",  # the forward-only rule
    "coding-rules: tiles above 8192 elements are out of scope",  # the coding rules
    "Skipped: impossible shape for this dtype on any backend",  # the test file's own skip
    "cutile-rs backend not available",  # a wiring gap: never cited
    "too slow",  # nothing cites it
]


@pytest.mark.parametrize("reason", SKIP_REASONS)
def test_the_verdict_and_the_reports_cite_a_skip_by_one_rule(tmp_path, reason):
    """Issue 34, item 12: the classifier and the reports decided by two rules, and disagreed."""
    from bot.classify.classify import classify

    gaps = ["fp8-inputs: f8e5m2 inputs are not ported"]
    own = ["Skipped: impossible shape for this dtype"]
    skip = TestCase("t.py::test_op[x-cutile_rs]", "skipped", reason)
    res = result(tmp_path, cases=[*CASES, skip])
    res.tests.test_skips = own
    out_dir = Path(res.out_dir)
    (out_dir / "reference").mkdir(parents=True)
    (out_dir / "reference" / "analysis.json").write_text(
        json.dumps({"known_gaps": [{"id": "fp8-inputs", "description": "f8e5m2 inputs are not ported"}]})
    )
    verdict = classify(res.tests, gaps, own)
    out = write(tmp_path, res)
    row = next(
        ln for ln in read(out, "reports/correctness.md").splitlines() if ln.startswith("| test_op | x |")
    )
    listed = next(ln for ln in read(out, "reports/agent_d.md").splitlines() if "test_op[x-cutile_rs]" in ln)
    uncited_in_report = row.endswith("| UNCITED |")
    assert listed.endswith("-> UNCITED") == uncited_in_report, (row, listed)
    uncited_in_verdict = verdict.reason.startswith("uncited skip:")
    assert uncited_in_report == uncited_in_verdict, (reason, row, verdict.reason)
    assert uncited_in_report == (reason in ("cutile-rs backend not available", "too slow"))
