"""What a directly launched cuTile reference's forward states, read into the wrapper: on references
and kernels written by us (tests/fixtures/reference/forward), one per pattern, each in a checkout
assembled from the tilegym==1.5.1 wheel with the op's reference, public declaration and kernel.rs.

Each plan has no missing fact, and the wrapper agent-d generates binds every name it reads: ``ruff
check --select F`` finds nothing in it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.emit import generate
from bot.pipeline import make_plan
from bot.plan.types import LaunchPlan
from bot.targets.types import Target

FORWARD = Path(__file__).parent / "fixtures" / "reference" / "forward"
OPS = sorted(p.stem for p in FORWARD.glob("*.py"))

# The public declarations of our ops, annotated as TileGym's ops.py annotates its own.
DECLARATIONS = '''"""Public declarations of agent-d's test ops (written by us, not TileGym's)."""

import torch

from tilegym.backend import dispatch


@dispatch("scaled_copy")
def scaled_copy(src: torch.Tensor, factor: float = 1.0) -> torch.Tensor:
    raise NotImplementedError


@dispatch("line_sum")
def line_sum(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    raise NotImplementedError


@dispatch("group_scale")
def group_scale(x: torch.Tensor, scale: torch.Tensor, dim: int = -1) -> torch.Tensor:
    raise NotImplementedError


@dispatch("shift_add")
def shift_add(x: torch.Tensor, y: torch.Tensor, shift: float = 0.0) -> torch.Tensor:
    raise NotImplementedError


@dispatch("rms_rows")
def rms_rows(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    raise NotImplementedError


@dispatch("soft_sign")
def soft_sign(x: torch.Tensor, **kwargs) -> torch.Tensor:
    raise NotImplementedError
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory, tilegym_wheel) -> Path:
    checkout = assemble_checkout(
        tmp_path_factory.mktemp("forward") / "tg", tilegym_wheel, ["silu_and_mul"], ["silu_and_mul"]
    ).repo
    (checkout / "src/tilegym/ops/forward_ops.py").write_text(DECLARATIONS)
    for op in OPS:
        shutil.copy(FORWARD / f"{op}.py", checkout / "src/tilegym/ops/cutile" / f"{op}.py")
        kernel_dir = checkout / "src/tilegym/ops/cutile_rs" / f"{op}_kernel"
        kernel_dir.mkdir()
        shutil.copy(FORWARD / f"{op}.rs", kernel_dir / "kernel.rs")
    return checkout


def _port(repo: Path, op: str, carry: bool = False) -> tuple[LaunchPlan, str]:
    """The op's plan, with no missing fact, and its generated wrapper, F-clean. By default the plan's
    own wrapper half (``--no-carry``), whose reading of the forward these tests pin until it is
    retired (docs/carry.md); ``carry``: the reference's host code carried over, as a port writes it."""
    target = Target(repo, op)
    plan, _facts, co = make_plan(target, repo / "out" / op, carry_always=carry)
    assert [m.key for m in plan.missing] == [], [f"{m.key}: {m.question}" for m in plan.missing]
    files = apply.formatted(generate.generate(target, plan, co), repo)
    wrapper = next(f.content for f in files.files if f.path.endswith(f"ops/cutile_rs/{op}.py"))
    assert _pyflakes(wrapper) == "", wrapper
    return plan, wrapper


