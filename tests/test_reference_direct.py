"""The reader of directly launched cuTile references (``ct.launch``), on a reference written by us
(tests/fixtures/reference/scaled_mask.py) and small variations of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.infer import reference_direct
from bot.infer.launch_ast import NotThisShape
from bot.types import BlockUse, Entry, Generic, KernelSignature, Param

REFERENCE = (Path(__file__).parent / "fixtures" / "reference" / "scaled_mask.py").read_text()


def _signature(axes: int = 1) -> KernelSignature:
    entry = Entry(
        name="scaled_mask_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(
            Generic("E", "type"),
            Generic("BLOCK_SIZE", "const", "i32"),
            Generic("KEEP", "const", "i32"),
        ),
        params=(
            Param("x", "tensor", "E", 1),
            Param("out", "tensor", "E", 1),
            Param("row_stats", "tensor", "f32", 1),
            Param("n", "scalar", ty="i32"),
            Param("p", "scalar", ty="f32"),
            Param("seed", "scalar", ty="i32"),
        ),
        outputs=("out", "row_stats"),
        output_evidence={},
        block=BlockUse(axes, False),
    )
    return KernelSignature("scaled_mask_module", (entry,))


def _read(source: str = REFERENCE, axes: int = 1):
    import ast

    return reference_direct.read_tree(ast.parse(source), "scaled_mask", _signature(axes))


def test_the_launch_is_followed_through_the_autograd_function():
    reading = _read()
    assert reading.function == "scaled_mask():55" and reading.launch_lines == ["45"]
    # the forward's parameters already carry the caller's names: no rebinding steps
    assert not any(s.get("let") in ("x", "seed", "p") for s in reading.steps)
    assert reading.steps[0] == {"return": "x", "when": "not training"}  # an early return
    assert reading.steps[1] == {"let": "out", "expr": "x if inplace else torch.empty_like(x)"}
    assert reading.steps[2]["check"] == "not (x.is_contiguous())"
    assert reading.steps[2]["message"] == "cutile-rs scaled_mask: x must be contiguous"
    # `if n > 65536: raise RuntimeError(...)` is the same check in the wrapper
    assert {
        "check": "n > 65536",
        "raise": "RuntimeError",
        "message": "rows wider than 64K are not supported",
    } in (reading.steps)
    assert reading.result == "out"
    assert reading.tensor_params == ["x"]  # the wrapper parameters the kernel reads as tensors


def test_arguments_map_by_position_then_by_name_onto_kernel_rs():
    reading = _read()
    assert reading.tensors == {"x": "x.view(-1)", "out": "out.view(-1)", "row_stats": "stats"}
    # outputs: what the reference writes into, in place or allocated
    assert reading.outputs == {"out": "out", "row_stats": "stats"}
    assert reading.args["n"][0] == "n"  # a scalar of the same name
    assert reading.args["p"][0] == "p"  # P ~ p: case aside
    # the module helper is inlined, its `if` turned into a conditional value
    assert reading.args["seed"][0] == (
        "(int(seed) * 40503 & 65535) - 65536 if int(seed) * 40503 & 65535 >= 32768 else int(seed) * 40503 & 65535"
    )
    # TILE_SIZE ~ BLOCK_SIZE (its twin), the module constant inlined; a bool flag feeds an i32 generic
    assert reading.args["block_size"][0] == "int(512)"
    assert reading.args["keep"][0] == "int(bool(training))"  # the caller's flag: None reads as False
    assert reading.args["num_programs"][0] == "cdiv(rows * n, 512)"  # math.ceil(a / b) -> cdiv


def test_a_grid_of_more_terms_feeds_grid_xyz():
    source = REFERENCE.replace(
        "grid = (math.ceil(rows * n / TILE), 1, 1)", "grid = (rows, math.ceil(n / TILE))"
    )
    args = _read(source, axes=2).args
    assert [args[g][0] for g in ("grid_x", "grid_y", "grid_z")] == ["rows", "cdiv(n, 512)", "1"]
    with pytest.raises(NotThisShape, match="not 1-D"):
        _read(source, axes=1)


def test_what_the_wrapper_cannot_evaluate_stops_the_reading_with_the_name():
    source = REFERENCE.replace(", _mix(seed),", ", _unknown_helper(seed),")
    with pytest.raises(NotThisShape, match="would need _unknown_helper of the reference module"):
        _read(source)


def test_a_statement_it_cannot_follow_is_named_by_its_line():
    source = REFERENCE.replace(
        "        rows, n = x.shape\n",
        "        for _ in range(2):\n            pass\n        rows, n = x.shape\n",
    )
    with pytest.raises(NotThisShape, match=r"line \d+: cannot follow `for _ in range\(2\):`"):
        _read(source)


def test_a_kernel_rs_tensor_without_a_twin_is_refused():
    source = REFERENCE.replace("ROW_STATS", "STATS")
    with pytest.raises(NotThisShape, match="kernel.rs tensors row_stats have no twin"):
        _read(source)


def test_a_reference_without_a_launch_is_not_this_reader_s():
    assert (
        _read(
            "from tilegym.backend import register_impl\n\n@register_impl('scaled_mask', backend='cutile')\ndef f(x):\n    return x\n"
        )
        is None
    )


def test_an_early_return_step_is_rendered_before_the_launch():
    from bot.emit.wrapper_py import _step
    from bot.infer.facts import Facts
    from bot.plan.python_side import contract_steps
    from bot.types import Source

    facts = Facts()
    facts.offer("python.steps", _read().steps, Source("reference", "scaled_mask.py"))
    first = contract_steps(facts)[0]
    assert (first.kind, first.target, first.expr) == ("return", "not training", "x")
    assert _step(first) == ["if not training:", "    return x"]


ROTATE = """
import cuda.tile as ct
import torch
from tilegym.backend import register_impl


