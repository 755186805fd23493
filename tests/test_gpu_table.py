"""CPU-side tests of scripts/gpu_proof.py table: docs/gpu.md from one or more results.json."""

from __future__ import annotations

import json

import pytest
from gpu.tables import gpu_md as table
from gpu_proof_support import RESULTS


def test_table_renders_both_columns_verdict_ratio_and_marks(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    text = table.table([results], tmp_path / "docs" / "gpu.md")
    assert (tmp_path / "docs" / "gpu.md").read_text() == text
    notes = "\n## What these runs show\n\nWritten by hand.\n"
    (tmp_path / "docs" / "gpu.md").write_text(text + notes)
    assert table.table([results], tmp_path / "docs" / "gpu.md") == text + notes  # tables redone, notes kept
    assert "TileGym commit: `75a14307776188ff0baf451cd9b9fc9fa3a87233`" in text
    assert "Device: NVIDIA H200 (sm_90)" in text and "2026-12-02" in text
    silu = text.split("## silu_and_mul")[1].split("## bmm")[0]
    assert "| Tests passed / failed / skipped | 33 / 1 / 0 | 33 / 1 / 0 |" in silu
    assert "`VERDICT: FAIL` (kernel: 1 test failed)" in silu
    assert "| Host time ratio agent-d / hand-written | 1.20 | |" in silu
    assert "also fails with hand-written code" in silu
    bmm = text.split("## bmm")[1]
    assert "not generated (BLOCKED host: bmm: no host pattern for this kernel yet)" in bmm
    assert "10 / 0 / 2" in bmm


def test_table_merges_later_runs_and_says_where_each_figure_comes_from(tmp_path):
    tested = dict(RESULTS, bundle="b1", time_utc="T1", stage="all", agent_d_commit="1111111aaa")
    timed = {
        "bundle": "b2",
        "time_utc": "T2",
        "stage": "bench",
        "agent_d_commit": "2222222bbb",
        "tilegym_commit": RESULTS["tilegym_commit"],
        "ops": {
            "silu_and_mul": {
                "host_time": {
                    "hand_written": {"us_per_call": 50.0},
                    "agent_d": {"us_per_call": 45.0},
                    "ratio": 0.91,
                }
            }
        },
    }
    paths = []
    for i, r in enumerate((tested, timed)):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(r))
    text = table.table(paths, tmp_path / "gpu.md")
    silu = text.split("## silu_and_mul")[1].split("## bmm")[0]
    assert "| Tests passed / failed / skipped | 33 / 1 / 0 | 33 / 1 / 0 |" in silu  # from the first run
    assert "| Host time ratio agent-d / hand-written | 0.91 | |" in silu  # from the second
    assert "| Tests run in | T1, agent-d `1111111` | the same run |" in silu
    assert "| Host time measured in | T2, agent-d `2222222` | the same process |" in silu
    assert "T2 (bench: silu_and_mul; agent-d `2222222`)" in text
    timed["tilegym_commit"] = "other"
    paths[1].write_text(json.dumps(timed))
    with pytest.raises(ValueError, match="different TileGym commits"):
        table.table(paths, tmp_path / "gpu.md")


def test_a_bench_only_run_does_not_claim_the_tests_it_carried(tmp_path):
    tested = dict(RESULTS, bundle="b1", time_utc="T1", stage="all", agent_d_commit="1111111aaa")
    silu = tested["ops"]["silu_and_mul"]
    carried = {
        **silu,
        "hand_written": {**silu["hand_written"], "passed": 99, "finished_utc": "T0"},
        "agent_d": {**silu["agent_d"], "passed": 99, "finished_utc": "T0"},
        "host_time": {**silu["host_time"], "ratio": 0.5, "finished_utc": "T2b"},
    }
    timed = dict(tested, time_utc="T2", stage="bench", ops={"silu_and_mul": carried})
    merged = table.merge([tested, timed])["ops"]["silu_and_mul"]
    assert merged["hand_written"]["passed"] == 33  # the file that ran the tests wins
    assert merged["tests_from"]["time_utc"] == "T1"
    assert merged["host_time"]["ratio"] == 0.5 and merged["host_time_from"]["time_utc"] == "T2b"
    # on its own, the bench run's carried tests are credited to when they finished, not to T2
    alone = table.merge([timed])["ops"]["silu_and_mul"]
    assert alone["hand_written"]["passed"] == 99 and alone["tests_from"]["time_utc"] == "T0"