def _pyflakes(text: str) -> str:
    """What ``ruff check --select F`` says of a wrapper ("" when nothing)."""
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    proc = subprocess.run(
        [*cmd, "check", "--select", "F", "--isolated", "--no-cache", "--output-format", "concise",
         "--stdin-filename", "wrapper.py", "-"],
        input=text, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return "" if proc.returncode == 0 else proc.stdout


def _body(wrapper: str, op: str) -> str:
    return wrapper[wrapper.index(f'@register_impl("{op}"') :]


@pytest.mark.parametrize("op", OPS)
def test_each_forward_is_carried_over_as_a_port_writes_it(repo, op):
    plan, wrapper = _port(repo, op, carry=True)
    assert plan.carry is not None, op
    assert "cuda.tile" not in wrapper and "tilegym.ops.cutile." not in wrapper


def test_a_local_passed_to_the_kernel_is_matched_by_its_name(repo):
    """`n_elements = src.numel()` handed to the reference kernel's `NUMEL`: kernel.rs names its
    scalar after the local, and the launch's argument at that place is what it gets."""
    plan, wrapper = _port(repo, "scaled_copy")
    assert plan.python.ffi_args["n_elements"] == "n_elements"
    assert any(
        detail.endswith("argument NUMEL -> scalar n_elements (the launch passes `n_elements` there)")
        for detail in _arg_sources(repo, "scaled_copy")
    )
    body = _body(wrapper, "scaled_copy")
    assert "    n_elements = src.numel()\n" in body  # bound before the launch passes it
    assert plan.python.ffi_args["num_programs"] == "(n_elements + 1024 - 1) // 1024"


def test_a_row_shaped_kernel_launched_as_its_reference_binds_what_it_passes(repo):
    """Raw pointers and one block axis look like a row kernel, but the reference states its launch
    (elements, not rows): the wrapper keeps the reference's steps, so `n_elements`, passed to the
    launch, is bound (the row defaults dropped that binding: F821)."""
    kernel = repo / "src/tilegym/ops/cutile_rs/scaled_copy_kernel/kernel.rs"
    original = kernel.read_text()
    kernel.write_text(original.replace("n_elements", "numel"))  # named as the reference kernel's
    try:
        plan, wrapper = _port(repo, "scaled_copy")
    finally:
        kernel.write_text(original)
    assert plan.python.ffi_args["numel"] == "n_elements"
    assert "    n_elements = src.numel()\n" in _body(wrapper, "scaled_copy")
    assert plan.ffi.sources["layout"].kind == "reference"  # the reference's launch, not the row guess
    assert [s.name for s in plan.ffi.scalars if s.role == "grid"] == ["num_programs"]


def test_an_if_elif_else_on_the_op_s_argument_chooses_strides_and_counts(repo):
    plan, wrapper = _port(repo, "line_sum")
    body = _body(wrapper, "line_sum")
    # each test read once, in order, only when no earlier one held
    assert "    _branch_19 = dim == 0\n" in body
    assert "    _branch_24 = not _branch_19 and (dim == 1 or dim == -1)\n" in body
    assert "    step = x.stride(0) if _branch_19 else None\n" in body
    assert "    step = x.stride(1) if _branch_24 else step\n" in body
    assert "    lines = x.shape[0] if _branch_24 else lines\n" in body
    # the raising else is the same check, its f-string message kept
    assert (
        '    if not (_branch_19 or _branch_24):\n        raise ValueError(f"dim must be 0 or 1, got {dim}")\n'
    ) in body
    assert {k: plan.python.ffi_args[k] for k in ("lines", "length", "step", "pitch")} == {
        "lines": "lines",
        "length": "length",
        "step": "step",
        "pitch": "pitch",
    }


def test_products_over_the_shape_are_math_prod(repo):
    plan, wrapper = _port(repo, "group_scale")
    body = _body(wrapper, "group_scale")
    assert "    outer = math.prod(x.shape[:dim])\n" in body  # functools.reduce(operator.mul, .., 1)
    assert "    inner = math.prod(x.shape[dim:])\n" in body
    assert "    total = math.prod(x.shape)\n" in body  # reduce(operator.mul, ..) imported from functools
    assert "import math\n" in wrapper
    args = plan.python.ffi_args
    assert (args["grid_x"], args["grid_y"]) == ("outer", "cdiv(inner, 512)")
    assert plan.python.tensors_py == {"y": "y.view(-1)", "x": "x.view(-1)", "scale": "scale"}


def test_flattening_views_strides_and_sizes(repo):
    plan, wrapper = _port(repo, "shift_add")
    body = _body(wrapper, "shift_add")
    assert "    a = x.contiguous().view(-1)\n    b = y.reshape(-1)\n    n = a.size(0)\n" in body
    assert "    out = torch.empty_like(x).flatten()\n" in body
    args = plan.python.ffi_args
    # STRIDE_A ~ a_stride: the same words; x.stride(d) as the reference passes it
    assert (args["a_stride"], args["b_stride"]) == ("a.stride(0)", "b.stride(-1)")
    assert args["num_programs"] == "cdiv(n, 1024)"  # ct.cdiv is the wrapper's cdiv
    assert plan.python.tensors_py == {"out": "out", "a": "a", "b": "b"}
    assert plan.python.alloc == {"out": "out"}  # the flat view of a new tensor is held by `out`
    assert plan.python.result == "out.view(x.shape)"


def test_two_outputs_allocated_by_the_reference(repo):
    plan, wrapper = _port(repo, "rms_rows")
    body = _body(wrapper, "rms_rows")
    assert "    y = x2.new_empty((rows, n))\n" in body
    # `stat_shape[-1] = 1` on the list it built: the list with that item replaced
    assert "    stat_shape = list(x.shape)\n    stat_shape = stat_shape[:-1] + [1]\n" in body
    assert "    rstd = torch.empty(stat_shape, dtype=torch.float32, device=x.device)\n" in body
    assert plan.python.alloc == {"y": "y", "rstd": "rstd"}
    assert plan.python.tensors_py["rstd"] == "rstd.view(-1)"
    assert [t.name for t in plan.ffi.tensors if t.role == "output"] == ["y", "rstd"]
    assert plan.python.result == "(y.view_as(x), rstd)"


def test_reference_parameters_named_unlike_the_declaration_read_the_wrapper_s_names(repo):
    """The reference registers `soft_sign(input, ...)`, the declaration `soft_sign(x, ...)`: the
    steps read `x`, never Python's builtin `input` (which ruff cannot flag)."""
    _plan, wrapper = _port(repo, "soft_sign")
    body = _body(wrapper, "soft_sign")
    assert "def soft_sign(x, **kwargs):" in body
    assert "input" not in body
    assert "    y = torch.empty_like(x)\n" in body


def test_a_scalar_the_reference_passes_is_not_guessed_from_its_letter(repo):
    """kernel.rs's `n` beside a single input reads like softmax's column count (`dim(x,1)` by
    naming); the reference passes `x.numel()` of the flat view: that is its value."""
    plan, wrapper = _port(repo, "soft_sign")
    assert "n" not in {d.name for d in plan.ffi.derived}
    assert plan.python.ffi_args["n"] == "n" and "    n = x.numel()\n" in _body(wrapper, "soft_sign")
    (scalar,) = [s for s in plan.ffi.scalars if s.name == "n"]
    assert scalar.role == "runtime_scalar" and scalar.source.kind == "reference"


def _arg_sources(repo: Path, op: str) -> list[str]:
    _plan, facts, _co = make_plan(Target(repo, op), repo / "out" / op)
    return [fact.source.detail for fact in facts.under("python.args").values()]


HALVED = """
import cuda.tile as ct
import torch
from functools import reduce

from tilegym.backend import register_impl


@ct.kernel
def _halve_kernel(X, Y, N2: int, ROWS: int, TILE: ct.Constant[int]):
    pass


@register_impl("halve", backend="cutile")
def halve(x, dim=-1):
    dim = dim % x.dim()
    y_shape = list(x.shape)
    y_shape[dim] = y_shape[dim] // 2
    n2 = reduce(lambda a, b: a * b, x.shape[dim:], 1)
    n2 //= 2
    y = torch.empty(y_shape, dtype=x.dtype, device=x.device)
    ct.launch(torch.cuda.current_stream(), (n2,), _halve_kernel, (x.view(-1), y.view(-1), n2, x.numel() // n2, 256))
    return y
"""


def _halve_signature():
    from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param

    entry = Entry(
        name="halve_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32")),
        params=(
            Param("x", "tensor", "E", 1),
            Param("y", "tensor", "E", 1),
            Param("n2", "scalar", ty="i32"),
            Param("rows", "scalar", ty="i32"),
        ),
        outputs=("y",),
        output_evidence={},
        block=BlockUse(1, False),
    )
    return KernelSignature("halve_module", (entry,))


def test_an_item_of_a_shape_list_at_a_variable_index_and_an_augmented_assignment():
    import ast

    from bot.infer.reference import direct as reference_direct

    reading = reference_direct.read_tree(ast.parse(HALVED), "halve", _halve_signature())
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    assert (
        "y_shape",
        "[y_shape[dim] // 2 if _i == dim % len(y_shape) else _d for _i, _d in enumerate(y_shape)]",
    ) in lets
    assert ("n2", "math.prod(x.shape[dim:])") in lets  # a multiplying lambda is operator.mul
    assert ("n2", "n2 // 2") in lets
    assert reading.outputs == {"y": "y"} and reading.args["rows"][0] == "x.numel() // n2"


def test_an_item_assigned_to_what_is_not_a_list_built_there_is_refused():
    import ast

    from bot.infer.launch.syntax import NotThisShape
    from bot.infer.reference import direct as reference_direct

    source = HALVED.replace("y_shape = list(x.shape)", "y_shape = x.shape")
    with pytest.raises(
        NotThisShape, match=r"line 18: cannot assign to `y_shape\[dim\] = y_shape\[dim\] // 2` \(not a list"
    ):
        reference_direct.read_tree(ast.parse(source), "halve", _halve_signature())
