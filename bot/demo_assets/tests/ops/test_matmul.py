"""Correctness of tilegym.ops.matmul (C = A @ B, no transposes)."""

import pytest
import tilegym
import torch
from tilegym.backend import is_backend_available

from .. import common

# (m, n, k, dtype)
_SHAPES = [
    (8, 8, 8, torch.bfloat16),
    (512, 256, 1024, torch.bfloat16),
    (1024, 1024, 1024, torch.bfloat16),
    (1024, 512, 256, torch.float16),
    (256, 512, 1024, torch.float32),
]


def _params(backends):
    return [(b, p, *shape) for b in backends for p in (True, False) for shape in _SHAPES]


def _param_id(param):
    backend, persistent, m, n, k, dtype = param
    return f"{backend}-static_persistent={persistent}-{m}x{n}x{k}-{str(dtype).removeprefix('torch.')}"


class Test_Matmul(common.PyTestCase):
    @staticmethod
    def reference(a, b):
        return a @ b

    _backends = ["cutile"]
    if is_backend_available("tilecpp"):
        _backends = _backends + ["tilecpp"]
    if is_backend_available("cutile-rs"):
        _backends = _backends + ["cutile-rs"]
    _test_op_params = _params(_backends)

    # Explicit ids: the backend keeps its hyphen here ("cutile-rs"), unlike auto ids.
    @pytest.mark.parametrize(
        "backend, static_persistent, m, n, k, dtype",
        _test_op_params,
        ids=[_param_id(p) for p in _test_op_params],
    )
    def test_op(self, backend, static_persistent, m, n, k, dtype, arch):
        if tilegym.is_backend_available(backend):
            tilegym.set_backend(backend)
        else:
            pytest.skip(f"Backend {backend} is not available")
        self.setUp()
        a = torch.rand((m, k), dtype=dtype, device="cuda")
        b = torch.rand((k, n), dtype=dtype, device="cuda")
        self.assertCorrectness(
            tilegym.ops.matmul,
            self.reference,
            {"a": a, "b": b},
            extra_test_kwargs={"static_persistent": static_persistent},
            atol=1e-2,
            rtol=1e-2,
        )
