"""A reference that chooses among launch paths (``if a: _launch_a(..) elif b: .. else: _launch(..)``)
where kernel.rs ports the kernels of one: the wrapper follows that path, refuses the others with
NotImplementedError in the chain's order, and a test reaching one is the kernel's gap. Also the
``warnings.warn`` guard before it (softmax's ``use_tma`` on an older GPU). References written here."""

from __future__ import annotations

import ast

import pytest

from bot.classify.classify import classify
from bot.classify.types import VerdictKind
from bot.infer.launch.syntax import NotThisShape
from bot.infer.reference import direct as reference_direct
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param
from bot.testing.types import TestCase, TestResult

PATHS = """
import cuda.tile as ct
import torch
from tilegym.backend import register_impl


@ct.kernel
def _rows_kernel(output, input, N_ROWS, TILE):
    pass


@ct.kernel
def _rows_kernel_wide(output, input, N_ROWS, TILE):
    pass


@ct.kernel
def _rows_kernel_tma(output, input, TILE):
    pass


def _launch_rows(input, output, TILE):
    n_rows, n_cols = input.shape
    ct.launch(torch.cuda.current_stream(), (n_rows, 1, 1), _rows_kernel, (output, input, n_rows, TILE))


def _launch_wide(input, output, TILE):
    n_rows, n_cols = input.shape
    ct.launch(torch.cuda.current_stream(), (n_rows, 1, 1), _rows_kernel_wide, (output, input, n_rows, TILE))


def _launch_tma(input, output):
    ct.launch(torch.cuda.current_stream(), (1, 1, 1), _rows_kernel_tma, (output, input, 64))


@register_impl("rows", backend="cutile")
def rows(x, use_tma=False, **kwargs):
    use_wide = kwargs.get("use_wide", False)
    if use_tma and torch.cuda.get_device_capability(x.device)[0] < 9:
        import warnings

        warnings.warn("rows: use_tma has no effect on this GPU", UserWarning, stacklevel=2)
        use_tma = False
    y = torch.empty_like(x)
    TILE = 1024
    if use_wide:
        _launch_wide(x, y, TILE)
    elif use_tma:
        _launch_tma(x, y)
    else:
        _launch_rows(x, y, TILE)
    return y
"""


ROWS_PARAMS = (
    Param("output", "tensor", "E", 2),
    Param("input", "tensor", "E", 2),
    Param("n_rows", "scalar", ty="i32"),
)


def _signature(
    entry_name: str, params: tuple[Param, ...] = ROWS_PARAMS, outputs=("output",)
) -> KernelSignature:
    """kernel.rs of one entry: an element type, a TILE generic and ``params``."""
    entry = Entry(
        name=entry_name,
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32")),
        params=params,
        outputs=outputs,
        output_evidence={},
        block=BlockUse(1, False),
    )
    return KernelSignature(f"{entry_name}_module", (entry,))


def _checks(reading) -> list[tuple[str, str]]:
    return [(s["check"], s["message"]) for s in reading.steps if s.get("raise") == "NotImplementedError"]


def test_the_ported_else_path_is_followed_and_each_other_path_refused_in_order():
    reading = reference_direct.read_tree(ast.parse(PATHS), "rows", _signature("rows_kernel"))
    assert _checks(reading) == [
        (
            "use_wide",
            "cutile-rs rows: the reference's launch through _launch_wide() (when use_wide) is not ported",
        ),
        (
            "use_tma",
            "cutile-rs rows: the reference's launch through _launch_tma() (when use_tma) is not ported",
        ),
    ]
    assert reading.tensors == {"output": "output", "input": "input"}
    assert reading.args["n_rows"][0] == "n_rows"
    # the warning's guard still decides use_tma; the warning itself is dropped
    lets = {s["let"]: s["expr"] for s in reading.steps if "let" in s}
    assert (
        lets["use_tma"]
        == "False if use_tma and torch.cuda.get_device_capability(x.device)[0] < 9 else use_tma"
    )
    assert not any("warn" in str(s) for s in reading.steps)


