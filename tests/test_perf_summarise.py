"""Stage E's arithmetic and verdict (bot/perf/summarise.py) and the host cause (bot/perf/host_cause.py),
on cases built here as typed data (the parser's own input is real output: tests/test_perf_records.py)."""

from __future__ import annotations

import math

import pytest

from bot.perf import summarise
from bot.perf.host_cause import host_cause, kernel_cause
from bot.perf.result import CUTILE, CUTILE_RS, PYTORCH, Case, Kernel


def case(
    backend: str, config: str, ms: float | None, outcome: str = "passed", dtype: str = "float16"
) -> Case:
    return Case(f"t.py::test_perf[{backend}-{config}]", backend, config, dtype, outcome, median_ms=ms)


def trio(config: str, rs: float | None, cutile: float | None, torch: float | None = 2.0, dtype="float16"):
    return [
        case(CUTILE_RS, config, rs, dtype=dtype),
        case(CUTILE, config, cutile, dtype=dtype),
        case(PYTORCH, config, torch, dtype=dtype),
    ]


@pytest.mark.parametrize(
    "ratio, verdict, severity",
    [
        (0.90, "DONE", "DONE"),
        (1.05, "DONE", "DONE"),
        (1.06, "INVESTIGATE", "MILD_GAP"),
        (1.10, "INVESTIGATE", "MILD_GAP"),
        (1.30, "INVESTIGATE", "MODERATE_GAP"),
        (1.51, "INVESTIGATE", "LARGE_GAP"),
    ],
)
def test_the_overall_geomean_decides_with_the_skills_bands(ratio, verdict, severity):
    result = summarise.summarise(trio("a", ratio, 1.0) + trio("b", ratio * 2, 2.0))
    assert (result.verdict, result.severity) == (verdict, severity)
    assert result.geomean_ratio == pytest.approx(ratio)


def test_one_slow_row_does_not_decide_when_the_geomean_passes():
    result = summarise.summarise(trio("fast", 0.8, 1.0) + trio("slow", 1.3, 1.0))
    assert result.geomean_ratio == pytest.approx(math.sqrt(0.8 * 1.3)) and result.verdict == "DONE"
    assert result.slowest == []  # named only when the run is to be investigated


def test_geomeans_per_dtype_and_overall_for_both_ratios():
    cases = (
        trio("a", 1.0, 2.0, 4.0, "float16")
        + trio("b", 3.0, 1.0, 1.5, "float16")
        + trio("c", 1.0, 1.0, 0.5, "bfloat16")
    )
    result = summarise.summarise(cases)
    f16, bf16 = result.by_dtype
    assert (f16.dtype, f16.configs, bf16.dtype, bf16.configs) == ("float16", 2, "bfloat16", 1)
    assert f16.vs_cutile == pytest.approx(math.sqrt(0.5 * 3.0))
    assert f16.vs_pytorch == pytest.approx(math.sqrt(0.25 * 2.0))
    assert bf16.vs_pytorch == pytest.approx(2.0)
    assert result.overall.vs_cutile == pytest.approx((0.5 * 3.0 * 1.0) ** (1 / 3))
    assert result.verdict == "INVESTIGATE"  # 1.1447 > 1.05
    assert [r.config for r in result.slowest] == ["b"]


def test_a_cutile_rs_case_without_a_median_keeps_the_run_from_done():
    cases = trio("a", 1.0, 1.0) + [case(CUTILE_RS, "b", None, "failed"), case(CUTILE, "b", 1.0)]
    result = summarise.summarise(cases)
    assert (result.verdict, result.severity) == ("INVESTIGATE", "MISSING_DATA")
    assert "1 selected case(s) gave no median" in result.reason
    assert any("t.py::test_perf[cutile-rs-b]: failed" in u for u in result.unmeasured)


def test_pytorch_gates_nothing_and_skips_are_named_not_counted():
    cases = trio("a", 1.0, 1.0, None) + [
        case(PYTORCH, "b", None, "failed"),
        case(CUTILE_RS, "c", None, "skipped"),
    ]
    result = summarise.summarise(cases)
    assert result.verdict == "DONE" and result.overall.vs_pytorch is None
    assert len(result.unmeasured) == 3  # the missing PyTorch medians and the skip are still listed


def test_no_shared_config_is_blocked():
    assert summarise.summarise([case(CUTILE_RS, "a", 1.0), case(CUTILE, "b", 1.0)]).verdict == "BLOCKED"
    empty = summarise.summarise([])
    assert empty.verdict == "BLOCKED" and empty.reason == "no test_perf case was selected"


def test_the_slowest_configs_come_slowest_first_and_at_most_five():
    cases = [c for i in range(7) for c in trio(f"c{i}", 1.2 + i / 10, 1.0)]
    result = summarise.summarise(cases)
    assert [r.config for r in result.slowest] == ["c6", "c5", "c4", "c3", "c2"]


def _with_kernels(c: Case, *kernels: tuple[str, float]) -> Case:
    c.kernels = [Kernel(name, us, 1) for name, us in kernels]
    return c