@ct.kernel
def _rotate_kernel(a, b, table, ROWS, TILE_A):
    pass


def _pick(a, grid):
    return cached_replace_hints(_rotate_kernel, occupancy=4)


def _forward(a, b, table, width=None):
    rows, cols = a.shape
    if width is None:
        width = cols
    if table.ndim == 2:
        table = table.unsqueeze(0)
        b = b.contiguous()
    grid = (rows, 1, 1)
    kernel = _pick(a, grid)
    ct.launch(torch.cuda.current_stream(), grid, kernel, (a, b, table, rows, next_power_of_2(width)))
    return a, b, table


@register_impl("rotate", backend="cutile")
def rotate(a, b, table, factor=1.0):
    width = None
    if factor < 1.0:
        full = a.shape[-1]
        width = int(full * factor)
        assert table.shape[-1] == width, "table width"
    a, b, table = _forward(a, b, table, width=width)
    return a, b
"""


def _rotate_signature() -> KernelSignature:
    entry = Entry(
        name="rotate_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("ROWS", "const", "i32"), Generic("TILE_A", "const", "i32")),
        params=(Param("a", "tensor", "E", 2), Param("b", "tensor", "E", 2), Param("table", "tensor", "E", 3)),
        outputs=("a", "b"),
        output_evidence={},
        block=BlockUse(1, False),
    )
    return KernelSignature("rotate_module", (entry,))


def test_in_place_outputs_a_tuned_kernel_helper_and_guarded_branches():
    import ast

    reading = reference_direct.read_tree(ast.parse(ROTATE), "rotate", _rotate_signature())
    # the helper that tunes the kernel leaves no step: the launcher takes the kernel itself
    assert not any("_pick" in s.get("expr", "") for s in reading.steps)
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    # a branch of several assignments is decided once, before any of them
    assert ("_branch_20", "table.ndim == 2") in lets
    assert ("table", "table.unsqueeze(0) if _branch_20 else table") in lets
    assert ("b", "b.contiguous() if _branch_20 else b") in lets
    assert ("width", "cols if width is None else width") in lets  # `if width is None: width = cols`
    # a name the branch introduces is None otherwise; the assert holds under the branch
    assert ("full", "a.shape[-1] if _branch_32 else None") in lets
    assert {"check": "(_branch_32) and not (table.shape[-1] == width)", "raise": "ValueError",
            "message": "cutile-rs rotate: table width"} in reading.steps  # fmt: skip
    # the kernel writes the caller's a and b in place: outputs without an allocation, and tensors
    assert reading.outputs == {"a": "a", "b": "b"}
    assert reading.tensor_params == ["a", "b", "table"]
    assert reading.result == "(a, b)"
    assert (
        reading.args["rows"][0] == "int(rows)" and reading.args["tile_a"][0] == "int(next_power_of_2(width))"
    )


def test_a_value_computed_after_the_launch_stops_the_reading():
    import ast

    source = ROTATE.replace(
        "a, b, table = _forward(a, b, table, width=width)", "c, d, e = _forward(a, b, table, width=width)"
    )
    source = source.replace("return a, b\n", "return c, d\n")
    with pytest.raises(NotThisShape, match="is computed after the launch"):
        reference_direct.read_tree(ast.parse(source), "rotate", _rotate_signature())


def test_facts_name_dropped_reference_parameters_and_offer_no_empty_result():
    import ast

    from bot.infer.facts import Facts
    from bot.infer.reference import ReferenceOp

    source = REFERENCE.replace("        ctx.p = p\n        return out\n", "        ctx.p = p\n")
    source = source.replace(
        "    return _ScaledMask.apply(x, seed, p, training, inplace)",
        "    _ScaledMask.apply(x, seed, p, training, inplace)",
    )
    source = source.replace(
        "def _scaled_mask_kernel(X, OUT,", "def _scaled_mask_kernel(X, OUT, EXTRA_FLAG,"
    ).replace("args = (x.view(-1), out.view(-1),", "args = (x.view(-1), out.view(-1), 1,")
    facts = Facts()
    ref = ReferenceOp(Path("ops/cutile/scaled_mask.py"), ast.parse(source), "", "scaled_mask")
    reference_direct.gather(None, _signature(), facts, ref)
    assert not facts.has("python.result")  # nothing returned: the plan's own default stays
    assert facts.source("python.steps").detail.endswith("not in kernel.rs: EXTRA_FLAG")


TUNED = """
import math
from types import SimpleNamespace

