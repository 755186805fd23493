"""Correctness of the functional SwiGLU returned by tilegym.ops.get_swiglu(): SiLU(a) * b."""

import pytest
import tilegym
import torch
from tilegym.backend import is_backend_available
from tilegym.ops import get_swiglu

from .. import common


class Test_SwiGLU(common.PyTestCase):
    @staticmethod
    def reference(a, b):
        return torch.nn.functional.silu(a) * b

    _backends = ["cutile"]
    if is_backend_available("tilecpp"):
        _backends = _backends + ["tilecpp"]
    if is_backend_available("cutile-rs"):
        _backends = _backends + ["cutile-rs"]

    def _check(self, batch_size, seq_len, hidden_size):
        self.setUp()
        a = torch.randn(batch_size, seq_len, hidden_size, dtype=torch.float32, device="cuda")
        b = torch.randn(batch_size, seq_len, hidden_size, dtype=torch.float32, device="cuda")
        with torch.no_grad():
            self.assertCorrectness(
                lambda a, b: get_swiglu()(a, b),
                self.reference,
                {"a": a, "b": b},
                rtol=1e-2,
                atol=1e-2,
            )

    @pytest.mark.parametrize(
        "batch_size, seq_len, hidden_size",
        [
            (2, 512, 1024),
            (4, 256, 2048),
            (1, 128, 8192),
        ],
    )
    @pytest.mark.parametrize("backend", _backends)
    def test_op_forward(self, batch_size, seq_len, hidden_size, backend, arch):
        if tilegym.is_backend_available(backend):
            tilegym.set_backend(backend)
        else:
            pytest.skip(f"Backend {backend} is not available")
        self._check(batch_size, seq_len, hidden_size)

    @pytest.mark.parametrize(
        "batch_size, seq_len, hidden_size",
        [
            (7, 100, 1000),
            (13, 333, 1500),
            (8, 64, 3000),
        ],
    )
    @pytest.mark.parametrize("backend", _backends)
    def test_op_forward_irregular(self, batch_size, seq_len, hidden_size, backend, arch):
        if tilegym.is_backend_available(backend):
            tilegym.set_backend(backend)
        else:
            pytest.skip(f"Backend {backend} is not available")
        self._check(batch_size, seq_len, hidden_size)
