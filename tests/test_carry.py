"""The carried-over wrapper (issue 32): the reference's host code is the wrapper's program.

The semantic model answers what a name is bound to in its scope (``infer.model.semantic``); the
carry plan pairs each launched ``@ct.kernel`` with its kernel.rs entry and values each C argument
over the kernel's parameters (``plan.carry``, ``plan.carry_args``); the emitter carries the code
over with cuTile's names rewritten (``emit.carried_py``). References and kernels written here.
"""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from bot.emit import carried_py
from bot.infer.model.semantic import ModuleModel
from bot.plan import carry, flag_checks
from bot.plan.types import (
    CScalar,
    CTensor,
    FfiPlan,
    LaunchPlan,
    PyPlan,
    TestWiring,
    Variant,
)
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param
from bot.targets.types import Source

MODULE = "tilegym.ops.cutile.scale"
REL = "src/tilegym/ops/cutile/scale.py"
SRC = Source("test", "")

REFERENCE = """
import cuda.tile as tile
import torch
from cuda.tile import launch as go
from tilegym.backend import register_impl

from .utils import next_power_of_2

_CACHE = {}


@tile.kernel(occupancy=2)
def _scale_kernel(X, Y, n, TILE: tile.Constant[int]):
    pass


@tile.kernel
def _unused_kernel(X):
    pass


def _grid_of(n, tile_size):
    return [tile.cdiv(n, tile_size)]


def _run(x, y):
    n = x.numel()
    TILE = next_power_of_2(min(n, 1024))
    kernel = _CACHE.get(TILE) or _scale_kernel
    args = (x, y, n, TILE)
    go(torch.cuda.current_stream(), tuple(_grid_of(n, TILE)), kernel, args)


@register_impl("scale", backend="cutile")
def scale(x):
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    _run(x, y)
    return y
"""


def _entry(*extra: Param) -> Entry:
    return Entry(
        name="scale_kernel",
        unsafe=False,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), Generic("TILE", "const", "i32")),
        params=(
            Param("x", "tensor", "E", 1),
            Param("y", "tensor", "E", 1),
            Param("n", "scalar", ty="i32"),
            *extra,
        ),
        outputs=("y",),
        output_evidence={},
        block=BlockUse(1, False, "bid(0)"),
    )


def _ffi(entry: Entry) -> FfiPlan:
    return FfiPlan(
        symbol="cutile_scale",
        module="scale_module",
        style="macros",
        tensors=[
            CTensor("y", "y_d", "y", "tensor", "E", "output", 1, SRC),
            CTensor("x", "x_d", "x", "tensor", "E", "input", 1, SRC),
        ],
        dtype_from="x",
        dtype_generic="E",
        dtypes=["f32", "f16"],
        scalars=[
            CScalar("n", "i32", "runtime_scalar", "n", SRC),
            CScalar("tile", "i32", "generic", "TILE", SRC),
            CScalar("num_programs", "i32", "grid", "", SRC),
            CScalar("num_cta_in_cga", "i32", "compile_option", "", SRC),
            CScalar("occupancy", "i32", "compile_option", "", SRC),
        ],
        derived=[],
        variants=[Variant("always", entry.name, ["dtype", "tile"], [], ["num_programs", "1", "1"], "", SRC)],
    )


def _signature(entry: Entry) -> KernelSignature:
    return KernelSignature(module="scale_module", entries=(entry,))


def _plan() -> carry.Carried:
    entry = _entry()
    return carry.plan(REFERENCE, REL, MODULE, "scale", _signature(entry), _ffi(entry))


def _launch_plan(ffi: FfiPlan, carried, dtypes=("float32",)) -> LaunchPlan:
    """A launch plan around a carry plan: the wrapper half's fields only as the renderer reads them."""
    py = PyPlan("scale", "direct", "x", "", list(dtypes), [], {}, "direct", [], "", {}, "", {}, {}, "", "")
    return LaunchPlan("scale", ffi, py, TestWiring("", "", None), carry=carried)


