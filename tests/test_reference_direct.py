"""The reader of directly launched cuTile references (``ct.launch``), on a reference written by us
(tests/fixtures/reference/scaled_mask.py) and small variations of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.infer import reference_direct
from bot.infer.launch_ast import NotThisShape
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param

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
    from bot.plan.inputs import python_inputs
    from bot.plan.python_side import contract_steps
    from bot.targets.types import Source

    facts = Facts()
    facts.offer("python.steps", _read().steps, Source("reference", "scaled_mask.py"))
    first = contract_steps(python_inputs(facts).steps)[0]
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
    assert reading.generator.name == "_configs()" and reading.key == "(rows, width, x.dtype)"
    # EVEN is boolean in the reference: the FFI refuses anything but 0 or 1
    assert reading.checks == [{"when": "even != 0 and even != 1", "rc": "INVALID_ARGS"}]

    facts = Facts()
    ref = ReferenceOp(Path("ops/cutile/scale_rows.py"), ast.parse(TUNED), "", "scale_rows")
    reference_direct.gather(None, signature, facts, ref)
    groups = facts.get("python.configs")
    assert groups[0] == {"when": "_device_capability()[0] < 9", "configs": [{"TILE": 64, "occupancy": 2}]}
    assert groups[1]["when"] == "always" and len(groups[1]["configs"]) == 2
    assert facts.get("python.key") == "(rows, width, x.dtype)"


CHOSEN_BY_DEVICE = """
import math
from types import SimpleNamespace

import cuda.tile as ct
import torch

from tilegym.autotune import is_autotune_disabled
from tilegym.backend import register_impl

_cache = {}


def _old_configs():
    for tile in [64, 128]:
        yield SimpleNamespace(TILE=tile, occupancy=2)
    yield SimpleNamespace(TILE=64, occupancy=3)


def _new_configs():
    for tile in [128, 256]:
        yield SimpleNamespace(TILE=tile, occupancy=1)


@ct.kernel
def _scale_kernel(X, Out, scale: float, TILE: ct.Constant[int], EVEN: ct.Constant[bool]):
    pass


@register_impl("scale_rows", backend="cutile")
def scale_rows(x, scale=1.0, **kwargs):
    rows, width = x.shape
    out = torch.empty_like(x)
    cap = torch.cuda.get_device_capability(x.device)
    configs_fn = _old_configs if cap[0] < 9 else _new_configs
    key = (rows, width, x.dtype, str(x.device))
    if is_autotune_disabled():
        cfg = next(configs_fn())
        kernel = _scale_kernel.replace_hints(occupancy=cfg.occupancy)
        ct.launch(torch.cuda.current_stream(), (math.ceil(rows / cfg.TILE), 1, 1), kernel, (x, out, scale, cfg.TILE, True))
        return out
    if key not in _cache:
        _cache[key] = search(list(configs_fn()))
    best = _cache[key]
    ct.launch(torch.cuda.current_stream(), (rows, 1, 1), _scale_kernel, (x, out, scale, best.TILE, True))
    return out
"""


def test_a_config_generator_chosen_by_the_device_is_a_config_group_per_device():
    import ast

    from bot.infer.facts import Facts
    from bot.infer.reference import ReferenceOp

    signature = _scale_rows_signature()
    reading = reference_direct.read_tree(ast.parse(CHOSEN_BY_DEVICE), "scale_rows", signature)
    args = {k: v for k, (v, _) in reading.args.items()}
    # `next(configs_fn())` is the config launched; `_kernel.replace_hints(...)` is that kernel
    assert args["tile"] == "int(cfg.TILE)" and args["num_programs"] == "cdiv(rows, cfg.TILE)"
    # the key bound before the switch keys the tuning after its early return
    assert reading.key == "(rows, width, x.dtype, str(x.device))"

    facts = Facts()
    ref = ReferenceOp(Path("ops/cutile/scale_rows.py"), ast.parse(CHOSEN_BY_DEVICE), "", "scale_rows")
    reference_direct.gather(None, signature, facts, ref)
    old, new = facts.get("python.configs")
    # the capability of any device argument is the wrapper's own query; both loops are one group
    assert old == {
        "when": "_device_capability()[0] < 9",
        "configs": [
            {"TILE": 64, "occupancy": 2},
            {"TILE": 128, "occupancy": 2},
            {"TILE": 64, "occupancy": 3},
        ],
    }
    assert new == {
        "when": "always",
        "configs": [{"TILE": 128, "occupancy": 1}, {"TILE": 256, "occupancy": 1}],
    }
    assert "_old_configs(), _new_configs()" in facts.source("python.configs").detail


def test_a_generator_chosen_by_more_than_the_device_is_not_read():
    import ast

    source = CHOSEN_BY_DEVICE.replace("if cap[0] < 9 else", "if width < 9 else")
    with pytest.raises(
        NotThisShape, match="chosen by `width < 9`, which reads x besides the device capability"
    ):
        reference_direct.read_tree(ast.parse(source), "scale_rows", _scale_rows_signature())


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


OPT_IN_TUNING = """
import math
from types import SimpleNamespace

