"""The reader of directly launched cuTile references (``ct.launch``) on a reference written by us
(tests/fixtures/reference/scaled_mask.py) and small variations of it: the launch followed through the
autograd function, arguments mapped onto kernel.rs, the grid, hints, helpers inlined, and what stops it."""

from __future__ import annotations

import pytest
from reference_direct_support import (
    REFERENCE,
    ROTATE,
    read_scaled_mask,
    rotate_signature,
)

from bot.infer.launch.syntax import NotThisShape
from bot.infer.reference import direct as reference_direct


def test_the_launch_is_followed_through_the_autograd_function():
    reading = read_scaled_mask()
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
    reading = read_scaled_mask()
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
    args = read_scaled_mask(source, axes=2).args
    assert [args[g][0] for g in ("grid_x", "grid_y", "grid_z")] == ["rows", "cdiv(n, 512)", "1"]
    with pytest.raises(NotThisShape, match="not 1-D"):
        read_scaled_mask(source, axes=1)


def test_what_the_wrapper_cannot_evaluate_stops_the_reading_with_the_name():
    source = REFERENCE.replace(", _mix(seed),", ", _unknown_helper(seed),")
    with pytest.raises(NotThisShape, match="would need _unknown_helper of the reference module"):
        read_scaled_mask(source)


def test_a_statement_it_cannot_follow_is_named_by_its_line():
    source = REFERENCE.replace(
        "        rows, n = x.shape\n",
        "        for _ in range(2):\n            pass\n        rows, n = x.shape\n",
    )
    with pytest.raises(NotThisShape, match=r"line \d+: cannot follow `for _ in range\(2\):`"):
        read_scaled_mask(source)


def test_a_kernel_rs_tensor_without_a_twin_is_refused():
    source = REFERENCE.replace("ROW_STATS", "STATS")
    with pytest.raises(NotThisShape, match="kernel.rs tensors row_stats have no twin"):
        read_scaled_mask(source)


def test_a_reference_without_a_launch_is_not_this_reader_s():
    assert (
        read_scaled_mask(
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
    facts.offer("python.steps", read_scaled_mask().steps, Source("reference", "scaled_mask.py"))
    first = contract_steps(python_inputs(facts).steps)[0]
    assert (first.kind, first.target, first.expr) == ("return", "not training", "x")
    assert _step(first) == ["if not training:", "    return x"]


def test_a_log_call_on_the_module_logger_is_passed_over_and_no_other_call_is():
    logged = REFERENCE.replace(
        "        rows, n = x.shape\n",
        "        rows, n = x.shape\n        logger.debug(f'calling with {rows} rows')\n",
    )
    with pytest.raises(NotThisShape, match=r"cannot follow `logger.debug"):
        read_scaled_mask(logged)  # `logger` is not bound to a logger: a call like any other
    bound = "import logging\nlogger = logging.getLogger(__name__)\n" + logged
    assert read_scaled_mask(bound) is not None  # read through: the log line is no step of the wrapper


def test_the_launched_kernel_s_literal_hints_are_its_compile_options():
    import ast

    hinted = REFERENCE.replace("@ct.kernel\n", "@ct.kernel(occupancy=2, num_ctas=1)\n", 1)
    reading = read_scaled_mask(hinted)
    assert reading.args["occupancy"][0] == "2" and reading.args["num_cta_in_cga"][0] == "1"
    assert "@ct.kernel(occupancy=2, num_ctas=1) of _scaled_mask_kernel" in reading.args["occupancy"][1]
    # a per-target hint is not one value: left at the compiler default
    by_target = REFERENCE.replace(
        "@ct.kernel\n", "@ct.kernel(occupancy=ct.ByTarget(sm_80=2, default=4))\n", 1
    )
    assert "occupancy" not in read_scaled_mask(by_target).args
    # a kernel retuned by replace_hints runs other hints than its decorator's
    rotate = ROTATE.replace("@ct.kernel\n", "@ct.kernel(occupancy=2)\n", 1)
    assert "occupancy" not in reference_direct.read_tree(ast.parse(rotate), "rotate", rotate_signature()).args


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
    reading = read_scaled_mask(source)
    assert {
        "let": "tile, _ways",
        "expr": "(1024, 2) if _device_capability()[0] == 10 "
        "else (512, 4) if _device_capability()[0] == 9 "
        "else (256, 8)",
    } in reading.steps
    assert reading.args["block_size"][0] == "int(tile)"
    # a value assigned after an early return is read only on the paths past it
    late = source.replace("    return 256, 8\n", "    major = 7\n    return 256, major\n")
    assert any(s.get("expr", "").endswith("else (256, 7)") for s in read_scaled_mask(late).steps)
