"""Reading a perf run back (bot/perf/records.py): cases, backends, configs, dtypes and medians.

The fixtures under tests/fixtures/perf/ are real output, not written by hand: TileGym's own
``test_perf`` of silu_and_mul (TileGym commit 75a1430), its 512-wide configs, run on a CPU by the
perf stage's own pytest command (bot/perf/run.py) through tests/perf_cpu_plugin.py, which makes
TileGym's ``benchmark_fn``/``benchmark_fn_cudagraph`` run on the CPU (CUDA events read the wall
clock; the kernels' launches are recorded, not run). The records are the dicts TileGym's
``common.benchmark_framework`` returned and pytest's ``record_property`` wrote into the JUnit XML;
the times are a CPU's and mean nothing. ``silu_and_mul_cpu_no_graphs`` is the same run without a
CUDA graph stand-in: the cutile-rs cases, timed through a graph, fail as they would on a machine
without one. Remake them with ``python tests/perf_support.py <TileGym checkout>``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bot.perf import records, summarise
from bot.perf.result import CUTILE, CUTILE_RS, NO_DTYPE, PYTORCH

FIXTURES = Path(__file__).parent / "fixtures" / "perf"
PATHS = ("tests/ops/test_silu_and_mul.py",)
NODE = "tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_perf[{}]"


def _read(name: str, xml: bool = True):
    folder = FIXTURES / name
    log = (folder / "perf_cutile_rs.full.txt").read_text(encoding="utf-8")
    return records.read(
        log, (folder / "perf_records.xml").read_text(encoding="utf-8") if xml else None, PATHS
    )


def test_each_case_of_a_real_run_has_its_backend_config_dtype_and_median():
    cases = {c.nodeid: c for c in _read("silu_and_mul_cpu")}
    assert len(cases) == 6
    rs = cases[NODE.format("cutile_rs-64-1024-512-torch.float16")]
    assert (rs.backend, rs.config, rs.dtype, rs.outcome) == (
        CUTILE_RS,
        "64-1024-512-torch.float16",
        "float16",
        "passed",
    )
    assert rs.median_ms == pytest.approx(6.521788691316033e-06)
    cutile = cases[NODE.format("cutile-64-1024-512-torch.float32")]
    assert (cutile.backend, cutile.config, cutile.dtype) == (CUTILE, "64-1024-512-torch.float32", "float32")
    assert cutile.median_ms == pytest.approx(1.604267954826355)
    torch_case = cases[NODE.format("pytorch-64-1024-512-torch.float16")]
    assert torch_case.backend == PYTORCH and torch_case.median_ms == pytest.approx(346.3819580078125)
    assert all("'forward'" in c.record for c in cases.values())  # the record as pytest wrote it


def test_the_three_backends_meet_on_one_row_per_config():
    result = summarise.summarise(_read("silu_and_mul_cpu"))
    assert [r.config for r in result.rows] == ["64-1024-512-torch.float16", "64-1024-512-torch.float32"]
    row = result.rows[1]
    assert row.vs_cutile == pytest.approx(6.499998107756255e-06 / 1.604267954826355)
    assert row.vs_pytorch == pytest.approx(6.499998107756255e-06 / 443.7386779785156)
    assert [g.dtype for g in result.by_dtype] == ["float16", "float32"]
    expected = math.sqrt(result.rows[0].vs_cutile * result.rows[1].vs_cutile)
    assert result.overall.vs_cutile == pytest.approx(expected) and result.overall.configs == 2
    assert result.verdict == "DONE" and result.unmeasured == []


def test_a_failed_case_has_no_median_and_is_named_with_its_error():
    cases = _read("silu_and_mul_cpu_no_graphs")
    failed = [c for c in cases if c.outcome == "failed"]
    assert [c.backend for c in failed] == [CUTILE_RS, CUTILE_RS]
    assert all(c.median_ms is None and "CUDA driver version is insufficient" in c.message for c in failed)
    result = summarise.summarise(cases)
    assert result.verdict == "BLOCKED"  # no config has both a cutile-rs and a cuTile median
    assert "no config has both a cutile-rs and a cuTile median" in result.reason
    assert sum("failed: torch.AcceleratorError" in u for u in result.unmeasured) == 2


def test_without_the_xml_every_case_is_read_from_the_log_and_none_has_a_record():
    cases = _read("silu_and_mul_cpu", xml=False)
    assert len(cases) == 6 and all(c.outcome == "passed" and c.median_ms is None for c in cases)
    assert all("without a benchmark record" in c.message for c in cases)
    assert summarise.summarise(cases).verdict == "BLOCKED"


@pytest.mark.parametrize(
    "record, median",
    [
        ("{'cutile-rs': {'forward': {'median': 0.5, 'mean': nan}}}", 0.5),
        ("{'cutile-rs': {'forward': {'median': inf}}}", None),  # no usable median
        ("{'cutile-rs': {'forward': {'median': tensor(0.25), 'mean': 1}}}", 0.25),  # not a literal: by text
        ("{'cutile-rs': {'median': 0.75}}", 0.75),  # a record of one pass
        ("{'cutile-rs': {'forward': {'mean': 1.0}}}", None),
        ("not a record at all", None),
        ("{'cutile-rs': {'forward': {'median': -1.0}}}", None),
    ],
)
def test_a_record_is_read_as_a_literal_and_only_a_usable_median_counts(record, median):
    case = records.case_of(NODE.format("cutile_rs-8-torch.bfloat16"), "passed", "", record)
    assert case.median_ms == (pytest.approx(median) if median is not None else None)
    if median is None:
        assert "no usable median" in case.message
    assert case.backend == CUTILE_RS and case.dtype == "bfloat16" and case.config == "8-torch.bfloat16"


@pytest.mark.parametrize(
    "params, backend, config",
    [
        ("cutile_rs-64-torch.float16", CUTILE_RS, "64-torch.float16"),
        ("64-torch.float16-cutile-rs", CUTILE_RS, "64-torch.float16"),  # pytest's own id keeps the dash
        ("(8, 1, 4096, 14336)-cutile", CUTILE, "(8, 1, 4096, 14336)"),
        ("2-2048-True-False-torch.float16-pytorch", PYTORCH, "2-2048-True-False-torch.float16"),
        ("cutile-rs", CUTILE_RS, ""),
        ("64-triton", "", "64-triton"),
    ],
)
def test_the_backend_is_the_id_field_that_spells_one(params, backend, config):
    assert records.split_backend(params) == (backend, config)


def test_the_record_key_names_the_backend_where_the_id_does_not():
    case = records.case_of(
        "t.py::test_perf[64-fp16-framework0]", "passed", "", "{'cutile-rs': {'forward': {'median': 1.0}}}"
    )
    assert (case.backend, case.dtype) == (CUTILE_RS, "float16")
    assert records.dtype_of("64-1024") == NO_DTYPE


def test_the_xml_is_read_as_data():
    hostile = '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><testsuites><testcase name="a">&e;</testcase></testsuites>'
    assert records.properties(hostile) == {}
    assert records.properties("<testsuites") == {}
