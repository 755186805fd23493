"""A row kernel with a second output (``rstd`` beside ``out``): a precise question without a contract,
and every wrapper contract key honoured on the row path with one (issue 11, classes 2 and 3)."""

from __future__ import annotations

import textwrap

import pytest

from bot.emit import cdef, ffi_rs, wrapper_py
from bot.pipeline import make_plan
from bot.targets.types import Target

RSTD_PARAM = "        out_ptr: *mut E,\n"
RSTD_STORE = """
        let r_base: PointerTile<*mut E, { [] }> = pointer_to_tile(rstd_ptr);
        let r_p0: PointerTile<*mut E, { [1] }> = r_base.reshape(const_shape![1]);
        let r_ps: PointerTile<*mut E, { [BLOCK_SIZE] }> = r_p0.broadcast(const_shape![BLOCK_SIZE]);
        let r_ptrs: PointerTile<*mut E, { [BLOCK_SIZE] }> = r_ps.offset_tile(cols);
        let _rstd_tok: Token = store_ptr_tko(
            r_ptrs,
            result,
            ordering::Weak,
            None::<scope::TileBlock>,
            Some(mask),
            None::<Token>,
            Latency::<3>,
        );
    }
}
"""


@pytest.fixture()
def two_outputs(tmp_path, tilegym_wheel):
    """silu_and_mul's kernel with a second pointer output ``rstd_ptr`` written by a store."""
    from bot.demo import assemble_checkout

    repo = assemble_checkout(tmp_path / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]).repo
    target = Target(repo, "silu_and_mul")
    text = target.kernel_rs.read_text()
    assert RSTD_PARAM in text
    text = text.replace(RSTD_PARAM, RSTD_PARAM + "        rstd_ptr: *mut E,\n", 1)
    head, _, _ = text.rstrip().rpartition("    }\n}")
    target.kernel_rs.write_text(head + RSTD_STORE)
    return target


def _plan(target: Target):
    return make_plan(target, target.repo / "out" / target.op)[0]


def test_a_second_output_without_a_binding_is_a_question_not_a_crash(two_outputs):
    plan = _plan(two_outputs)
    assert [t.name for t in plan.ffi.tensors if t.role == "output"] == ["out", "rstd"]
    (question,) = [m for m in plan.missing if m.key == "python.tensors"]
    assert "`rstd`" in question.question and "python.alloc" in question.question


def test_row_path_honours_alloc_tensors_steps_args_and_result(two_outputs):
    (two_outputs.kernel_dir / "host_contract.yaml").write_text(
        textwrap.dedent(
            """\
            contract_version: 1
            python:
              steps:
                - {let: width, expr: "next_power_of_2(out_cols)"}
              alloc:
                rstd: "torch.empty((n_rows, out_cols), device=input.device, dtype=input.dtype)"
              tensors:
                rstd: rstd
              args:
                block_size: width
              result: "(out_rows.view(*out_shape), rstd)"
            """
        )
    )
    plan = _plan(two_outputs)
    assert plan.missing == []
    assert plan.contract_lines == 10
    py = plan.python
    assert py.tensors_py["rstd"] == "rstd" and py.ffi_args["block_size"] == "width"
    assert py.sources["python.alloc"].kind == "contract"
    text = wrapper_py.render(plan)
    lines = [line.strip() for line in text.splitlines()]
    width = lines.index("width = next_power_of_2(out_cols)")
    alloc = lines.index("rstd = torch.empty((n_rows, out_cols), device=input.device, dtype=input.dtype)")
    launch = next(i for i, line in enumerate(lines) if line.startswith("_launch("))
    assert width < alloc < launch
    assert "rstd, input_rows, width," in lines[launch].replace("out_rows, ", "")
    assert "result = (out_rows.view(*out_shape), rstd)" in lines
    # out= would receive a copy of a single output: with a tuple result it is refused, not guessed
    assert lines.index("if out is not None:") < width
    assert "out.copy_(result)" not in text
    assert cdef.cross_check(ffi_rs.render(plan), cdef.render(plan.ffi)) == []


def test_runtime_float_scalar_of_a_row_kernel_is_a_c_argument_fed_by_the_wrapper(two_outputs):
    """``eps: f32`` is no descriptor field: a float C argument, the wrapper parameter of its name."""
    text = two_outputs.kernel_rs.read_text()
    two_outputs.kernel_rs.write_text(
        text.replace("        rstd_ptr: *mut E,\n", "        rstd_ptr: *mut E,\n        eps: f32,\n")
    )
    without = _plan(two_outputs)
    (question,) = [m for m in without.missing if m.key == "python.args.eps"]
    assert "runtime_scalar" in question.question and "ffi.scalars.eps" in question.question
    (two_outputs.kernel_dir / "host_contract.yaml").write_text(
        textwrap.dedent(
            """\
            contract_version: 1
            python:
              signature: "input, eps=1e-6, out=None, **kwargs"
              alloc: {rstd: "torch.empty_like(out_rows)"}
              tensors: {rstd: rstd}
            """
        )
    )
    plan = _plan(two_outputs)
    assert plan.missing == []
    (eps,) = [s for s in plan.ffi.scalars if s.name == "eps"]
    assert (eps.ctype, eps.role) == ("f32", "runtime_scalar")
    assert plan.python.ffi_args["eps"] == "eps"
    assert "float eps" in cdef.render(plan.ffi)
    assert "def silu_and_mul(input, eps=1e-6, out=None, **kwargs):" in wrapper_py.render(plan)
    assert cdef.cross_check(ffi_rs.render(plan), cdef.render(plan.ffi)) == []
