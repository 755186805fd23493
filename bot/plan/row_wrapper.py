"""The wrapper half of a plan for a row kernel (``launch.row_layout``): TileGym's silu_and_mul /
swiglu shape. The row defaults come first (flatten every input to rows, the output rows shaped by
the reference's column count, a tile generic = next power of two of the row length, one launch),
then every wrapper key of the contract on top of them, as on every other kernel shape, and the C
arguments still without a value are resolved by the shared rules (``python_side.arg_value``):
a runtime scalar such as ``eps`` is the wrapper parameter of its name.
"""

from __future__ import annotations

import ast

from bot.errors import Blocked
from bot.infer import naming
from bot.plan import common, python_side
from bot.plan.inputs import PythonInputs
from bot.plan.types import CTensor, FfiPlan, PyPlan, PyStep
from bot.targets.types import Source

# contiguous().view(), empty_like/new_empty and view(*shape): the cheapest torch calls for the job
POLICY = Source("policy", "P1 row kernel wrapper: flatten to rows, one launch")


def plan(op: str, ffi: FfiPlan, given: PythonInputs, missing: common.Missing) -> PyPlan:
    py = _base(op, ffi, given, missing)
    _contract_overlay(py, given)
    configs = python_side.configs(given)
    if configs:
        py.configs, py.launch_mode = configs, "autotune"
        py.autotune_key = given.key
        py.sources["python.configs"] = given.configs.source
    python_side.fill_args(ffi, py.ffi_args, py.signature, py.configs, given.args, missing)
    return py


def _generic_values(ffi: FfiPlan, given: PythonInputs) -> dict[str, tuple[str, Source]]:
    """C argument -> (Python value, source) for the const generics the row rules know: the
    contract's ``python.generics.<G>``, else a tile width = next power of two of the row length."""
    out: dict[str, tuple[str, Source]] = {}
    for s in ffi.scalars:
        if s.role != "generic":
            continue
        value = given.generics.get(s.feeds)
        if value is not None:
            out[s.name] = (value.value, value.source)
        elif naming.is_tile_width(s.feeds):
            out[s.name] = (
                "next_power_of_2(out_cols)",
                Source("policy", f"P1 row kernel: {s.feeds} = next power of two of the output row length"),
            )
    return out


def _base(op: str, ffi: FfiPlan, given: PythonInputs, missing: common.Missing) -> PyPlan:
    """The row wrapper: flatten every input to rows, allocate the output rows, launch once."""
    inputs = [t for t in ffi.tensors if t.role == "input"]
    out = next(t for t in ffi.tensors if t.role == "output")
    inner = _registration(op, given, missing)
    params = _tensor_params(inputs, given, missing)
    out_cols = _out_cols(params, given, missing)
    first = params[0]
    py_generics = _generic_values(ffi, given)
    out_var = f"{out.name}_rows"
    tensors_py = {out.name: out_var}
    tensors_py.update({t: f"{p}_rows" for t, p in _input_params(inputs, params, given, missing).items()})
    like_first = _shaped_like(first, out_cols)
    return PyPlan(
        register_name=given.register_name or op,
        register_kind=given.register_kind or "direct",
        signature=_signature(given, params),
        inner_signature=given.inner_signature if inner else "",
        inner_name=inner,
        dtypes=common.torch_dtypes(ffi.dtypes),
        steps=_steps(op, params, out_cols, given, py_generics),
        alloc={out_var: _allocation(first, out_cols)},
        launch_mode="direct",
        configs=[],
        autotune_key="",
        python_grid={},
        device_of=f"{first}_rows",
        tensors_py=tensors_py,
        ffi_args={arg: arg for arg in py_generics},
        # view(*shape): passing the torch.Size itself costs ~2.5 µs more per call (measured on the H200)
        result=f"{out_var}.view(*{first}.shape)" if like_first else f"{out_var}.view(*out_shape)",
        out_param=given.out_param.value if given.out_param is not None else "",
        sources=_sources(given),
    )


def _registration(op: str, given: PythonInputs, missing: common.Missing) -> str:
    """A getter's inner function ("" for a direct registration); asked for when neither is known."""
    kind = given.register_kind
    inner = given.inner_name.value if kind == "getter" and given.inner_name is not None else ""
    if kind not in ("direct", "getter") or (kind == "getter" and not inner):
        missing.add(
            "python.register.kind",
            f"how `{op}` is registered (ops.py declares "
            + (f"a getter {given.register_name}()" if kind else "nothing for it")
            + "); give python.register.name/kind and python.signature",
        )
    return inner


def _tensor_params(inputs: list[CTensor], given: PythonInputs, missing: common.Missing) -> list[str]:
    """The wrapper parameters that feed the kernel's inputs (the inputs' own names when unknown)."""
    params = list(given.tensor_params)
    if len(params) != len(inputs):
        missing.add(
            "python.tensor_params",
            f"which wrapper arguments feed the kernel inputs {[t.name for t in inputs]} "
            f"(ops.py tensor parameters: {params})",
        )
        params = [t.name for t in inputs]
    return params


def _out_cols(params: list[str], given: PythonInputs, missing: common.Missing) -> str:
    """The output's row length as a Python expression (the first input's when unknown)."""
    if given.out_cols is not None:
        return given.out_cols.value
    missing.add(
        "python.out_cols",
        f"the output's row length as a Python expression over {params} (e.g. {params[0]}.shape[-1])",
    )
    return f"{params[0]}.shape[-1]"