# ------------------------------------------------------------------------------ the semantic model


def test_the_model_resolves_imports_by_what_they_bind_not_how_they_are_spelled():
    model = ModuleModel.build(REFERENCE, MODULE)
    run = model.binding("_run").stmt
    uses = {text for text, _line, _node in carry.qualified_uses(model, run)}
    assert uses == {"cuda.tile.launch", "tilegym.ops.cutile.utils.next_power_of_2"}  # `go(...)`
    grid = model.binding("_grid_of").stmt
    assert {t for t, _l, _n in carry.qualified_uses(model, grid)} == {"cuda.tile.cdiv"}
    assert model.binding("next_power_of_2").qualified == "tilegym.ops.cutile.utils.next_power_of_2"
    assert model.binding("_scale_kernel").kind == "kernel"  # `@tile.kernel(occupancy=2)`


def test_a_local_that_shadows_a_module_name_is_not_the_module_name():
    source = """
import cuda.tile as ct

def helper(ct):
    return ct.cdiv(1, 2)

def other():
    return ct.cdiv(1, 2)
"""
    model = ModuleModel.build(source, "m")
    assert carry.qualified_uses(model, model.binding("helper").stmt) == []
    assert [t for t, _l, _n in carry.qualified_uses(model, model.binding("other").stmt)] == ["cuda.tile.cdiv"]


def test_names_read_by_nested_functions_lambdas_and_comprehensions_are_reached():
    source = """
import math
A = 1
B = 2
C = 3
D = 4

def f(xs):
    def inner():
        return A
    g = lambda: B
    return [C + x for x in xs if D], inner(), g()

def unused():
    return math.pi
"""
    model = ModuleModel.build(source, "m")
    assert carry.reached(model, "f") == ["A", "B", "C", "D", "f"]


# ------------------------------------------------------------------------------ the carry plan


def test_the_plan_carries_what_the_registered_function_reaches_and_pairs_its_kernel():
    found = _plan()
    assert found.missing == []
    plan = found.plan
    assert plan is not None
    assert plan.function == "scale" and plan.register_name == "scale"
    assert plan.carried == [
        "tile",
        "torch",
        "go",
        "register_impl",
        "next_power_of_2",
        "_CACHE",
        "_scale_kernel",
        "_grid_of",
        "_run",
    ]
    (kernel,) = plan.kernels  # _unused_kernel is not reached
    assert kernel.entry == "scale_kernel"
    assert kernel.hints == {"occupancy": 2}
    args = {a.c_param: a.expr for a in kernel.args}
    assert args == {
        "y": "Y",
        "x": "X",
        "n": "int(n)",
        "tile": "int(TILE)",
        "num_programs": "grid[0]",
        "num_cta_in_cga": "hints.get('num_ctas')",
        "occupancy": "hints.get('occupancy')",
    }
    sources = {a.c_param: a.source.detail for a in kernel.args}
    assert "parameter TILE -> generic `TILE`" in sources["tile"]
    assert kernel.dtype_tensor == "X"


