"""The perf stage (bot/perf/stage.py): when it runs, and a whole run of it on a TileGym checkout.

The whole run takes TileGym's own silu_and_mul ``test_perf`` (its 512-wide configs) through every
step on a CPU: the wiring check, the collection, the pytest run (with tests/perf_cpu_plugin.py
standing in for the GPU, tests/perf_support.py), the records, the verdict, stage E's reports, and
both agent-d's and TileGym's validators on them. It needs ``$AGENT_D_TILEGYM`` and the launch dry
run's interpreter, and skips saying which is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from perf_support import copy_tests, cpu_python, tilegym_checkout, venv_python

from bot.classify.types import Verdict, VerdictKind
from bot.job import Job, PortOptions
from bot.perf import stage
from bot.targets.discover import discover
from bot.targets.types import Target
from bot.testing.envcheck import Interpreter

OP = "silu_and_mul"


def _interp(cuda: bool) -> Interpreter:
    return Interpreter("python3", "9.0", True, "2.11", cuda, "NVIDIA H200 (sm_90)" if cuda else "", "")


@pytest.mark.parametrize(
    "perf, cuda, on, says",
    [
        (None, True, True, "on: a CUDA GPU is visible (NVIDIA H200 (sm_90))"),
        (None, False, False, "off: no CUDA GPU visible to the tests' interpreter (--perf runs it anyway)"),
        (True, False, True, "on (--perf)"),
        (False, True, False, "off (--no-perf)"),
    ],
)
def test_on_where_a_gpu_is_visible_unless_told(perf, cuda, on, says):
    assert stage.decide(perf, _interp(cuda)) == (on, says)


def _job(repo: Path, out_root: Path, kind: VerdictKind = VerdictKind.ALL_PASS, **options):
    said: list[str] = []
    echoed: list[str] = []
    opts = PortOptions(repo=repo, out_root=out_root, answer=said.append, echo=echoed.append, **options)
    job = Job.start(Target(repo, OP), opts)
    job.result.verdict = Verdict(kind, "" if kind is VerdictKind.ALL_PASS else "kernel", "r")
    return job, opts, said, echoed


def test_only_an_all_pass_reaches_the_stage_and_off_says_why(tmp_path):
    failed, opts, said, echoed = _job(tmp_path, tmp_path / "out", VerdictKind.FAIL)
    stage.after_all_pass([failed], "python3", lambda: pytest.fail("no probe without an ALL_PASS"), None, opts)
    assert (
        failed.result.perf.verdict == "NOT_RUN" and "stage E runs after ALL_PASS" in failed.result.perf.reason
    )
    assert said == [] and echoed == []
    passed, opts, said, echoed = _job(tmp_path, tmp_path / "out")
    stage.after_all_pass([passed], "python3", lambda: _interp(False), None, opts)
    assert passed.result.perf.verdict == "NOT_RUN" and said == []
    assert echoed == [
        "[agent-d] perf: off: no CUDA GPU visible to the tests' interpreter (--perf runs it anyway)"
    ]


def test_a_checkout_without_test_perf_is_blocked_with_its_reports(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests" / "ops").mkdir(parents=True)
    (repo / "tests" / "ops" / f"test_{OP}.py").write_text(
        "import tilegym\n\ndef test_op(backend):\n    tilegym.ops.silu_and_mul(1)\n"
    )
    job, opts, said, _ = _job(repo, tmp_path / "out", perf=True)
    job.found = discover(Target(repo, OP)) if (repo / "src").is_dir() else None
    if job.found is None:  # no tilegym tree to discover in: the sites by hand, as discovery gives them
        from bot.targets.types import Discovery, Source, TestSite

        site = TestSite(
            f"tests/ops/test_{OP}.py", 0, "", "line 4: tilegym.ops.silu_and_mul", functional=("test_op",)
        )
        job.found = Discovery(OP, OP, Source("naming", "test"), None, None, (site,))
    stage.after_all_pass([job], "python3", lambda: _interp(True), None, opts)
    perf = job.result.perf
    assert (perf.verdict, perf.reason) == ("BLOCKED", f"no test_perf function in tests/ops/test_{OP}.py")
    md = (tmp_path / "out" / OP / "reports" / "performance.md").read_text()
    assert md.startswith("VERDICT: INVESTIGATE\n") and "Final verdict: **BLOCKED**" in md
    assert said[0].startswith("<PERF_LOG>") and said[-1] == "VERDICT: BLOCKED"


def _measured(tmp_path: Path, edit=None, graphs: bool = True, **options):
    tilegym = tilegym_checkout()
    python = cpu_python(tmp_path / "py", venv_python(), graphs)
    repo = copy_tests(tilegym, tmp_path / "tilegym")
    if edit:
        edit(repo / "tests" / "ops" / f"test_{OP}.py")
    job, opts, said, echoed = _job(repo, tmp_path / "out", perf=True, perf_timeout=900.0, **options)
    job.found = discover(Target(repo, OP))
    stage.after_all_pass([job], python, lambda: _interp(False), None, opts)
    return job, said, repo


def test_a_whole_perf_stage_on_tilegym_s_own_test_perf(tmp_path):
    job, said, repo = _measured(tmp_path)
    perf = job.result.perf
    assert perf.verdict == "DONE", (perf.reason, perf.unmeasured)
    assert {c.backend for c in perf.cases} == {"cutile-rs", "cutile", "pytorch"} and len(perf.cases) == 6
    assert [g.dtype for g in perf.by_dtype] == ["float16", "float32"]
    out = Path(perf.out_dir)
    assert (out / "perf_records.xml").is_file() and (
        out / "reports" / "agent_logs" / "perf_cutile_rs.full.txt"
    ).is_file()
    assert "--print-record" in perf.command and "-o junit_family=xunit1" in perf.command
    block = said[1]
    exits = re.findall(r"^exit=(\S+)$", block, re.M)
    assert exits == ["0", "0", "0", "0", "0"], block  # pytest, ours, perf logs (2), validate_agent_e.sh
    assert "validate_agent_e.sh silu_and_mul" in block and said[-1] == "VERDICT: DONE"
    agent_log = (out / "reports" / "agent_logs" / "agent_e.md").read_text()
    assert "<PERF_LOG>" in agent_log and "validate_perf_log.sh" in agent_log
    assert job.run.stages[-1].name == "perf" and job.run.stages[-1].status == "ok"


def test_a_cap_below_the_configs_measures_the_chosen_ones_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGYM_DISABLE_AUTOTUNE", "1")  # the runner's, for its correctness run
    job, said, repo = _measured(tmp_path, perf_configs=1)
    perf = job.result.perf
    assert any(
        n.startswith("TILEGYM_DISABLE_AUTOTUNE=1 held for the correctness run only") for n in perf.notes
    )
    assert len(perf.cases) == 3 and len({c.config for c in perf.cases}) == 1  # one config, three backends
    assert perf.verdict == "DONE" and perf.reason.endswith("(1 of 2 configs: stage E's cap)")
    note = next(n for n in perf.notes if n.startswith("1 of 2 configs measured"))
    assert "values beyond the cap" in note  # one config cannot name both dtypes: said, not hidden
    md = (Path(perf.out_dir) / "reports" / "performance.md").read_text()
    assert note in md


@pytest.mark.parametrize("value, said", [("1", True), ("on", True), ("0", False), ("", False)])
def test_test_perf_always_tunes_and_says_so_where_the_runner_turned_tuning_off(value, said):
    from bot.perf import run

    # the perf pytest's environment is os.environ updated with this: the switch ends "0" (tuning on)
    assert run.environment(Path("/out/op"))["TILEGYM_DISABLE_AUTOTUNE"] == "0"
    assert bool(run.tuning_note({"TILEGYM_DISABLE_AUTOTUNE": value})) is said
    assert run.tuning_note({}) == ""


def test_a_test_perf_without_cutile_rs_is_wired_first(tmp_path):
    def drop_cutile_rs(path: Path) -> None:
        text = path.read_text()
        assert '_perf_frameworks = _backends + ["pytorch"]' in text
        path.write_text(
            text.replace(
                '_perf_frameworks = _backends + ["pytorch"]', '_perf_frameworks = ["cutile", "pytorch"]'
            )
        )

    job, said, repo = _measured(tmp_path, drop_cutile_rs)
    perf = job.result.perf
    assert any("lacked cutile-rs in its backends: added" in n for n in perf.notes)
    assert (
        '_perf_frameworks = _perf_frameworks + ["cutile-rs"]'
        in (repo / "tests" / "ops" / f"test_{OP}.py").read_text()
    )
    assert sum(c.backend == "cutile-rs" for c in perf.cases) == 2 and perf.verdict == "DONE"


def test_an_error_of_the_stage_itself_is_a_blocked_perf_result_with_reports(tmp_path):
    job, opts, said, _ = _job(tmp_path, tmp_path / "out", perf=True)
    job.found = None  # discovery never ran: the stage cannot know the op's test files
    stage.after_all_pass([job], "python3", lambda: _interp(True), None, opts)
    perf = job.result.perf
    assert perf.verdict == "BLOCKED" and perf.reason.startswith("internal error in agent-d's perf stage")
    assert job.result.verdict.kind is VerdictKind.ALL_PASS  # the correctness verdict stands
    assert (tmp_path / "out" / OP / "reports" / "agent_logs" / "agent_e.md").is_file()
    assert said[-1] == "VERDICT: BLOCKED"


def test_a_probe_that_fails_now_turns_the_stage_off_and_says_so(tmp_path):
    job, opts, said, echoed = _job(tmp_path, tmp_path / "out")

    def broken() -> Interpreter:
        raise OSError("the interpreter is gone")

    stage.after_all_pass([job], "python3", broken, None, opts)
    assert job.result.perf.verdict == "NOT_RUN" and said == []
    assert echoed == [
        "[agent-d] perf: off: the interpreter could not be probed (OSError: the interpreter is gone)"
    ]
