"""The names a carried program's refusals read (``bot/plan/carry_refusals.py``): the test cases the
carried wrapper refuses as the reference does, whose cuTile skips the test wiring copies."""

from __future__ import annotations

import textwrap

from bot.infer.model.program import Program, Unit
from bot.infer.model.semantic import ModuleModel
from bot.plan.carry_refusals import refused_by

MODULE = "tilegym.ops.cutile.demo"
HEAD = """
import torch
import cuda.tile as ct

@ct.kernel
def _ported(X, TILE: ct.Constant[int]):
    pass

@ct.kernel
def _unported(X, TILE: ct.Constant[int]):
    pass
"""


def _refused(body: str, root: str = "forward") -> list[str]:
    model = ModuleModel.build(HEAD + textwrap.dedent(body), MODULE)
    program = Program(model, lambda _module: None)
    return refused_by(program, program.reach(root), {Unit(MODULE, "_unported")})


def test_the_names_a_raise_s_ifs_and_an_assert_read_and_the_inputs_behind_a_local():
    got = _refused(
        """
        def forward(x, is_causal, scale, n_ctx):
            rows = x.shape[0]
            too_big = rows > 4096
            if scale > 0:
                if is_causal and too_big:
                    raise NotImplementedError("causal, long")
            assert n_ctx % 2 == 0
            ct.launch(torch.cuda.current_stream(), (rows,), _ported, (x, 64))
        """
    )
    # too_big is read by the refusal and comes from x; rows only lies between them
    assert got == ["is_causal", "n_ctx", "scale", "too_big", "x"]


def test_a_helper_s_refusal_reads_what_its_caller_passes_and_an_autograd_forward_s_too():
    got = _refused(
        """
        def _check(flag, width):
            if flag:
                raise ValueError("no flag")

        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, p):
                assert p < 1
                ct.launch(torch.cuda.current_stream(), (1,), _ported, (x, 64))
                return x

            @staticmethod
            def backward(ctx, dy):
                raise NotImplementedError

        def forward(x, causal, dropout_p, width):
            _check(causal, width)
            return _Fn.apply(x, dropout_p)
        """
    )
    # width is passed for a parameter no refusal reads; backward raises unconditionally
    assert got == ["causal", "dropout_p", "flag", "p"]


def test_a_launch_of_a_kernel_kernel_rs_does_not_port_is_a_refusal_and_a_ported_one_is_not():
    got = _refused(
        """
        def _tma(x):
            ct.launch(torch.cuda.current_stream(), (1,), _unported, (x, 64))

        def forward(x, use_tma, fast):
            if use_tma:
                _tma(x)
            elif fast:
                ct.launch(torch.cuda.current_stream(), (1,), _ported, (x, 128))
            else:
                ct.launch(torch.cuda.current_stream(), (1,), _ported, (x, 64))
        """
    )
    assert got == ["use_tma"]


def test_nothing_refused_reads_nothing():
    assert (
        _refused(
            """
        def forward(x):
            ct.launch(torch.cuda.current_stream(), (1,), _ported, (x, 64))
        """
        )
        == []
    )


def test_a_name_bound_to_an_autograd_function_s_apply_runs_its_forward():
    got = _refused(
        """
        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, p):
                assert p < 1
                ct.launch(torch.cuda.current_stream(), (1,), _ported, (x, 64))
                return x

        _op = _Fn.apply

        def forward(x, dropout_p):
            return _op(x, dropout_p)
        """
    )
    assert got == ["dropout_p", "p"]