def test_a_cutile_host_call_with_no_counterpart_is_refused_by_name_and_line():
    source = REFERENCE.replace("n = x.numel()", "n = tile.num_tiles(x)")
    entry = _entry()
    found = carry.plan(source, REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert found.plan is None
    assert "`cuda.tile.num_tiles` is cuTile host API with no cutile-rs counterpart" in found.refused
    assert "line 27" in found.refused


def test_a_helper_of_another_cutile_backend_module_is_refused_not_imported():
    source = REFERENCE.replace(
        "from .utils import next_power_of_2",
        "from .utils import next_power_of_2\nfrom .softmax import softmax",
    ).replace("    _run(x, y)\n", "    _run(softmax(x), y)\n")
    entry = _entry()
    found = carry.plan(source, REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert found.plan is None
    assert "`tilegym.ops.cutile.softmax.softmax` belongs to the cuTile backend" in found.refused


def test_a_kernel_rs_scalar_nothing_pairs_is_asked_for_with_the_kernel_named():
    entry = _entry(Param("scale", "scalar", ty="f32"))
    ffi = _ffi(entry)
    ffi.scalars.insert(1, CScalar("scale", "f32", "runtime_scalar", "scale", SRC))
    found = carry.plan(REFERENCE, REL, MODULE, "scale", _signature(entry), ffi)
    (missing,) = found.missing
    assert missing.key == "python.args.scale"
    assert "when the reference launches _scale_kernel" in missing.question


# ------------------------------------------------------------------------------ the carried wrapper


def _rendered() -> str:
    found = _plan()
    entry = _entry()
    plan = _launch_plan(_ffi(entry), found.plan, ("float32", "float16"))
    return carried_py.render(plan, lambda _path: REFERENCE)


def test_the_wrapper_is_the_reference_code_with_each_cutile_name_rewritten():
    text = _rendered()
    tree = ast.parse(text)
    imported = {
        (getattr(n, "module", "") or "") + ":" + a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert not any(i.startswith("cuda") or ":cuda" in i or "ops.cutile." in i for i in imported), imported
    assert "tilegym.backend.cutile_rs.utils:next_power_of_2" in imported
    # the reference's own spellings are kept: the args tuple, the grid helper, the kernel cache
    assert "args = (x, y, n, TILE)" in text
    assert "_rs_launch(torch.cuda.current_stream(), tuple(_grid_of(n, TILE)), kernel, args)" in text
    assert "return [_rs_cdiv(n, tile_size)]" in text
    assert "_scale_kernel = _RsKernel(\"_scale_kernel\", _rs_launch_scale_kernel, {'occupancy': 2})" in text
    (registered,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "scale"]
    assert [ast.unparse(d) for d in registered.decorator_list] == [
        "register_impl('scale', backend='cutile-rs')"
    ]
    assert "_unused_kernel" not in text
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {
        "scale",
        "_run",
        "_grid_of",
        "_rs_launch",
        "_rs_ffi_call",
        "_rs_launch_scale_kernel",
        "_rs_cdiv",
    } <= functions


def test_the_carried_wrapper_is_clean_for_pyflakes(tmp_path):
    from bot.emit.soundness import lint_python

    assert lint_python(_rendered(), "scale.py") == []


def test_an_unported_kernel_launch_raises_in_the_words_the_classifier_reads():
    from bot.errors import UNPORTED_PATH

    text = _rendered()
    message = "cutile-rs scale: the reference's launch through _other (when it is reached) is not ported"
    assert "the reference's launch through {kernel.name} (when it is reached) is not ported" in text
    assert UNPORTED_PATH.search(message).group("through") == "_other"


@pytest.mark.parametrize("clash", ["_grid", "_args"])
def test_a_kernel_parameter_named_like_the_launchers_own_is_agent_ds_error(clash):
    source = REFERENCE.replace("def _scale_kernel(X, Y, n,", f"def _scale_kernel(X, Y, {clash},").replace(
        "args = (x, y, n, TILE)", "args = (x, y, n, TILE)"
    )
    entry = _entry()
    found = carry.plan(source, REL, MODULE, "scale", _signature(entry), _ffi(entry))
    plan = _launch_plan(_ffi(entry), found.plan)
    with pytest.raises(carried_py.CarryError, match="clash with the launcher's own"):
        carried_py.render(plan, lambda _path: source)


def test_a_carried_plan_as_json_is_what_the_plan_schema_describes():
    import json
    from pathlib import Path

    from jsonschema import Draft202012Validator

    schema = json.loads((Path(__file__).parent.parent / "docs" / "plan-json.schema.json").read_text())
    entry = _entry()
    plan = _launch_plan(_ffi(entry), _plan().plan)
    document = [{"op": "scale", "status": "planned", "stop": None, "plan": plan.to_dict()}]
    assert list(Draft202012Validator(schema).iter_errors(document)) == []
    document[0]["plan"]["carry"]["kernels"][0]["hints"] = {"occupancy": "two"}
    assert not Draft202012Validator(schema).is_valid(document)


def test_an_annotation_naming_a_cutile_type_is_dropped_not_refused():
    source = REFERENCE.replace("def _run(x, y):", "def _run(x, y, dtype: tile.DType = None) -> tile.DType:")
    entry = _entry()
    found = carry.plan(source, REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert found.missing == [] and found.plan is not None
    plan = _launch_plan(_ffi(entry), found.plan)
    text = carried_py.render(plan, lambda _path: source)
    assert "def _run(x, y, dtype=None):" in text
    assert "tile." not in text


HELPER_MODULE = """
import cuda.tile as ct
import torch
from tilegym.backend import register_impl

_CACHE = {"helper": True}


@ct.kernel
def _finish_kernel(Y, n):
    pass


@register_impl("finish", backend="cutile")
def finish(y):
    ct.launch(torch.cuda.current_stream(), (1,), _finish_kernel, (y, y.numel()))
    return _CACHE
"""


def test_a_helper_imported_from_another_cutile_module_is_carried_with_its_kernels():
    source = REFERENCE.replace(
        "from .utils import next_power_of_2", "from .utils import next_power_of_2\nfrom .finish import finish"
    ).replace("    _run(x, y)\n", "    _run(x, y)\n    finish(y)\n")
    finish_entry = Entry(
        name="finish_kernel",
        unsafe=False,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"),),
        params=(Param("y", "tensor", "E", 1), Param("n", "scalar", ty="i32")),
        outputs=("y",),
        output_evidence={},
        block=BlockUse(1, False, "bid(0)"),
    )
    entry = _entry()
    ffi = _ffi(entry)
    ffi.variants.append(
        Variant("always", finish_entry.name, ["dtype"], [], ["num_programs", "1", "1"], "", SRC)
    )
    signature = KernelSignature(module="scale_module", entries=(entry, finish_entry))
    modules = {"tilegym.ops.cutile.finish": (HELPER_MODULE, "src/tilegym/ops/cutile/finish.py")}
    found = carry.plan(source, REL, MODULE, "scale", signature, ffi, modules.get)
    assert found.refused == "" and found.missing == [], (found.refused, found.missing)
    plan = found.plan
    (helper,) = plan.helpers
    assert helper.module == "tilegym.ops.cutile.finish"
    assert helper.carried == ["ct", "torch", "register_impl", "_CACHE", "_finish_kernel", "finish"]
    assert helper.renames == {"_CACHE": "_finish_CACHE"}  # the reference binds its own _CACHE
    kernels = {k.name: k for k in plan.kernels}
    assert kernels["_finish_kernel"].entry == "finish_kernel"
    assert kernels["_finish_kernel"].module == "tilegym.ops.cutile.finish"
    texts = {REL: source, "src/tilegym/ops/cutile/finish.py": HELPER_MODULE}
    text = carried_py.render(_launch_plan(ffi, plan), texts.__getitem__)
    tree = ast.parse(text)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert [ast.unparse(d) for d in functions["finish"].decorator_list] == []  # not registered again
    assert "return _finish_CACHE" in ast.unparse(functions["finish"])
    assert "_finish_CACHE = {'helper': True}" in text and "_CACHE = {}" in text
    assert "from .finish" not in text and "ops.cutile" not in text
    from bot.emit.soundness import lint_python

    assert lint_python(text, "scale.py") == []


def test_an_import_inside_a_carried_function_is_twinned_in_its_place_or_refused():
    source = REFERENCE.replace(
        "def _run(x, y):\n    n = x.numel()",
        "def _run(x, y):\n    from .utils import next_power_of_2 as npow\n    from cuda.tile import cdiv\n"
        "    n = x.numel() + cdiv(0, 1)\n    npow(n)",
    )
    entry = _entry()
    found = carry.plan(source, REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert found.refused == "", found.refused
    plan = _launch_plan(_ffi(entry), found.plan)
    text = carried_py.render(plan, lambda _path: source)
    assert "from tilegym.backend.cutile_rs.utils import next_power_of_2 as npow" in text
    assert "cdiv = _rs_cdiv" in text
    assert "from ." not in text and "from cuda" not in text and "import cuda" not in text
    from bot.emit.soundness import lint_python

    assert lint_python(text, "scale.py") == []
    # a helper of another cuTile-backend module imported inside a function is not imported: refused
    other = source.replace("from cuda.tile import cdiv", "from .layout import cdiv")
    refused = carry.plan(other, REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert "`tilegym.ops.cutile.layout.cdiv` belongs to the cuTile backend" in refused.refused


def test_a_carried_search_sweeps_what_the_plan_s_sweep_rule_keeps():
    """The configs come from the reference's own code at run time; the wrapper keeps the ones the
    plan-time rule would (its first, every field value, every pair of values), at most the limit."""
    from types import SimpleNamespace

    from bot.emit import carried_runtime
    from bot.plan import sweep

    namespace: dict = {}
    exec(carried_runtime.PIECES["_rs_exhaustive_search"], namespace)  # defines _rs_sweep beside it
    configs = [
        SimpleNamespace(TILE_M=m, TILE_N=n, num_ctas=1, occupancy=o)
        for m in (256, 128, 64)
        for n in (128, 64)
        for o in (1, 2, 4)
    ]
    kept, _ = sweep._kept([vars(c) for c in configs])
    assert namespace["_rs_sweep"](configs) == [configs[i] for i in kept]
    assert len(kept) == sweep.SWEEP_LIMIT < len(configs)
    assert namespace["_rs_sweep"](configs[:3]) == configs[:3]
    assert namespace["_rs_sweep"]([configs[0], configs[0]]) == [configs[0]]  # a repeat compiles nothing new


def test_a_boolean_kernel_parameter_is_checked_by_the_launcher_without_the_older_readers():
    """`FLIP: tile.Constant[bool]` feeds kernel.rs's i32 generic FLIP: the wrapper passes
    int(bool(FLIP)), and the launcher refuses anything but 0 or 1, the reference's own declaration
    the source of both (no fact of the autotuned or direct reader needed)."""
    source = REFERENCE.replace(
        "def _scale_kernel(X, Y, n, TILE: tile.Constant[int]):",
        "def _scale_kernel(X, Y, n, TILE: tile.Constant[int], FLIP: tile.Constant[bool]):",
    ).replace("args = (x, y, n, TILE)", "args = (x, y, n, TILE, x.numel() > 4)")
    entry = _entry()
    entry = replace(entry, generics=(*entry.generics, Generic("FLIP", "const", "i32")))
    ffi = _ffi(entry)
    ffi.scalars.insert(2, CScalar("flip", "i32", "generic", "FLIP", SRC))
    ffi.variants[0].generics.append("flip")
    found = carry.plan(source, REL, MODULE, "scale", _signature(entry), ffi)
    assert found.plan is not None and found.flags == ["flip"]
    (kernel,) = [k for k in found.plan.kernels if k.entry]
    assert next(a.expr for a in kernel.args if a.c_param == "flip") == "int(bool(FLIP))"
    check = {"when": "flip != 0 and flip != 1", "rc": "INVALID_ARGS"}
    rank = {"when": "x_d.ndim != 1", "rc": "INVALID_ARGS"}
    assert flag_checks(found.flags, [rank]) == [check, rank]  # first, before the descriptors' checks
    assert flag_checks(found.flags, [rank, check]) == [rank, check]  # said already: kept where it is
    assert flag_checks([], [rank]) == [rank]


TUNED = """
import cuda.tile as ct
import torch
from cuda.tile.tune import exhaustive_search
from tilegym.backend import register_impl

_TUNED = {}


@ct.kernel
def _scale_kernel(X, Y, TILE: ct.Constant[int]):
    pass


@register_impl("scale", backend="cutile")
def scale(x):
    y = torch.empty_like(x)
    n = x.numel()
    stream = torch.cuda.current_stream()
    if n not in _TUNED:
        result = exhaustive_search(
            [1, 2], stream, lambda c: (ct.cdiv(n, 64),), _scale_kernel, lambda c: (x, y, 64)
        )
        _TUNED[n] = _scale_kernel.replace_hints(occupancy=result.best.config)
    ct.launch(stream, (ct.cdiv(n, 64),), _TUNED[n], (x, y, 64))
    return y
"""


def test_a_scalar_kernel_rs_adds_is_the_local_of_every_launch_that_may_run_the_kernel():
    """kernel.rs takes `n`, which the cuTile kernel does not: the search and the launch of the tuned
    kernel (a value from a cache: it may be this kernel) both hold `n`, so each passes its own."""
    entry = _entry()
    found = carry.plan(TUNED, REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert found.missing == [] and found.plan is not None
    (kernel,) = found.plan.kernels
    assert {a.c_param: a.expr for a in kernel.args}["n"] == "int(site['n'])"
    plan = _launch_plan(_ffi(entry), found.plan, ("float32", "float16"))
    text = carried_py.render(plan, lambda _path: TUNED)
    assert "_rs_launch(stream, (_rs_cdiv(n, 64),), _TUNED[n], (x, y, 64), n=n)" in text
    assert "lambda c: (x, y, 64), _rs_site={'n': n})" in text
    # the search passes them to each launch it makes (a search of another kernel passes none)
    assert "tuned, args_fn(cfg), **(_rs_site or {}))" in text


def test_a_launch_without_the_local_leaves_the_scalar_asked_unless_it_is_over_the_launched_tensor():
    def launched_through(handed: str) -> str:
        return TUNED.replace(
            "    ct.launch(stream, (ct.cdiv(n, 64),), _TUNED[n], (x, y, 64))\n    return y",
            f"    _launch_tuned(stream, {handed}, y)\n    return y\n\n\ndef _launch_tuned(stream, x, y):\n"
            "    ct.launch(stream, (1,), _TUNED[x.numel()], (x, y, 64))",
        )

    entry = _entry()
    # the caller hands a view: its `n = x.numel()` is not known to be the launched tensor's
    found = carry.plan(launched_through("x.view(-1)"), REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert [m.key for m in found.missing] == ["python.args.n"]
    # it hands `x` itself: `n` is the launched tensor's numel at every launch (bot/plan/carry_shapes.py)
    found = carry.plan(launched_through("x"), REL, MODULE, "scale", _signature(entry), _ffi(entry))
    assert found.missing == []
    (kernel,) = found.plan.kernels
    assert {a.c_param: a.expr for a in kernel.args}["n"] == "int(X.numel())"


def test_the_search_passes_its_sites_locals_to_each_launch_it_makes():
    from types import SimpleNamespace

    from bot.emit import carried_runtime

    launched: list[dict] = []

    def autotune_launch(kernel_fn, configs, key, kernel_name):
        for cfg in configs:
            kernel_fn(cfg)
        return SimpleNamespace(best_config=configs[0])

    namespace: dict = {
        "autotune_launch": autotune_launch,
        "is_autotune_disabled": lambda: False,
        "SimpleNamespace": SimpleNamespace,
        "torch": SimpleNamespace(Tensor=type("Tensor", (), {})),
        "_rs_launch": lambda stream, grid, kernel, args, **site: launched.append(site),
    }
    exec(carried_runtime.search_piece(passes_site=True), namespace)
    kernel = SimpleNamespace(name="k", replace_hints=lambda **_: kernel)
    search = namespace["_rs_exhaustive_search"]
    search([1, 2], None, lambda c: (1,), kernel, lambda c: (c,), _rs_site={"n": 7})
    assert launched == [{"n": 7}, {"n": 7}]
    search([1], None, lambda c: (1,), kernel, lambda c: (c,))  # a search whose site passes nothing
    assert launched[-1] == {}
