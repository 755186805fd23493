"""Nothing unsound leaves agent-d: a fault planted in what it generates is its own bug, named with
the file and the line, and nothing is applied; a kernel that does not compile is blamed before the
porter is asked for facts.

The faults are planted in the emitters (bot/emit/*) with monkeypatch: they stand for a bug of
agent-d's that the plan-level checks did not see. The port runs for real on the demo checkout.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bot import pipeline
from bot.demo import assemble_checkout
from bot.emit import ffi_rs, generate
from bot.emit.soundness import check_plan, lint_python
from bot.errors import OwnBug
from bot.job import PortOptions
from bot.plan import closure
from bot.plan.types import PyStep
from bot.targets.types import Target

OP = "silu_and_mul"
KERNEL = f"src/tilegym/ops/cutile_rs/{OP}_kernel/kernel.rs"
DRAFT = f"src/tilegym/ops/cutile_rs/{OP}_kernel/host_contract.draft.yaml"


@pytest.fixture()
def demo(tmp_path, tilegym_wheel):
    return assemble_checkout(tmp_path / "tilegym", tilegym_wheel, [OP], [OP]).repo


def _port(repo: Path, out: Path, cargo_target_dir: Path | None = None):
    options = PortOptions(
        repo=repo, kernel=OP, out_root=out, cargo_target_dir=cargo_target_dir, echo=lambda _: None
    )
    (result,) = pipeline.port(options)
    return result


def _status(repo: Path) -> str:
    """What the port left changed in the checkout (its build output aside)."""
    proc = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True, text=True
    )
    # cargo's own output (the target folder, the Cargo.lock it resolves) is not agent-d's
    return "\n".join(
        x for x in proc.stdout.splitlines() if "/target/" not in x and not x.endswith("Cargo.lock")
    )


def _plant_in_wrapper(monkeypatch, line: str) -> None:
    """The wrapper, however it is written (carried over or rendered from the plan), gets ``line``
    inside a function of its own at its end."""
    original = generate._wrapper

    def wrapper(target, plan):
        return original(target, plan).rstrip("\n") + f"\n\n\ndef _planted():\n    {line}\n"

    monkeypatch.setattr(generate, "_wrapper", wrapper)


def _assert_own_bug_and_nothing_applied(result, repo: Path, where: str) -> None:
    verdict = result.verdict
    assert (verdict.kind.value, verdict.klass) == ("BLOCKED", "host"), verdict
    assert verdict.reason.startswith("agent-d's own bug:"), verdict.reason
    assert re.search(where, verdict.reason), verdict.reason
    assert verdict.withheld
    assert _status(repo) == "", "generated files were applied"
    assert result.changed_files == []


def test_an_undefined_name_in_the_generated_wrapper_is_blocked_with_its_line(demo, tmp_path, monkeypatch):
    _plant_in_wrapper(monkeypatch, "planted = name_nobody_binds")
    result = _port(demo, tmp_path / "out")
    _assert_own_bug_and_nothing_applied(
        result, demo, rf"src/tilegym/ops/cutile_rs/{OP}\.py:\d+: F821 Undefined name `name_nobody_binds`"
    )
    assert [s.name for s in result.stages][-2:] == ["generate", "check generated"]
    assert result.stages[-1].status == "blocked"


def test_an_unused_binding_in_the_generated_wrapper_is_blocked_with_its_line(demo, tmp_path, monkeypatch):
    _plant_in_wrapper(monkeypatch, "never_read = 1")
    result = _port(demo, tmp_path / "out")
    _assert_own_bug_and_nothing_applied(
        result, demo, rf"{OP}\.py:\d+: F841 Local variable `never_read` is assigned to but never used"
    )


def test_the_line_named_is_the_line_of_the_fault(demo, tmp_path, monkeypatch):
    _plant_in_wrapper(monkeypatch, "planted = name_nobody_binds")
    reason = _port(demo, tmp_path / "out").verdict.reason
    line = int(re.search(rf"{OP}\.py:(\d+): F821", reason).group(1))
    # the same text, formatted as apply would have written it
    from bot.apply import apply
    from bot.emit import generate
    from bot.emit.stage_generate import make_plan

    plan, _, co = make_plan(Target(demo, OP), tmp_path / "plan")
    wrapper = next(
        f
        for f in apply.formatted(generate.generate(Target(demo, OP), plan, co), demo).files
        if f.path.endswith(f"{OP}.py")
    )
    assert "name_nobody_binds" in wrapper.content.splitlines()[line - 1]


@pytest.mark.slow
def test_a_launcher_the_compiler_faults_is_blocked_and_withdrawn(
    demo, tmp_path, monkeypatch, cargo_target_dir
):
    original = ffi_rs.render

    def render(plan, **kwargs):
        text = original(plan, **kwargs)
        # a wrong type in the launcher's body: the C signature (and so the cdef cross-check) is untouched
        head = re.search(r"pub unsafe extern \"C\" fn cutile_\w+\([^)]*\)\s*->\s*i32\s*\{\n", text)
        assert head, text
        return text[: head.end()] + "    let _planted: u64 = device_id;\n" + text[head.end() :]

    monkeypatch.setattr(ffi_rs, "render", render)
    result = _port(demo, tmp_path / "out", cargo_target_dir)
    _assert_own_bug_and_nothing_applied(
        result, demo, rf"cargo build faults the generated \S*{OP}_kernel/ffi\.rs:\d+: mismatched types"
    )
    assert "build" in [s.name for s in result.stages]


def _kernel_with_a_mystery_scalar(repo: Path, body_line: str = "") -> None:
    """The demo kernel with one more scalar that no source values (so facts are missing)."""
    path = repo / KERNEL
    text = path.read_text(encoding="utf-8")
    text = text.replace(
        "out_row_stride: i32,\n    ) {\n",
        f"out_row_stride: i32,\n        mystery_knob: i32,\n    ) {{\n{body_line}",
        1,
    )
    assert "mystery_knob" in text
    path.write_text(text, encoding="utf-8")
    subprocess.run(["git", "commit", "-qam", "kernel: a mystery scalar"], cwd=repo, check=True)


@pytest.mark.slow
def test_a_kernel_that_does_not_compile_is_blamed_before_facts_are_asked(demo, tmp_path, cargo_target_dir):
    _kernel_with_a_mystery_scalar(demo, "        let broken: i32 = 1.5f32;\n")
    result = _port(demo, tmp_path / "out", cargo_target_dir)
    verdict = result.verdict
    assert (verdict.kind.value, verdict.klass) == ("FAIL", "kernel"), verdict
    assert "cargo error in kernel.rs" in verdict.reason and "mismatched types" in verdict.reason
    # the kernel-only wiring of lib.rs was put back; the draft contract stays for the porter
    assert _status(demo) == f"?? {DRAFT}"


@pytest.mark.slow
def test_a_kernel_that_compiles_and_lacks_facts_is_asked_about_and_says_it_compiles(
    demo, tmp_path, cargo_target_dir
):
    _kernel_with_a_mystery_scalar(demo)
    result = _port(demo, tmp_path / "out", cargo_target_dir)
    verdict = result.verdict
    assert (verdict.kind.value, verdict.klass) == ("BLOCKED", "host"), verdict
    assert "cannot infer" in verdict.reason and "mystery_knob" in verdict.reason
    assert "kernel.rs compiles" in verdict.reason
    assert _status(demo) == f"?? {DRAFT}"


def test_a_plan_value_reading_an_unbound_name_is_agent_ds_bug(demo, tmp_path, carrying_gives_way):
    from bot.emit.stage_generate import make_plan

    plan, _, _ = make_plan(Target(demo, OP), tmp_path / "plan")
    check_plan(plan)  # the real plan is closed
    scalar = plan.ffi.scalars[0].name
    plan.python.ffi_args[scalar] = "n_cols * 2"
    with pytest.raises(OwnBug) as raised:
        check_plan(plan)
    assert f"python.args.{scalar} = `n_cols * 2` reads `n_cols`" in raised.value.reason
    assert f"give python.args.{scalar} in host_contract.yaml" in raised.value.host_fix


def test_a_step_reading_a_name_a_later_step_binds_is_unbound(demo, tmp_path):
    from bot.emit.stage_generate import make_plan

    plan, _, _ = make_plan(Target(demo, OP), tmp_path / "plan")
    plan.python.steps[:0] = [
        PyStep("let", target="early", expr="late + 1"),
        PyStep("let", target="late", expr="1"),
    ]
    found = closure.unbound(plan)
    assert [(u.name, u.key) for u in found] == [("late", "python.steps")]


def test_a_let_nothing_reads_is_dropped_and_one_read_later_is_kept(demo, tmp_path):
    from bot.emit.stage_generate import make_plan

    plan, _, _ = make_plan(Target(demo, OP), tmp_path / "plan")
    scalar = plan.ffi.scalars[0].name
    plan.python.ffi_args[scalar] = "kept_value"
    closure.drop_unread_lets(plan)  # what the replaced value read is no longer read
    plan.python.steps += [
        PyStep("let", target="rows", expr="2"),  # read only by the grid below: goes with it
        PyStep("let", target="grid", expr="(rows, 1, 1)"),  # a reference's grid: the FFI computes its own
        PyStep("let", target="kept_value", expr="3"),
        PyStep("let", target="a, b", expr="(1, 2)"),  # unpacking may check a shape: kept
    ]
    assert closure.drop_unread_lets(plan) == 2
    targets = [s.target for s in plan.python.steps if s.kind == "let"]
    assert "grid" not in targets and "rows" not in targets and {"kept_value", "a, b"} <= set(targets)


def test_ruff_findings_a_wired_file_already_had_are_not_agent_ds(tmp_path):
    from bot.emit.soundness import check_files
    from bot.emit.types import GeneratedFile, GeneratedFiles

    (tmp_path / "t.py").write_text("import os\n\n\ndef f():\n    x = 1\n", encoding="utf-8")
    edited = "import os\n\n_backends = ['cutile-rs']\n\n\ndef f():\n    x = 1\n"
    check_files(GeneratedFiles([GeneratedFile("t.py", edited, "edit")]), tmp_path)  # nothing new
    with pytest.raises(OwnBug, match=r"t\.py:3: F821 Undefined name `y`"):
        check_files(
            GeneratedFiles([GeneratedFile("t.py", "import os\n\n_b = y\n\n\ndef f():\n    x = 1\n", "edit")]),
            tmp_path,
        )
    assert [f.code for f in lint_python("import os\n", "pkg/__init__.py")] == []  # a package's exports


def test_a_twin_copying_a_finding_the_file_already_had_is_not_agent_ds(tmp_path):
    """TileGym's test_mla_decoding faults its own lambdas over names it later ``del``s (F821);
    the cutile-rs twin of that branch copies the lambda, and with it the file's own finding."""
    from bot.emit.soundness import check_files
    from bot.emit.types import GeneratedFile, GeneratedFiles

    original = (
        "def test_perf(framework):\n"
        "    q = 1\n"
        "    if framework == 'cutile':\n"
        "        fn = lambda: q  # noqa: E731\n"
        "    del q\n"
        "    return fn\n"
    )
    (tmp_path / "t.py").write_text(original, encoding="utf-8")
    assert [f.code for f in lint_python(original, "t.py")] == ["F821"]
    twinned = original.replace(
        "    del q\n", "    elif framework == 'cutile-rs':\n        fn = lambda: q  # noqa: E731\n    del q\n"
    )
    check_files(GeneratedFiles([GeneratedFile("t.py", twinned, "edit")]), tmp_path)  # the file's own
    broken = twinned.replace(
        "fn = lambda: q  # noqa: E731\n    del", "fn = lambda: qq  # noqa: E731\n    del"
    )
    with pytest.raises(OwnBug, match=r"F821 Undefined name `qq`"):
        check_files(GeneratedFiles([GeneratedFile("t.py", broken, "edit")]), tmp_path)


def test_a_withheld_verdict_travels_from_the_port_job_to_the_finalizer(tmp_path):
    """The port job says which kernel's files were withheld; the artifact carries it to finalize."""
    from bot.github.artifact import KernelVerdict, read_artifact, write_artifact
    from bot.github.port_job import _normalise

    bug = _normalise(("BLOCKED", "host", "agent-d's own bug: ffi.rs:3", "", True))
    fine = _normalise(("FAIL", "kernel", "cargo error in kernel.rs", ""))  # four fields: not withheld
    assert bug.withheld and not fine.withheld
    sha, tree = "a" * 40, "b" * 40
    write_artifact(
        tmp_path,
        repo="o/r",
        head_sha=sha,
        base_sha=sha,
        base_tree=tree,
        tested_tree=tree,
        verdicts={"x": bug, "y": fine},
        patch="",
        changed_paths=[],
    )
    read = read_artifact(tmp_path)
    assert read.verdicts["x"].withheld and not read.verdicts["y"].withheld
    assert isinstance(read.verdicts["x"], KernelVerdict)