import cuda.tile as ct
import torch

from tilegym.autotune import is_autotune_disabled
from tilegym.backend import register_impl

from .utils import cached_replace_hints

_cache = {}


def _configs(width):
    cap = torch.cuda.get_device_capability()
    if cap[0] < 9:
        yield SimpleNamespace(TILE=64, occupancy=2)
    else:
        yield SimpleNamespace(TILE=128, occupancy=1)
        yield SimpleNamespace(TILE=256, num_ctas=2, occupancy=1)


@ct.kernel
def _scale_kernel(X, Out, scale: float, TILE: ct.Constant[int], EVEN: ct.Constant[bool]):
    pass


@register_impl("scale_rows", backend="cutile")
def scale_rows(x, scale=1.0, **kwargs):
    rows, width = x.shape
    out = torch.empty_like(x)
    widest = max(c.TILE for c in _configs(width))
    even = width % widest == 0
    if is_autotune_disabled():
        configs = list(_configs(width))
        cfg = configs[0]
        grid = (math.ceil(rows / cfg.TILE), 1, 1)
        kernel = cached_replace_hints(_scale_kernel, occupancy=cfg.occupancy)
        ct.launch(torch.cuda.current_stream(), grid, kernel, (x, out, scale, cfg.TILE, even))
    else:
        key = (rows, width, x.dtype)
        if key not in _cache:
            _cache[key] = search(_configs(width))
        best = _cache[key]
        ct.launch(torch.cuda.current_stream(), (rows, 1, 1), _scale_kernel, (x, out, scale, best.TILE, even))
    return out
"""


def _scale_rows_signature() -> KernelSignature:
    """kernel.rs of the scale_rows references below: a TILE and a boolean EVEN generic."""
    entry = Entry(
        name="scale_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32"), Generic("EVEN", "const", "i32")),
        params=(
            Param("x", "tensor", "E", 2),
            Param("out", "tensor", "E", 2),
            Param("scale", "scalar", ty="f32"),
        ),
        outputs=("out",),
        output_evidence={},
        block=BlockUse(1, False),
    )
    return KernelSignature("scale_rows_module", (entry,))


def test_the_untuned_branch_of_an_autotune_switch_is_read_with_its_configs():
    import ast

    from bot.infer.facts import Facts
    from bot.infer.reference import ReferenceOp

    signature = _scale_rows_signature()
    reading = reference_direct.read_tree(ast.parse(TUNED), "scale_rows", signature)
    args = {k: v for k, (v, _) in reading.args.items()}
    # the launched config is the wrapper's `cfg`; what is computed from it stays per config
    assert args["tile"] == "int(cfg.TILE)" and args["num_programs"] == "cdiv(rows, cfg.TILE)"
    assert not any("cfg" in s.get("expr", "") and "for c" not in s.get("expr", "") for s in reading.steps)
    # the configs the reference reads before tuning are the wrapper's own
    assert {"let": "widest", "expr": "max((c.TILE for c in _autotune_configs()))"} in reading.steps
    assert reading.generator.name == "_configs" and reading.key == "(rows, width, x.dtype)"
    # EVEN is boolean in the reference: the FFI refuses anything but 0 or 1
    assert reading.checks == [{"when": "even != 0 and even != 1", "rc": "INVALID_ARGS"}]

    facts = Facts()
    ref = ReferenceOp(Path("ops/cutile/scale_rows.py"), ast.parse(TUNED), "", "scale_rows")
    reference_direct.gather(None, signature, facts, ref)
    groups = facts.get("python.configs")
    assert groups[0] == {"when": "_device_capability()[0] < 9", "configs": [{"TILE": 64, "occupancy": 2}]}
    assert groups[1]["when"] == "always" and len(groups[1]["configs"]) == 2
    assert facts.get("python.key") == "(rows, width, x.dtype)"


SWITCHED = """
import math

