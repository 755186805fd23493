"""Correctness of tilegym.ops.bmm (batched C = op(A) @ op(B))."""

import pytest
import tilegym
import torch
from tilegym.backend import is_backend_available

from .. import common

# Transposed operands are exercised only by the persistent variant.
_VARIANTS = [
    (True, False, False),
    (True, True, False),
    (True, False, True),
    (True, True, True),
    (False, False, False),
]


class Test_BMM_FWD(common.PyTestCase):
    @staticmethod
    def reference(a, b, transpose_a=False, transpose_b=False):
        if transpose_a:
            a = a.transpose(1, 2)
        if transpose_b:
            b = b.transpose(1, 2)
        return torch.bmm(a, b)

    _backends = ["cutile"]
    if is_backend_available("tilecpp"):
        _backends = _backends + ["tilecpp"]
    if is_backend_available("cutile-rs"):
        _backends = _backends + ["cutile-rs"]

    @pytest.mark.parametrize("static_persistent, transpose_a, transpose_b", _VARIANTS)
    @pytest.mark.parametrize(
        "batch_size, m, n, k, dtype",
        [
            (4, 128, 256, 512, torch.float16),
            (2, 1024, 512, 1024, torch.float16),
            (3, 256, 256, 256, torch.float16),
        ],
    )
    @pytest.mark.parametrize("backend", _backends)
    def test_op(self, batch_size, m, n, k, dtype, static_persistent, transpose_a, transpose_b, backend, arch):
        if tilegym.is_backend_available(backend):
            tilegym.set_backend(backend)
        else:
            pytest.skip(f"Backend {backend} is not available")
        if backend == "tilecpp" and static_persistent:
            pytest.skip("tilecpp static_persistent bmm is not exercised here")
        self.setUp()
        a_shape = (batch_size, k, m) if transpose_a else (batch_size, m, k)
        b_shape = (batch_size, n, k) if transpose_b else (batch_size, k, n)
        a = torch.rand(a_shape, dtype=dtype, device="cuda")
        b = torch.rand(b_shape, dtype=dtype, device="cuda")
        self.assertCorrectness(
            tilegym.ops.bmm,
            self.reference,
            {"a": a, "b": b, "transpose_a": transpose_a, "transpose_b": transpose_b},
            extra_test_kwargs={"static_persistent": static_persistent},
            rtol=1e-2,
            atol=1e-2,
        )
