"""Pattern P1: raw-pointer row kernels, one block per row (TileGym's silu_and_mul, swiglu).

Recognised from the kernel alone: every tensor is a ``*mut E`` pointer, the body reads one
block-id axis and has no grid-stride loop. Then:
- the grid is one block per output row, computed in the FFI from the output descriptor;
- kernel scalars are descriptor fields (naming rules, or the reference op for the output's
  column count);
- a 1-D tile generic is the next power of two of the output row length, computed in Python;
- the wrapper flattens each input to 2-D rows, allocates the output rows, launches once.
"""

from __future__ import annotations

import ast

from bot.checkout import Checkout
from bot.errors import Blocked
from bot.infer import naming
from bot.infer.facts import Facts
from bot.plan import common
from bot.types import (
    CScalar,
    Derived,
    Entry,
    FfiPlan,
    KernelSignature,
    LaunchPlan,
    PyPlan,
    PyStep,
    Source,
    Target,
    Variant,
)

KERNEL_SHAPE = Source("kernel", "raw pointers, one block-id axis, no grid-stride loop: one block per row")


def matches(entry: Entry) -> bool:
    tensors = [p for p in entry.params if p.kind in ("tensor", "ptr")]
    return (
        bool(tensors)
        and all(p.kind == "ptr" for p in tensors)
        and entry.block.axes == 1
        and not entry.block.grid_stride
    )


def plan(
    target: Target, signature: KernelSignature, entry: Entry, facts: Facts, checkout: Checkout
) -> LaunchPlan:
    missing = common.Missing()
    elem = common.element_generic(entry)
    tensors = common.c_tensors(entry)
    for t in tensors:
        t.rank = 2  # rows x columns: the wrapper flattens leading dims
    outputs = [t for t in tensors if t.role == "output"]
    inputs = [t for t in tensors if t.role == "input"]
    out = outputs[0]
    bases = common.kernel_base_names(tensors, entry)
    dtype_from, dtype_src = common.dtype_driver(tensors, elem, facts)
    dtypes, dtypes_src = common.dispatch_dtypes(elem, tensors, dtype_from, facts)

    derived: list[Derived] = [Derived("n_rows", f"dim({out.name},0)", KERNEL_SHAPE)]
    args: list[str] = []
    for p in entry.params:
        if p.kind == "ptr":
            args.append(f"ptr({next(t.name for t in tensors if t.param == p.name)})")
            continue
        expr, src = _scalar_source(p.name, out.name, bases, facts)
        if expr is None:
            missing.add(
                f"ffi.scalars.{p.name}",
                f"what value feeds kernel scalar `{p.name}: {p.ty}` (an expression over descriptors, "
                f"e.g. dim({out.name},1))",
                facts,
            )
            expr, src = "0", Source("policy", "unknown")
        derived.append(Derived(p.name, expr, src))
        args.append(p.name)

    scalars: list[CScalar] = []
    generics: list[str] = []  # exactly the entry's generics, in declared order
    py_generics: dict[str, str] = {}
    py_generic_sources: dict[str, Source] = {}
    for g in entry.generics:
        if g.kind == "type":
            generics.append("dtype")
            continue
        arg, arg_src = common.generic_arg(g.name, facts)
        scalars.append(CScalar(arg, "i32", "generic", g.name, arg_src))
        generics.append(arg)
        value = facts.get(f"python.generics.{g.name}")
        if isinstance(value, str):
            py_generics[arg] = value
            py_generic_sources[arg] = facts.source(f"python.generics.{g.name}")
        elif naming.is_tile_width(g.name):
            py_generics[arg] = "next_power_of_2(out_cols)"
            py_generic_sources[arg] = Source(
                "policy", f"P1 row kernel: {g.name} = next power of two of the output row length"
            )
        else:
            missing.add(f"python.generics.{g.name}", f"what Python value feeds const generic {g.name}", facts)
            py_generics[arg] = "0"
            py_generic_sources[arg] = Source("policy", "unknown")
    scalars += common.compile_option_scalars()

    grid, grid_source = common.contract_grid(entry, facts) or (["n_rows", "1", "1"], KERNEL_SHAPE)
    variant = Variant("always", entry.name, generics, args, grid, entry.name, grid_source, entry.unsafe)
    ffi = FfiPlan(
        symbol=target.symbol,
        module=signature.module,
        style=checkout.style,
        tensors=tensors,
        dtype_from=dtype_from,
        dtype_generic=elem,
        dtypes=dtypes,
        scalars=scalars,
        derived=derived,
        variants=[variant],
        checks=common.contract_checks(facts),
        sources={"style": checkout.style_source, "dtype_from": dtype_src, "dtypes": dtypes_src},
        file_uses=list(signature.file_uses),
    )
    python = _python_plan(target, inputs, out, dtypes, py_generics, py_generic_sources, facts, missing)
    tests = common.test_wiring(target, checkout)
    return LaunchPlan(target.op, ffi, python, tests, missing.items, int(facts.get("contract.lines", 0) or 0))


