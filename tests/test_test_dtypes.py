"""The fp8 dtypes an op's correctness tests parametrize over widen its dispatch; a benchmark's do not."""

from __future__ import annotations

from bot.infer import test_dtypes
from bot.infer.facts import Facts
from bot.targets.types import Discovery, Source, Target, TestSite

TESTS = """
import pytest
import torch


class TestScale:
    @pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e5m2])
    def test_op(self, dtype):
        pass

    @pytest.mark.parametrize("dtype", [torch.float8_e4m3fn])
    def test_perf(self, dtype):
        pass
"""


def _gather(tmp_path, functional):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_scale.py").write_text(TESTS)
    site = TestSite("tests/test_scale.py", 0, "", "line 1", functional=functional)
    found = Discovery("scale", "scale", Source("naming", "op"), None, None, tests=(site,))
    facts = Facts()
    test_dtypes.gather(Target(tmp_path, "scale"), found, facts)
    return facts


def test_the_functional_tests_fp8_dtype_joins_the_defaults(tmp_path):
    facts = _gather(tmp_path, ("test_op",))
    assert facts.get("ffi.dtypes") == ["f32", "f16", "bf16", "f8e5m2"]
    assert "test_op passes torch.float8_e5m2" in facts.source("ffi.dtypes").detail


def test_without_fp8_in_the_functional_tests_nothing_is_offered(tmp_path):
    assert _gather(tmp_path, ()).get("ffi.dtypes") is None