def test_copies_the_reference_does_not_make_are_the_hosts_cause():
    rs = _with_kernels(
        case(CUTILE_RS, "a", 1.3), ("silu_and_mul_kernel", 10.0), ("Memcpy DtoD (Device -> Device)", 3.0)
    )
    cutile = _with_kernels(case(CUTILE, "a", 1.0), ("silu_and_mul_kernel", 10.0))
    line = host_cause([rs, cutile], [], [])
    assert "copies or fills" in line and "Memcpy DtoD (Device -> Device)" in line and "in a" in line
    assert "3.0 of 13.0 us" in line


def test_no_host_cause_without_evidence_and_the_contract_or_dry_run_otherwise():
    rs = _with_kernels(case(CUTILE_RS, "a", 1.3), ("k", 10.0), ("copy_kernel", 0.2))  # 2%: not noticeable
    cutile = _with_kernels(case(CUTILE, "a", 1.0), ("k", 10.0))
    assert host_cause([rs, cutile], [], []) == ""
    assert "host contract" in host_cause([rs, cutile], ["BLOCK_SIZE: 64 (reference 128)"], [])
    assert "grid" in host_cause(
        [rs, cutile], [], ["grid grid: reference (8, 1, 1), cutile-rs (16, 1, 1) (c)"]
    )


def test_a_cut_sweep_is_a_possible_host_cause_said_last():
    rs = _with_kernels(case(CUTILE_RS, "a", 1.3), ("k", 13.0))
    cutile = _with_kernels(case(CUTILE, "a", 1.0), ("k", 10.0))
    cut = "the wrapper tunes over fewer configs than the cuTile reference (8 of 18 when always; ...)"
    assert host_cause([rs, cutile], [], [], cut) == cut
    # measured or written evidence comes first
    assert "host contract" in host_cause([rs, cutile], ["BLOCK_SIZE: 64 (reference 128)"], [], cut)


def test_the_summary_fits_its_schema():
    import jsonschema

    from bot.perf.result import SUMMARY_SCHEMA

    long = "x" * 900
    result = summarise.summarise(trio(long, 2.0, 1.0))
    result.host_cause = long
    summary = result.summary()
    jsonschema.validate(summary, SUMMARY_SCHEMA)
    assert summary["slowest"][0]["config"] == long[:200] and summary["verdict"] == "INVESTIGATE"


def test_the_port_json_schema_describes_the_same_summary():
    import json
    from pathlib import Path

    from bot.perf.result import SUMMARY_SCHEMA

    docs = json.loads((Path(__file__).parent.parent / "docs" / "port-json.schema.json").read_text())
    described = dict(docs["$defs"]["perf"])
    described.pop("description")
    assert described == json.loads(json.dumps(SUMMARY_SCHEMA))
    assert "perf" in docs["$defs"]["kernel"]["required"]


def test_with_the_launch_equal_and_no_copy_the_gap_is_named_the_kernels_own():
    slow = [
        _with_kernels(case(CUTILE_RS, "n=32", 0.088), ("layer_norm_fwd_kernel_entry", 88.3)),
        _with_kernels(case(CUTILE, "n=32", 0.004), ("_layer_norm_fwd_kernel_Kt1<f16>", 4.2)),
        _with_kernels(case(CUTILE_RS, "n=4096", 0.10), ("layer_norm_fwd_kernel_entry", 100.0)),
        _with_kernels(case(CUTILE, "n=4096", 0.025), ("_layer_norm_fwd_kernel_Kt1<f16>", 25.0)),
    ]
    line = kernel_cause(slow, launch_equal=True)
    assert line.startswith("not the host's") and "layer_norm_fwd_kernel_entry takes 88.3 us" in line
    assert "cuTile's takes 4.2 us (21.02x, n=32)" in line  # the config where it lags most
    assert kernel_cause(slow, launch_equal=False) == ""  # no dry run, or a contract: no claim


def test_no_kernel_cause_where_the_wrapper_copies_or_the_kernel_keeps_up():
    copying = [
        _with_kernels(case(CUTILE_RS, "a", 2.0), ("k", 10.0), ("Memcpy DtoD (Device -> Device)", 10.0)),
        _with_kernels(case(CUTILE, "a", 1.0), ("k", 10.0)),
    ]
    assert kernel_cause(copying, launch_equal=True) == ""
    even = [
        _with_kernels(case(CUTILE_RS, "a", 1.0), ("k", 9.0)),
        _with_kernels(case(CUTILE, "a", 1.0), ("k", 10.0)),
    ]
    assert kernel_cause(even, launch_equal=True) == ""


def test_a_run_its_deadline_cut_short_is_not_done_however_fast_its_measured_configs():
    """mla_decoding's first config-ordered H200 run: 2 configs at 1.00, 191 cases never reached,
    and the verdict said DONE; the cases a deadline left unmeasured are missing data."""
    cases = trio("a", 1.0, 1.0) + [case(CUTILE_RS, "b", None, "not run"), case(CUTILE, "b", None, "not run")]
    result = summarise.summarise(cases)
    assert (result.verdict, result.severity) == ("INVESTIGATE", "MISSING_DATA")
    assert "2 selected case(s) gave no median" in result.reason
    skipped = trio("a", 1.0, 1.0) + [
        case(CUTILE_RS, "b", None, "skipped"),
        case(CUTILE, "b", None, "skipped"),
    ]
    assert summarise.summarise(skipped).verdict == "DONE"  # a skip is the test's own choice
