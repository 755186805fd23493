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
from bot.infer.facts import Facts
from bot.plan import common, python_side
from bot.types import FfiPlan, PyPlan, PyStep, Source, Target


def plan(target: Target, ffi: FfiPlan, facts: Facts, missing: common.Missing) -> PyPlan:
    py = _base(target, ffi, facts, missing)
    _contract_overlay(py, facts)
    configs = python_side.configs(facts)
    if configs:
        py.configs, py.launch_mode = configs, "autotune"
        py.autotune_key = str(facts.get("python.key") or "")
        py.sources["python.configs"] = facts.source("python.configs")
    python_side.fill_args(ffi, py.ffi_args, py.signature, py.configs, facts, missing)
    return py


def _generic_values(ffi: FfiPlan, facts: Facts) -> dict[str, tuple[str, Source]]:
    """C argument -> (Python value, source) for the const generics the row rules know: the
    contract's ``python.generics.<G>``, else a tile width = next power of two of the row length."""
    out: dict[str, tuple[str, Source]] = {}
    for s in ffi.scalars:
        if s.role != "generic":
            continue
        value = facts.get(f"python.generics.{s.feeds}")
        if isinstance(value, str):
            out[s.name] = (value, facts.source(f"python.generics.{s.feeds}"))
        elif naming.is_tile_width(s.feeds):
            out[s.name] = (
                "next_power_of_2(out_cols)",
                Source("policy", f"P1 row kernel: {s.feeds} = next power of two of the output row length"),
            )
    return out


def _base(target: Target, ffi: FfiPlan, facts: Facts, missing: common.Missing) -> PyPlan:
    """The row wrapper: flatten every input to rows, allocate the output rows, launch once."""
    op = target.op
    inputs = [t for t in ffi.tensors if t.role == "input"]
    out = next(t for t in ffi.tensors if t.role == "output")
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
    py_generics = _generic_values(ffi, facts)
    for arg, (value, source) in py_generics.items():
        steps.append(PyStep("let", target=arg, expr=value, source=source))
    out_var = f"{out.name}_rows"
    tensors_py = {out.name: out_var}
    tensors_py.update({t: f"{p}_rows" for t, p in _input_params(inputs, params, facts, missing).items()})
    ffi_args = {arg: arg for arg in py_generics}
    return PyPlan(
        register_name=str(facts.get("python.register.name") or op),
        register_kind=str(kind or "direct"),
        signature=_signature(facts, params),
        inner_signature=str(facts.get("python.inner_signature") or "") if inner else "",
        inner_name=str(inner or ""),
        dtypes=[common.TORCH_DTYPES[d] for d in ffi.dtypes if d in common.TORCH_DTYPES],
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


def _input_params(inputs: list, params: list[str], facts: Facts, missing: common.Missing) -> dict[str, str]:
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
        source = facts.source("python.tensors")
        if source is None or source.kind not in ("contract", "agent_b"):
            missing.add(
                "python.tensors",
                f"which wrapper tensor each of the kernel inputs {unpaired} packs (left: {left}); "
                "no name pairs them and the wrapper's order need not be kernel.rs's",
                facts,
            )
        pairs.update(zip(unpaired, left, strict=False))  # placeholders: the plan is blocked or overlaid
    return pairs


def _contract_overlay(py: PyPlan, facts: Facts) -> None:
    """The contract's wrapper keys over the row defaults, so every key means the same on every
    kernel shape: extra statements, allocations (a second output such as ``rstd``), descriptor
    bindings, C argument values and the returned expression.

    Only what the porter wrote counts here: statements read from the reference op describe its
    own flattening, which the row defaults already do (and faster, measured on the H200)."""
    porter = {"contract", "agent_b"}

    def given(key: str) -> bool:
        source = facts.source(key)
        return source is not None and source.kind in porter

    steps = python_side.contract_steps(facts) if given("python.steps") else []
    if steps:
        py.steps += steps
        py.sources["python.steps"] = facts.source("python.steps")
    alloc = facts.get("python.alloc")
    if isinstance(alloc, dict) and given("python.alloc"):
        py.alloc.update({str(k): str(v) for k, v in alloc.items()})
        py.sources["python.alloc"] = facts.source("python.alloc")
    tensors = facts.get("python.tensors")
    if isinstance(tensors, dict) and given("python.tensors"):
        py.tensors_py.update({str(k): str(v) for k, v in tensors.items()})
    for key, fact in facts.under("python.args").items():
        if fact.source.kind in porter:
            py.ffi_args[key] = str(fact.value)
    dtypes = facts.get("python.dtypes")
    if isinstance(dtypes, list) and given("python.dtypes"):
        py.dtypes = [str(d) for d in dtypes]
    result = facts.get("python.result")
    if isinstance(result, str) and given("python.result"):
        py.result = result
        if py.out_param and not given("python.out_param"):
            # the copy into out= assumes the single row output; refuse it rather than guess
            o = py.out_param
            py.steps.insert(
                0,
                PyStep(
                    "check",
                    expr=f"{o} is not None",
                    error="NotImplementedError",
                    message=f"cutile-rs {py.register_name}: {o}= is not supported when python.result is set",
                    source=facts.source("python.result"),
                ),
            )
            py.out_param = ""


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