def _scalar_source(
    name: str, out: str, bases: dict[str, str], facts: Facts
) -> tuple[str | None, Source | None]:
    known = common.known_scalar(name, bases, facts)
    if known:
        return known
    if facts.get("reference.out_cols_var") == name:
        src = facts.source("reference.out_cols_var")
        return f"dim({out},1)", Source("reference", f"{src.detail} -> `{name}` is the output's column count")
    return None, None


def _python_plan(
    target, inputs, out, dtypes, py_generics, py_generic_sources, facts: Facts, missing
) -> PyPlan:
    op = target.op
    kind = facts.get("python.register.kind")
    inner = facts.get("python.inner_name") if kind == "getter" else ""
    if kind not in ("direct", "getter") or (kind == "getter" and not inner):
        missing.add(
            "python.register.kind",
            f"how `{op}` is registered (ops.py declares "
            + (f"a getter {facts.get('python.register.name')}()" if kind else "nothing for it")
            + "); give python.register.name/kind and python.signature",
            facts,
        )
    params = list(facts.get("python.tensor_params") or [])
    if len(params) != len(inputs):
        missing.add(
            "python.tensor_params",
            f"which wrapper arguments feed the kernel inputs {[t.name for t in inputs]} "
            f"(ops.py tensor parameters: {params})",
            facts,
        )
        params = [t.name for t in inputs]
    out_cols = facts.get("python.out_cols")
    if not isinstance(out_cols, str):
        missing.add(
            "python.out_cols",
            f"the output's row length as a Python expression over {params} (e.g. {params[0]}.shape[-1])",
            facts,
        )
        out_cols = f"{params[0]}.shape[-1]"
    first = params[0]
    src_ops = facts.source("python.signature")
    src_cols = facts.source("python.out_cols")
    # contiguous().view(), empty_like/new_empty and view(*shape): the cheapest torch calls for the job
    policy = Source("policy", "P1 row kernel wrapper: flatten to rows, one launch")
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
            PyStep("let", target=f"{p}_rows", expr=f"{p}.contiguous().view(-1, {p}.shape[-1])", source=policy)
        )
    like_first = _shaped_like(first, out_cols)
    if not like_first:  # the output needs its own shape: rows of out_cols
        steps.append(PyStep("let", target="n_rows", expr=f"{first}_rows.shape[0]", source=policy))
        steps.append(
            PyStep("let", target="out_shape", expr=f"{first}.shape[:-1] + (out_cols,)", source=policy)
        )
    for arg, value in py_generics.items():
        steps.append(PyStep("let", target=arg, expr=value, source=py_generic_sources[arg]))
    out_var = f"{out.name}_rows"
    tensors_py = {out.name: out_var}
    tensors_py.update({t.name: f"{p}_rows" for t, p in zip(inputs, params)})
    ffi_args = {arg: arg for arg in py_generics}
    ffi_args.update({"num_cta_in_cga": "_AUTO_COMPILE_OPTION", "occupancy": "_AUTO_COMPILE_OPTION"})
    return PyPlan(
        register_name=str(facts.get("python.register.name") or op),
        register_kind=str(kind or "direct"),
        signature=_signature(facts, params),
        inner_signature=str(facts.get("python.inner_signature") or "") if inner else "",
        inner_name=str(inner or ""),
        dtypes=[common.TORCH_DTYPES[d] for d in dtypes if d in common.TORCH_DTYPES],
        steps=steps,
        alloc={out_var: _allocation(first, out_cols)},
        launch_mode="direct",
        configs=[],
        autotune_key="",
        python_grid={},
        device_of=f"{first}_rows",
        tensors_py=tensors_py,
        ffi_args=ffi_args,
        # view(*shape): passing the torch.Size itself costs ~2.5 µs more per call (measured on the H200)
        result=f"{out_var}.view(*{first}.shape)" if like_first else f"{out_var}.view(*out_shape)",
        out_param=str(facts.get("python.out_param") or ""),
        sources={
            k: v
            for k, v in (
                ("signature", src_ops),
                ("getter", facts.source("python.inner_name")),
                ("out_cols", src_cols),
                (
                    "launch",
                    Source("policy", "no autotune configs: one direct launch, compiler-default options"),
                ),
            )
            if v is not None
        },
    )


def _signature(facts: Facts, params: list[str]) -> str:
    declared = facts.get("python.signature")
    return declared if isinstance(declared, str) else ", ".join(params) + ", **kwargs"


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