def test_a_run_of_the_fault_corpus_alone_merges_and_its_rows_say_their_run(tmp_path):
    def row(match: bool) -> dict:
        return {"fault": "f", "class_of_fault": "host", "decided": "gpu", "match": match,
                "wrong": [] if match else ["class"], "expected": {"verdict": "FAIL", "class": "host", "fix": "x"},
                "got": {"verdict": "FAIL", "class": "host" if match else "kernel", "fix": "x"}}  # fmt: skip

    ops_run = dict(RESULTS, time_utc="T1", stage="test", agent_d_commit="1111111aaa")
    first = dict(ops_run, time_utc="T2", stage="faults", ops={"silu_and_mul": {"pack": {}}},
                 faults={"a": row(False), "b": row(True)})  # fmt: skip
    again = dict(
        first, time_utc="T3", tilegym_commit="", agent_d_commit="3333333ccc", ops={}, faults={"a": row(True)}
    )
    merged = table.merge([ops_run, first, again])
    assert merged["tilegym_commit"] == RESULTS["tilegym_commit"]  # the wheel-only run has none
    assert merged["faults"]["a"]["match"] and merged["faults"]["a"]["from"]["time_utc"] == "T3"
    assert merged["faults"]["b"]["from"]["agent_d_commit"] == "1111111aaa"
    assert [r["ops"] for r in merged["runs"]][1:] == [[], []]  # packed, not run: not listed
    paths = [tmp_path / f"{n}.json" for n in "123"]
    for path, run in zip(paths, (ops_run, first, again)):
        path.write_text(json.dumps(run))
    text = table.table(paths, tmp_path / "gpu.md")
    assert "2 of 2 classified as expected" in text
    assert "Rows from: T2, agent-d `1111111`; T3, agent-d `3333333`." in text
    assert "T3 (faults; agent-d `3333333`)" in text


def test_a_new_op_is_shown_against_the_cutile_backend():
    from gpu.tables import gpu_md as table

    results = {
        "date": "2026-12-03",
        "ops": {
            "dropout": {
                "new": True,
                "contract_lines": 2,
                "pack": {"status": "generated"},
                "agent_d": {
                    "passed": 3,
                    "failed": 1,
                    "skipped": 0,
                    "exit": 1,
                    "first_failure": "FAILED x",
                    "verdict": {"verdict": "FAIL", "class": "kernel", "reason": "a|b"},
                },  # fmt: skip
                "hand_written": {"passed": 4, "failed": 0, "skipped": 0, "exit": 0},
            },
            "rope": {
                "new": True,
                "pack": {"status": "blocked", "port_verdict": "BLOCKED", "reason": "cannot infer: x"},
                "hand_written": {"passed": 2, "failed": 0, "skipped": 0, "exit": 0},
            },  # fmt: skip
        },
    }
    text = table.render(results)
    dropout = text.split("## dropout")[1].split("## rope")[0]
    assert "| | cutile-rs: our kernel.rs, agent-d host code | cuTile backend, same test cases |" in dropout
    assert "| Contract lines the porter wrote | 2 | |" in dropout
    assert "hand-written host code" not in dropout and "Host time" not in dropout
    assert "`VERDICT: FAIL` (kernel: a\\|b)" in dropout
    rope = text.split("## rope")[1]
    assert "not generated (BLOCKED host: cannot infer: x)" in rope