def test_a_ported_path_in_the_middle_refuses_the_earlier_ones_and_each_one_after_it():
    reading = reference_direct.read_tree(ast.parse(PATHS), "rows", _signature("rows_kernel_wide"))
    assert _checks(reading) == [
        (
            "not use_wide and use_tma",
            "cutile-rs rows: the reference's launch through _launch_tma() "
            "(when not use_wide and use_tma) is not ported",
        ),
        (
            "not use_wide",
            "cutile-rs rows: the reference's launch through _launch_rows() (when not use_wide) is not ported",
        ),
    ]


def test_no_path_whose_kernels_kernel_rs_has_is_not_a_choice_of_paths():
    with pytest.raises(NotThisShape, match="cannot follow `if use_wide:`"):
        reference_direct.read_tree(ast.parse(PATHS), "rows", _signature("other_kernel"))


def test_a_chain_without_an_else_is_not_a_choice_of_paths():
    source = PATHS.replace("    else:\n        _launch_rows(x, y, TILE)\n", "")
    with pytest.raises(NotThisShape, match="cannot follow `if use_wide:`"):
        reference_direct.read_tree(ast.parse(source), "rows", _signature("rows_kernel"))


def test_a_test_reaching_a_path_kernel_rs_does_not_port_is_the_kernels_gap():
    reading = reference_direct.read_tree(ast.parse(PATHS), "rows", _signature("rows_kernel"))
    message = "NotImplementedError: " + _checks(reading)[1][1]
    nodeid = "tests/ops/test_rows.py::test_op[use_tma-cutile_rs]"
    case = TestCase(nodeid, "failed", message)
    result = TestResult(
        ran=True, command="pytest", exit_code=1, log_path="", passed=3, failed=1, cases=[case]
    )
    verdict = classify(result, [])
    assert (verdict.kind, verdict.klass) == (VerdictKind.FAIL, "kernel")
    assert "_launch_tma() when use_tma" in verdict.reason and nodeid in verdict.reason
    assert "add to kernel.rs the kernels the reference launches through _launch_tma()" in verdict.fix


# The ported path tunes a launch hint cutile-rs has no twin of (num_worker_warps), as TileGym
# 1.5.1's softmax does: the untuned config launches the kernel itself, and the steps that only
# chose the hint are read by nothing the wrapper launches or returns.
HINT_TUNED = PATHS.replace(
    """def _launch_rows(input, output, TILE):
    n_rows, n_cols = input.shape
    ct.launch(torch.cuda.current_stream(), (n_rows, 1, 1), _rows_kernel, (output, input, n_rows, TILE))
""",
    """_WARPS = (None, 4, 8)
_cache = {}


def _cfg_hints(cfg):
    hints = {}
    if getattr(cfg, "num_worker_warps", None) is not None:
        hints["num_worker_warps"] = cfg.num_worker_warps
    return hints


def _launch_rows(input, output, TILE):
    n_rows, n_cols = input.shape
    grid = (n_rows, 1, 1)
    args = (output, input, n_rows, TILE)
    candidates = [SimpleNamespace(num_worker_warps=w) for w in _WARPS]
    if is_autotune_disabled():
        cfg = candidates[0]
    else:
        cfg = _cache.get(n_rows)
        if cfg is None:
            result = exhaustive_search(candidates, torch.cuda.current_stream(), lambda _: grid, _rows_kernel,
                                       lambda _: args, _cfg_hints)
            cfg = _cache[n_rows] = result.best.config
    hints = _cfg_hints(cfg)
    kernel = cached_replace_hints(_rows_kernel, **hints) if hints else _rows_kernel
    ct.launch(torch.cuda.current_stream(), grid, kernel, args)
""",
)


def test_a_path_that_tunes_only_a_hint_cutile_rs_lacks_launches_untuned_without_the_tuning_steps():
    assert "cached_replace_hints" in HINT_TUNED  # the replacement above took
    reading = reference_direct.read_tree(ast.parse(HINT_TUNED), "rows", _signature("rows_kernel"))
    lets = [s["let"] for s in reading.steps if "let" in s]
    assert not {"candidates", "cfg", "hints", "grid", "args"} & set(lets), lets
    assert reading.tensors == {"output": "output", "input": "input"}
    assert reading.args["n_rows"][0] == "n_rows"
    assert [c for c, _ in _checks(reading)] == ["use_wide", "use_tma"]