import cuda.tile as ct
import torch

from tilegym.autotune import is_autotune_enabled
from tilegym.backend import register_impl


@ct.kernel
def _scale_kernel(X, Out, scale: float, TILE: ct.Constant[int], EVEN: ct.Constant[bool]):
    pass


@register_impl("scale_rows", backend="cutile")
def scale_rows(x, scale=1.0, **kwargs):
    rows, width = x.shape
    out = torch.empty_like(x)
    if isinstance(scale, torch.Tensor):
        scale_t = scale.float()
        if scale_t.device.type != "cuda":
            scale_t = scale_t.cuda()
    else:
        scale_t = float(scale)
    enable = is_autotune_enabled()
    if enable:
        _tuned(x, out, scale_t)
    else:
        TILE = 128
        grid = (math.ceil(rows / TILE), 1, 1)
        ct.launch(torch.cuda.current_stream(), grid, _scale_kernel, (x, out, scale_t, TILE, width % TILE == 0))
    return out
"""


def test_a_switch_held_in_a_variable_and_nested_branches():
    import ast

    reading = reference_direct.read_tree(ast.parse(SWITCHED), "scale_rows", _scale_rows_signature())
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    flag = next(name for name, expr in lets if expr == "isinstance(scale, torch.Tensor)")
    # the inner `if` holds only where the outer one does; the else keeps what the branch set
    assert ("scale_t", f"scale_t.cuda() if {flag} and scale_t.device.type != 'cuda' else scale_t") in lets
    assert ("scale_t", f"float(scale) if not {flag} else scale_t") in lets
    assert not any(name == "enable" for name, _ in lets)  # the switch is read, not kept
    assert ("TILE", "128") in lets  # the untuned branch: the reference's own default
    assert reading.args["tile"][0] == "int(TILE)" and reading.args["num_programs"][0] == "cdiv(rows, TILE)"


ALONG_DIM = """
import cuda.tile as ct
import torch

from tilegym.backend import register_impl


@ct.kernel
def _row_sum_kernel(X, Out, n: int, TILE: ct.Constant[int]):
    pass


@register_impl("sum_along", backend="cutile")
def sum_along(x, dim=-1, keepdim=False, **kwargs):
    moved = x.movedim(dim, -1).contiguous()
    rows = moved.numel() // moved.shape[-1]
    flat = moved.view(rows, moved.shape[-1])
    out = torch.empty((rows,), device=x.device, dtype=x.dtype)
    ct.launch(torch.cuda.current_stream(), (rows,), _row_sum_kernel, (flat, out, flat.shape[-1], 1024))
    result = out.view(moved.shape[:-1])
    if keepdim:
        result = result.unsqueeze(dim)
    return result
"""


def test_a_reduction_along_dim_keeps_the_axis_handling_around_the_launch():
    """`dim` is the reference's own: the wrapper moves that axis last before the launch and puts
    the result back after it, as the reference does (steps before, the returned value after)."""
    import ast

    entry = Entry(
        name="row_sum_kernel",
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32")),
        params=(Param("x", "tensor", "E", 2), Param("out", "tensor", "E", 1), Param("n", "scalar", ty="i32")),
        outputs=("out",),
        output_evidence={},
        block=BlockUse(1, False),
    )
    reading = reference_direct.read_tree(ast.parse(ALONG_DIM), "sum_along", KernelSignature("m", (entry,)))
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    assert ("moved", "x.movedim(dim, -1).contiguous()") in lets
    assert reading.tensors == {"x": "flat", "out": "out"}
    assert reading.args["n"][0] == "flat.shape[-1]" and reading.args["num_programs"][0] == "rows"
    # after the launch: the reduced axis comes back where the caller asked for it
    assert (
        reading.result
        == "out.view(moved.shape[:-1]).unsqueeze(dim) if keepdim else out.view(moved.shape[:-1])"
    )


def test_a_log_call_on_the_module_logger_is_passed_over_and_no_other_call_is():
    logged = REFERENCE.replace(
        "        rows, n = x.shape\n",
        "        rows, n = x.shape\n        logger.debug(f'calling with {rows} rows')\n",
    )
    with pytest.raises(NotThisShape, match=r"cannot follow `logger.debug"):
        _read(logged)  # `logger` is not bound to a logger: a call like any other
    bound = "import logging\nlogger = logging.getLogger(__name__)\n" + logged
    assert _read(bound) is not None  # read through: the log line is no step of the wrapper
