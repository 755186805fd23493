"""The reader of directly launched cuTile references on autotuned wrappers written here: the untuned
branch of an autotune switch read with its configs, a config generator chosen by the device (a config
group per device) or by more (not read), a switch held in a variable, an opt-in tuned path refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_direct_support import (
    scale_rows_signature,
)

from bot.infer.launch.syntax import NotThisShape
from bot.infer.reference import direct as reference_direct

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


def test_the_untuned_branch_of_an_autotune_switch_is_read_with_its_configs():
    import ast

    from bot.infer.facts import Facts
    from bot.infer.reference.op import ReferenceOp

    signature = scale_rows_signature()
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
    from bot.infer.reference.op import ReferenceOp

    signature = scale_rows_signature()
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
        reference_direct.read_tree(ast.parse(source), "scale_rows", scale_rows_signature())


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

    reading = reference_direct.read_tree(ast.parse(SWITCHED), "scale_rows", scale_rows_signature())
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    flag = next(name for name, expr in lets if expr == "isinstance(scale, torch.Tensor)")
    # the inner `if` holds only where the outer one does; the else keeps what the branch set
    assert ("scale_t", f"scale_t.cuda() if {flag} and scale_t.device.type != 'cuda' else scale_t") in lets
    assert ("scale_t", f"float(scale) if not {flag} else scale_t") in lets
    assert not any(name == "enable" for name, _ in lets)  # the switch is read, not kept
    assert ("TILE", "128") in lets  # the untuned branch: the reference's own default
    assert reading.args["tile"][0] == "int(TILE)" and reading.args["num_programs"][0] == "cdiv(rows, TILE)"


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
        scale_rows_signature(),
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