def _steps(
    op: str, params: list[str], out_cols: str, given: PythonInputs, py_generics: dict[str, tuple[str, Source]]
) -> list[PyStep]:
    """The prologue, the row length (checked when it divides), every input as rows, the output's
    shape when it is not the first input's, and the tile generics."""
    src_cols = given.out_cols.source if given.out_cols is not None else None
    steps = common.wrapper_prologue(op, params, same_dtype=True)
    divisor = _exact_division(out_cols)
    if divisor:
        steps.append(
            PyStep(
                "check",
                expr=f"{divisor[0]} % {divisor[1]} != 0",
                error="ValueError",
                message=f"cutile-rs {op}: {divisor[0]} must be divisible by {divisor[1]}",
                source=src_cols,
            )
        )
    steps.append(PyStep("let", target="out_cols", expr=f"int({out_cols})", source=src_cols))
    for p in params:
        steps.append(
            PyStep("let", target=f"{p}_rows", expr=f"{p}.contiguous().view(-1, {p}.shape[-1])", source=POLICY)
        )
    first = params[0]
    if not _shaped_like(first, out_cols):  # the output needs its own shape: rows of out_cols
        steps.append(PyStep("let", target="n_rows", expr=f"{first}_rows.shape[0]", source=POLICY))
        steps.append(
            PyStep("let", target="out_shape", expr=f"{first}.shape[:-1] + (out_cols,)", source=POLICY)
        )
    for arg, (value, source) in py_generics.items():
        steps.append(PyStep("let", target=arg, expr=value, source=source))
    return steps


def _sources(given: PythonInputs) -> dict[str, Source]:
    found = {
        "signature": given.signature.source if given.signature is not None else None,
        "getter": given.inner_name.source if given.inner_name is not None else None,
        "out_cols": given.out_cols.source if given.out_cols is not None else None,
        "launch": Source("policy", "no autotune configs: one direct launch, compiler-default options"),
    }
    return {key: source for key, source in found.items() if source is not None}


def _input_params(
    inputs: list[CTensor], params: list[str], given: PythonInputs, missing: common.Missing
) -> dict[str, str]:
    """C input -> the wrapper parameter it packs: by name (``a_ptr``'s ``a`` is the wrapper's ``a``,
    whatever their order), and a single input left with a single parameter left, together. Two or
    more left have no source (the wrapper's order need not be kernel.rs's): asked for as
    ``python.tensors``, unless the porter's contract writes it."""
    pairs: dict[str, str] = {}
    left = list(params)
    for t in inputs:
        for name in (t.name, t.param):
            if name in left:
                pairs[t.name] = name
                left.remove(name)
                break
    unpaired = [t.name for t in inputs if t.name not in pairs]
    if len(unpaired) == 1 and len(left) == 1:
        pairs[unpaired[0]] = left[0]
    elif unpaired:
        if not given.from_porter(given.tensors):
            missing.add(
                "python.tensors",
                f"which wrapper tensor each of the kernel inputs {unpaired} packs (left: {left}); "
                "no name pairs them and the wrapper's order need not be kernel.rs's",
            )
        pairs.update(zip(unpaired, left, strict=False))  # placeholders: the plan is blocked or overlaid
    return pairs


def _contract_overlay(py: PyPlan, given: PythonInputs) -> None:
    """The contract's wrapper keys over the row defaults, so every key means the same on every
    kernel shape: extra statements, allocations (a second output such as ``rstd``), descriptor
    bindings, C argument values and the returned expression.

    Only what the porter wrote counts here: statements read from the reference op describe its
    own flattening, which the row defaults already do (and faster, measured on the H200)."""
    porter = given.from_porter
    steps = python_side.contract_steps(given.steps) if porter(given.steps) else []
    if steps:
        py.steps += steps
        py.sources["python.steps"] = given.steps.source
    if porter(given.alloc):
        py.alloc.update(given.alloc.value)
        py.sources["python.alloc"] = given.alloc.source
    if porter(given.tensors):
        py.tensors_py.update(given.tensors.value)
    for key, arg in given.args.items():
        if porter(arg):
            py.ffi_args[key] = arg.value
    if porter(given.dtypes):
        py.dtypes = list(given.dtypes.value)
    if porter(given.result):
        py.result = given.result.value
        if py.out_param and not porter(given.out_param):
            # the copy into out= assumes the single row output; refuse it rather than guess
            o = py.out_param
            py.steps.insert(
                0,
                PyStep(
                    "check",
                    expr=f"{o} is not None",
                    error="NotImplementedError",
                    message=f"cutile-rs {py.register_name}: {o}= is not supported when python.result is set",
                    source=given.result.source,
                ),
            )
            py.out_param = ""


def _signature(given: PythonInputs, params: list[str]) -> str:
    return given.signature.value if given.signature is not None else ", ".join(params) + ", **kwargs"


def _exact_division(expr: str) -> tuple[str, int] | None:
    """``x.shape[-1] // 2`` -> (``x.shape[-1]``, 2): the wrapper then rejects odd sizes itself."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        raise Blocked("host", f"python.out_cols is not a Python expression: {expr!r}") from None
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.FloorDiv)
        and isinstance(node.right, ast.Constant)
    ):
        if isinstance(node.right.value, int) and node.right.value > 1:
            return ast.unparse(node.left), node.right.value
    return None


def _shaped_like(first: str, out_cols: str) -> bool:
    """Whether the output has the first input's shape (its row length is that input's)."""
    return out_cols.replace(" ", "") == f"{first}.shape[-1]"


def _allocation(first: str, out_cols: str) -> str:
    """The output rows: ``empty_like`` when they are shaped like the first input's (the cheapest
    allocation call), otherwise ``new_empty`` with the first input's dtype and device."""
    if _shaped_like(first, out_cols):
        return f"torch.empty_like({first}_rows)"
    return f"{first}_rows.new_empty((n_rows, out_cols))"