def test_a_step_the_launch_reads_that_needs_a_module_function_still_stops_the_reading():
    source = HINT_TUNED.replace(
        "args = (output, input, n_rows, TILE)", "args = (output, input, _cfg_hints(n_rows), TILE)"
    )
    with pytest.raises(NotThisShape, match="would need _cfg_hints of the reference module"):
        reference_direct.read_tree(ast.parse(source), "rows", _signature("rows_kernel"))


def test_the_dry_run_sets_a_refused_path_aside_and_still_names_a_wrapper_that_launched_nothing():
    from bot.dryrun import compare as dry_compare
    from bot.dryrun.result import DryRun

    reading = reference_direct.read_tree(ast.parse(PATHS), "rows", _signature("rows_kernel"))
    refused = "E   NotImplementedError: " + _checks(reading)[1][1]
    run = DryRun("compared")
    assert dry_compare._port_side(run, None, None, "test_op[use_tma]", [], refused, 1) is None
    assert run.rows == [] and run.cases == []
    assert run.skipped == ["test_op[use_tma]: " + " ".join(refused.split())]
    # any other error before the C call is the wrapper's: a difference, with the error as its value
    other = "E   TypeError: rows() got an unexpected keyword argument 'use_tma'"
    assert dry_compare._port_side(run, None, None, "test_op[kw]", [], other, 1) is None
    assert run.cases == ["test_op[kw]"] and run.differences[0].cutile_rs == f"no launch: {other}"


# rms_norm's shape: a mode chosen by a nested default, then one branch per mode, each launching
# its kernel inline, and an else that raises.
MODES = """
import cuda.tile as ct
import torch
from tilegym.backend import register_impl


@ct.kernel
def _norm_kernel_persistent(x, out, TILE):
    pass


@ct.kernel
def _norm_kernel_gather(x, out, N, TILE):
    pass


@register_impl("norm", backend="cutile")
def norm(x, mode=None):
    y = torch.empty_like(x)
    M, N = x.shape
    if mode is None:
        if M > 64:
            mode = "persistent"
        else:
            mode = "gather"
    if mode == "persistent":
        TILE = 16
        ct.launch(torch.cuda.current_stream(), (64,), _norm_kernel_persistent, (x, y, TILE))
    elif mode == "gather":
        if N > 4096:
            raise NotImplementedError("too wide")
        TILE = 1024
        ct.launch(torch.cuda.current_stream(), (M,), _norm_kernel_gather, (x, y, N, TILE))
    else:
        raise ValueError(f"Unknown mode {mode}")
    return y
"""


NORM_PARAMS = (Param("x", "tensor", "E", 2), Param("out", "tensor", "E", 2), Param("n", "scalar", ty="i32"))


def test_a_mode_chain_of_inline_launches_follows_the_ported_mode_after_its_nested_default():
    reading = reference_direct.read_tree(
        ast.parse(MODES), "norm", _signature("norm_kernel_gather", NORM_PARAMS, ("out",))
    )
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    # the default is decided once per test, before either side assigns the mode it reads
    assert ("_branch_21", "mode is None") in lets and ("_branch_22", "_branch_21 and M > 64") in lets
    assert ("mode", "'persistent' if _branch_22 else mode") in lets
    assert ("mode", "'gather' if _branch_21 and (not _branch_22) else mode") in lets
    checks = [(s["check"], s["raise"]) for s in reading.steps if "check" in s]
    assert checks == [
        ("mode == 'persistent'", "NotImplementedError"),  # the path kernel.rs does not port
        ("not mode == 'gather'", "ValueError"),  # the reference's own else, after the chosen branch
        ("N > 4096", "NotImplementedError"),  # the chosen branch's own check
    ]
    messages = [s["message"] for s in reading.steps if "check" in s]
    assert messages[0] == (
        "cutile-rs norm: the reference's launch through _norm_kernel_persistent (when mode == 'persistent') is not ported"
    )
    assert reading.tensors == {"x": "x", "out": "y"} and reading.args["n"][0] == "N"
    assert reading.args["num_programs"][0] == "M"
