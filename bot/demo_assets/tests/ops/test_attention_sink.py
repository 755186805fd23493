"""Correctness of tilegym.ops.attention_sink (causal GQA attention with per-head sink logits)."""

import pytest
import tilegym
import torch
from tilegym.backend import is_backend_available

from .. import common

_backends = ["cutile"]
if is_backend_available("tilecpp"):
    _backends = _backends + ["tilecpp"]
if is_backend_available("cutile-rs"):
    _backends = _backends + ["cutile-rs"]


class Test_AttentionSink(common.PyTestCase):
    @staticmethod
    def reference(query, key, value, sinks, sm_scale, sliding_window, start_q):
        """query [B, Q, Hkv, G, D]; key/value [B, K, Hkv, D]; sinks [Hkv*G] -> [B, Q, Hkv*G*D]."""
        bsz, n_q, n_kv, groups, dim = query.shape
        n_k = key.shape[1]
        scores = torch.einsum("bqhgd,bkhd->bhgqk", query.float(), key.float()) * sm_scale
        q_pos = torch.arange(n_q, device=query.device) + start_q
        k_pos = torch.arange(n_k, device=query.device)
        visible = k_pos[None, :] <= q_pos[:, None]
        if sliding_window:
            visible = visible & (k_pos[None, :] > q_pos[:, None] - sliding_window)
        scores = scores.masked_fill(~visible, float("-inf"))
        sink = sinks.float().view(1, n_kv, groups, 1, 1).expand(bsz, n_kv, groups, n_q, 1)
        probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
        out = torch.einsum("bhgqk,bkhd->bqhgd", probs, value.float())
        return out.reshape(bsz, n_q, n_kv * groups * dim).to(query.dtype)

    @pytest.mark.parametrize(
        "batch_size, num_queries, num_keys, num_kv_heads, num_groups, head_dim, sliding_window, start_q",
        [
            (1, 1, 128, 8, 8, 64, None, 0),
            (1, 128, 128, 8, 8, 64, None, 0),
            (2, 128, 128, 8, 8, 64, 128, 5),
            (2, 1, 32, 8, 8, 64, None, 5),
        ],
    )
    @pytest.mark.parametrize("backend", _backends)
    def test_op(
        self,
        batch_size,
        num_queries,
        num_keys,
        num_kv_heads,
        num_groups,
        head_dim,
        sliding_window,
        start_q,
        backend,
        arch,
    ):
        if tilegym.is_backend_available(backend):
            tilegym.set_backend(backend)
        else:
            pytest.skip(f"Backend {backend} is not available")
        self.setUp()
        dt = torch.bfloat16
        q = torch.randn(batch_size, num_queries, num_kv_heads, num_groups, head_dim, dtype=dt, device="cuda")
        k = torch.randn(batch_size, num_keys, num_kv_heads, head_dim, dtype=dt, device="cuda")
        v = torch.randn(batch_size, num_keys, num_kv_heads, head_dim, dtype=dt, device="cuda")
        sinks = torch.randn(num_kv_heads * num_groups, dtype=dt, device="cuda")
        start = torch.tensor([start_q], dtype=torch.int32, device="cuda")
        self.assertCorrectness(
            tilegym.ops.attention_sink,
            self.reference,
            {
                "query": q,
                "key": k,
                "value": v,
                "sinks": sinks,
                "sm_scale": 0.125,
                "sliding_window": sliding_window,
                "start_q": start,
            },
            atol=5e-2,
            rtol=1e-2,
            check_stride=False,
        )
