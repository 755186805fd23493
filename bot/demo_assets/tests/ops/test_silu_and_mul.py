"""Correctness of tilegym.ops.silu_and_mul: SiLU(x[..., :H]) * x[..., H:]."""

import pytest
import tilegym
import torch
from tilegym.backend import is_backend_available

from .. import common


class Test_SiLUAndMul(common.PyTestCase):
    @staticmethod
    def reference(input):
        gate, up = input.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up

    _backends = ["cutile"]
    if is_backend_available("tilecpp"):
        _backends = _backends + ["tilecpp"]
    if is_backend_available("cutile-rs"):
        _backends = _backends + ["cutile-rs"]

    def _check(self, batch_size, seq_len, hidden_size, dtype):
        self.setUp()
        x = torch.randn(
            (batch_size, seq_len, 2 * hidden_size), dtype=dtype, device="cuda", requires_grad=True
        )
        dy = 0.1 * torch.randn((batch_size, seq_len, hidden_size), dtype=dtype, device="cuda")
        self.assertCorrectness(
            tilegym.ops.silu_and_mul,
            self.reference,
            {"input": x},
            gradient=dy,
            rtol=0.0,
            atol=1e-2,
        )

    @pytest.mark.parametrize(
        "batch_size, seq_len, hidden_size, dtype",
        [
            (4, 64, 512, torch.float16),
            (8, 512, 512, torch.float16),
            (8, 512, 1024, torch.float32),
            (16, 256, 2048, torch.float16),
            (16, 1024, 1024, torch.float32),
            (32, 128, 4096, torch.float32),
        ],
    )
    @pytest.mark.parametrize("backend", _backends)
    def test_op(self, batch_size, seq_len, hidden_size, dtype, backend, arch):
        if tilegym.is_backend_available(backend):
            tilegym.set_backend(backend)
        else:
            pytest.skip(f"Backend {backend} is not available")
        self._check(batch_size, seq_len, hidden_size, dtype)

    # Odd row counts and hidden sizes that are not powers of two.
    @pytest.mark.parametrize(
        "batch_size, seq_len, hidden_size, dtype",
        [
            (7, 100, 1000, torch.float32),
            (13, 333, 1500, torch.float32),
            (8, 256, 3000, torch.float32),
            (5, 17, 777, torch.float16),
        ],
    )
    @pytest.mark.parametrize("backend", _backends)
    def test_op_irregular_shapes(self, batch_size, seq_len, hidden_size, dtype, backend, arch):
        if tilegym.is_backend_available(backend):
            tilegym.set_backend(backend)
        else:
            pytest.skip(f"Backend {backend} is not available")
        self._check(batch_size, seq_len, hidden_size, dtype)
