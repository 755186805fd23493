"""``gpu_proof.py run --stage review`` (scripts/gpu/run/review.py): the time-to-review runs, on a CPU."""

from __future__ import annotations

from gpu.run import device
from gpu.run.review import record_review, review_steps, stage_seconds
from gpu.run.steps import Step
from gpu_proof_support import MANIFEST

from bot.job import Run


def test_each_generated_op_runs_verify_in_both_orders_alternated_one_at_a_time(tmp_path):
    planned = review_steps(MANIFEST, tmp_path, tmp_path, ["silu_and_mul", "matmul"], "python3", tmp_path)
    assert [(s.op, s.tree) for s in planned] == [  # matmul was not generated
        ("silu_and_mul", "first"),
        ("silu_and_mul", "beside"),
        ("silu_and_mul", "beside"),
        ("silu_and_mul", "first"),
    ]
    assert [len(g) for g in device.groups(planned)] == [1, 1, 1, 1]
    for step in planned:
        assert ("--dry-run-first" in step.argv) == (step.tree == "first")
        assert step.argv[:4] == ["python3", "-m", "bot.cli", "verify"] and step.argv[-1] == "--json"


def test_stage_seconds_are_read_from_the_lines_verify_prints(tmp_path):
    said: list[str] = []
    run = Run(said.append)
    run.record("dry run", 12.5, "ok", "8 cases equal")
    run.record("device compile", 0.0, "skipped", "no cargo")
    run.record("test", 20.25, "ok", "exit=0: 9 passed")
    text = "\n".join(["[agent-d] verify silu_and_mul: x -> y", *said, "[agent-d]   env: none"])
    assert stage_seconds(text) == {"dry run": 12.5, "device compile": 0.0, "test": 20.25}
    log = tmp_path / "log.txt"
    log.write_text(text + "\nVERDICT: ALL_PASS\n")
    results: dict = {}
    step = Step("review", "silu_and_mul", "beside", [], str(tmp_path), {}, str(log))
    record_review(step, {"seconds": 40.0, "exit": 0, "timed_out": False}, results)
    (entry,) = results["review"]["silu_and_mul"]
    assert entry["order"] == "beside" and entry["stages"]["test"] == 20.25
    assert entry["verdict"]["verdict"] == "ALL_PASS"