import cuda.tile as ct
import torch
from cuda.tile.tune import exhaustive_search

from tilegym.backend import register_impl


@ct.kernel
def _scale_kernel(X, Out, scale: float, TILE: ct.Constant[int], EVEN: ct.Constant[bool]):
    pass


def _scale_configs(width):
    if torch.cuda.get_device_capability()[0] < 9:
        return [SimpleNamespace(TILE=64)]
    small = [SimpleNamespace(TILE=128)]
    large = [SimpleNamespace(TILE=256)]
    if width > 4096:
        return large + small
    return small + large


def _tuned(x, out, scale, rows, width):
    result = exhaustive_search(
        _scale_configs(width), torch.cuda.current_stream(), lambda c: (math.ceil(rows / c.TILE), 1, 1),
        _scale_kernel, lambda c: (x, out, scale, c.TILE, width % c.TILE == 0),
    )
    cfg = result.best.config
    ct.launch(torch.cuda.current_stream(), (math.ceil(rows / cfg.TILE), 1, 1), _scale_kernel,
              (x, out, scale, cfg.TILE, width % cfg.TILE == 0))
    return out


@register_impl("scale_rows", backend="cutile")
def scale_rows(x, scale=1.0, use_autotune=False, **kwargs):
    rows, width = x.shape
    out = torch.empty_like(x)
    if use_autotune:
        return _tuned(x, out, scale, rows, width)
    TILE = _scale_configs(width)[0].TILE
    ct.launch(torch.cuda.current_stream(), (math.ceil(rows / TILE), 1, 1), _scale_kernel,
              (x, out, scale, TILE, width % TILE == 0))
    return out
"""


def test_an_opt_in_tuned_path_is_refused_and_the_default_configs_helper_inlined():
    """`if use_autotune: return _tuned(...)` is another launch path: the wrapper ports the one after
    it and raises when asked for the other; `use_autotune` comes from the declared **kwargs; the
    configs helper with early returns is inlined as one conditional expression."""
    import ast

    reading = reference_direct.read_tree(
        ast.parse(OPT_IN_TUNING),
        "scale_rows",
        _scale_rows_signature(),
        declared=reference_direct._declared("x, scale, **kwargs"),
    )
    assert {"let": "use_autotune", "expr": "kwargs.get('use_autotune', False)"} in reading.steps
    check = next(s for s in reading.steps if s.get("raise") == "NotImplementedError")
    assert check["check"] == "use_autotune" and "_tuned()" in check["message"]
    tile = next(s["expr"] for s in reading.steps if s.get("let") == "TILE")
    assert tile == (
        "([SimpleNamespace(TILE=64)] if _device_capability()[0] < 9 else "
        "[SimpleNamespace(TILE=256)] + [SimpleNamespace(TILE=128)] if width > 4096 else "
        "[SimpleNamespace(TILE=128)] + [SimpleNamespace(TILE=256)])[0].TILE"
    )
    assert reading.args["tile"][0] == "int(TILE)" and reading.launch_lines == ["45"]


def test_the_launched_kernel_s_literal_hints_are_its_compile_options():
    import ast

    hinted = REFERENCE.replace("@ct.kernel\n", "@ct.kernel(occupancy=2, num_ctas=1)\n", 1)
    reading = _read(hinted)
    assert reading.args["occupancy"][0] == "2" and reading.args["num_cta_in_cga"][0] == "1"
    assert "@ct.kernel(occupancy=2, num_ctas=1) of _scaled_mask_kernel" in reading.args["occupancy"][1]
    # a per-target hint is not one value: left at the compiler default
    by_target = REFERENCE.replace(
        "@ct.kernel\n", "@ct.kernel(occupancy=ct.ByTarget(sm_80=2, default=4))\n", 1
    )
    assert "occupancy" not in _read(by_target).args
    # a kernel retuned by replace_hints runs other hints than its decorator's
    rotate = ROTATE.replace("@ct.kernel\n", "@ct.kernel(occupancy=2)\n", 1)
    assert (
        "occupancy" not in reference_direct.read_tree(ast.parse(rotate), "rotate", _rotate_signature()).args
    )


PADDED = """
import cuda.tile as ct
import torch
import torch.nn.functional as F
from tilegym.backend import register_impl


@ct.kernel
def _rotate_kernel(a, b, table, ROWS, TILE_A):
    pass


@register_impl("rotate", backend="cutile")
def rotate(a, b, table, width):
    rows, cols = a.shape
    if table.shape[0] != rows:
        if table.shape[0] > rows or rows % table.shape[0] != 0:
            raise ValueError(f"{rows} rows for a table of {table.shape[0]}")
        table = table.repeat_interleave(rows // table.shape[0], dim=0)
    if cols != width:
        a = F.pad(a, (0, width - cols))
    ct.launch(torch.cuda.current_stream(), (rows, 1, 1), _rotate_kernel, (a, b, table, rows, width))
    return a, b
"""


def test_a_raise_nested_in_a_guarded_block_is_a_check_under_both_conditions():
    import ast

    reading = reference_direct.read_tree(ast.parse(PADDED), "rotate", _rotate_signature())
    flag = {"let": "_branch_16", "expr": "table.shape[0] != rows"}
    check = {
        "check": "_branch_16 and (table.shape[0] > rows or rows % table.shape[0] != 0)",
        "raise": "ValueError",
        "message": "{rows} rows for a table of {table.shape[0]}",
    }
    repeat = {
        "let": "table",
        "expr": "table.repeat_interleave(rows // table.shape[0], dim=0) if _branch_16 else table",
    }
    steps = reading.steps
    # the check runs where the reference raises: after the branch is decided, before what follows
    assert steps.index(flag) < steps.index(check) < steps.index(repeat)


def test_an_import_alias_of_torch_is_spelled_out_for_the_wrapper():
    import ast

    reading = reference_direct.read_tree(ast.parse(PADDED), "rotate", _rotate_signature())
    assert {"let": "a", "expr": "torch.nn.functional.pad(a, (0, width - cols)) if cols != width else a"} in (
        reading.steps
    )
    # the same module through `from torch.nn import functional as F`
    other = PADDED.replace("import torch.nn.functional as F", "from torch.nn import functional as F")
    steps = reference_direct.read_tree(ast.parse(other), "rotate", _rotate_signature()).steps
    assert any("torch.nn.functional.pad(a" in s.get("expr", "") for s in steps)


def test_a_helper_with_an_unpacked_capability_and_early_returns_is_inlined():
    """tilegym 1.5.1's mla_decoding: ``TILE_H, TILE_N = _select_tile_config()``, a helper that unpacks
    the device capability and returns early per architecture, becomes one conditional value (the
    wrapper asks the capability itself)."""
    helper = (
        "def _tiles():\n"
        '    """Per architecture."""\n'
        "    major, _minor = torch.cuda.get_device_capability()\n"
        "    if major == 10:\n"
        "        return 1024, 2\n"
        "    if major == 9:\n"
        "        return 512, 4\n"
        "    return 256, 8\n\n\n"
    )
    source = (
        REFERENCE.replace("def _mix(seed):", helper + "def _mix(seed):")
        .replace("        rows, n = x.shape\n", "        rows, n = x.shape\n        tile, _ways = _tiles()\n")
        .replace("_mix(seed), TILE, training)", "_mix(seed), tile, training)")
    )
    reading = _read(source)
    assert {
        "let": "tile, _ways",
        "expr": "(1024, 2) if _device_capability()[0] == 10 "
        "else (512, 4) if _device_capability()[0] == 9 "
        "else (256, 8)",
    } in reading.steps
    assert reading.args["block_size"][0] == "int(tile)"
    # a value assigned after an early return is read only on the paths past it
    late = source.replace("    return 256, 8\n", "    major = 7\n    return 256, major\n")
    assert any(s.get("expr", "").endswith("else (256, 7)") for s in _read(late).steps)
