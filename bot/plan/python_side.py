"""The wrapper half of a general plan: signature and registration from ops.py, tensors matched by
name, config fields and selector flags by convention, the rest from the contract.

Contract keys read here (docs/contract.md): ``python.steps``, ``python.alloc``, ``python.tensors``,
``python.args.<c arg>``, ``python.configs``, ``python.key``, ``python.result``, ``python.dtypes``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from bot.errors import Blocked
from bot.plan import common
from bot.plan.inputs import Given, PythonInputs
from bot.plan.types import CScalar, FfiPlan, ListLaunch, PyPlan, PyStep
from bot.targets.types import Source

# config fields that set a compile option, as TileGym spells them (cuTile's hints are lower case)
_COMPILE_FIELDS = {
    "num_cta_in_cga": ("NUM_CTA_IN_CGA", "NUM_CTAS", "num_ctas"),
    "occupancy": ("OCCUPANCY", "occupancy"),
}


def plan(op: str, ffi: FfiPlan, given: PythonInputs, missing: common.Missing) -> PyPlan:
    if given.register_kind != "direct":
        missing.add("python.register.kind", f"how `{op}` is registered (only direct registration here)")
    params = list(given.tensor_params)
    if given.signature is not None:
        signature = given.signature.value
    else:
        missing.add("python.signature", "the wrapper's parameters (ops.py declares none for this op)")
        signature = ", ".join(params) + ", **kwargs"
    cfgs = configs(given)
    outputs = [t for t in ffi.tensors if t.role == "output"]
    alloc = dict(given.alloc.value) if given.alloc is not None else {}
    if not alloc:
        missing.add("python.alloc", "how each output is allocated, e.g. {out: 'torch.empty((m, n), ...)'}")
        alloc = {t.name: "None" for t in outputs}
    per_element = list_launches(ffi, given.per_element)
    tensors_py = _tensors(ffi, params, alloc, given.tensors, missing, {e.tensor: e.item for e in per_element})
    sources = {"python.signature": given.signature, "python.alloc": given.alloc}
    sources |= {"python.configs": given.configs, "python.steps": given.steps}
    return PyPlan(
        register_name=given.register_name or op,
        register_kind="direct",
        signature=signature,
        inner_signature="",
        dtypes=list(given.dtypes.value) if given.dtypes is not None else common.torch_dtypes(ffi.dtypes),
        steps=common.wrapper_prologue(op, params, same_dtype=False) + contract_steps(given.steps),
        alloc=alloc,
        launch_mode="autotune" if cfgs else "direct",
        configs=cfgs,
        autotune_key=given.key,
        python_grid={},
        # an output the contract's tensors leave unbound is asked for (plan._unbound), not a crash
        device_of=tensors_py.get(outputs[0].name, "") if outputs else "",
        tensors_py=tensors_py,
        ffi_args=fill_args(ffi, {}, signature, cfgs, given.args, missing),
        result=given.result.value if given.result is not None else next(iter(alloc)),
        out_param="",
        sources={key: fact.source for key, fact in sources.items() if fact is not None},
        per_element=per_element,
    )


def list_launches(ffi: FfiPlan, per_element: Given[Mapping[str, object]] | None) -> list[ListLaunch]:
    """``python.per_element`` ({C tensor: {list, item}}) in the descriptors' order; a name that is no
    C tensor is ignored here (the contract schema names it)."""
    if per_element is None:
        return []
    raw = per_element.value
    return [
        ListLaunch(t.name, str(raw[t.name]["list"]), str(raw[t.name]["item"]), per_element.source)
        for t in ffi.tensors
        if isinstance(raw.get(t.name), dict)
    ]


def contract_steps(given: Given | None) -> list[PyStep]:
    """``python.steps`` as wrapper steps (each expression checked to parse)."""
    if given is None:
        return []
    src = given.source
    steps: list[PyStep] = []
    for i, item in enumerate(given.value):
        _check_step(i, item, src)
        if "let" in item:
            steps.append(PyStep("let", target=str(item["let"]), expr=str(item["expr"]), source=src))
        elif "check" in item:
            steps.append(
                PyStep(
                    "check",
                    expr=str(item["check"]),
                    error=str(item.get("raise", "ValueError")),
                    message=str(item.get("message", item["check"])),
                    source=src,
                )
            )
        elif "detach" in item:
            steps.append(PyStep("detach", names=[str(n) for n in item["detach"]], source=src))
        elif "return" in item:  # an early return: ``if when: return <expr>`` (dropout when not training)
            steps.append(PyStep("return", target=str(item["when"]), expr=str(item["return"]), source=src))
    return steps


def _check_step(i: int, item: dict, src: Source | None) -> None:
    """A step's expressions must parse; say which step otherwise. (Its form is the contract schema's
    job: bot/infer/contract/contract.schema.json, checked when the contract is read.)"""
    where = f"{src.detail if src else 'python.steps'}[{i}]"
    for key in ("expr", "check", "return", "when"):
        if key in item:
            try:
                ast.parse(str(item[key]), mode="eval")
            except SyntaxError as exc:
                raise Blocked(
                    "host", f"{where}: {key} {item[key]!r} is not a Python expression ({exc.msg})"
                ) from None


def fill_args(
    ffi: FfiPlan,
    args: dict[str, str],
    signature: str,
    cfgs: list[dict[str, object]],
    given: Mapping[str, Given[str]],
    missing: common.Missing,
) -> dict[str, str]:
    """Every C scalar of ``ffi`` without a Python value in ``args`` gets one by the shared rules
    (``given``: the ``python.args`` facts), or a question (and a placeholder, since the plan is not
    rendered while questions remain)."""
    for s in ffi.scalars:
        if s.name in args:
            continue
        expr, _src = arg_value(s.name, s.role, s.feeds, signature, cfgs, given)
        if expr is None:
            ask_arg(s, missing)
            expr = "0"
        args[s.name] = expr
    return args


def ask_arg(scalar: CScalar, missing: common.Missing) -> None:
    """The question for a C argument no rule gives a Python value; a kernel scalar may instead be
    computed in the FFI from the descriptors."""
    question = f"the Python value of C argument `{scalar.name}` ({scalar.role}" + (
        f" feeding {scalar.feeds})" if scalar.feeds else ")"
    )
    if scalar.role == "runtime_scalar":
        question += f", or ffi.scalars.{scalar.feeds}: an expression over the descriptors (e.g. dim(out,1))"
    missing.add(f"python.args.{scalar.name}", question)


def configs(given: PythonInputs) -> list[dict[str, object]]:
    """Config groups: ``[{"when": cond, "configs": [..]}]`` (``inputs.config_groups``)."""
    return [dict(group) for group in given.configs.value] if given.configs is not None else []


def _tensors(
    ffi: FfiPlan,
    params: list[str],
    alloc: dict[str, str],
    explicit: Given[Mapping[str, str]] | None,
    missing: common.Missing,
    items: dict[str, str],
) -> dict[str, str]:
    """C tensor -> the Python value it packs: ``explicit`` (``python.tensors``) when given, else
    matched by name; ``items``: the tensors packed per list element."""
    if explicit is not None:
        return dict(explicit.value)
    out: dict[str, str] = dict(items)
    outputs = [t for t in ffi.tensors if t.role == "output"]
    if len(outputs) == 1 and len(alloc) == 1 and outputs[0].name not in out:
        out[outputs[0].name] = next(iter(alloc))
    for t in ffi.tensors:
        if t.role == "input" and t.name in params and t.name not in out:
            out[t.name] = t.name
    unmatched = [t.name for t in ffi.tensors if t.name not in out]
    if unmatched:
        missing.add(
            "python.tensors",
            f"which Python value each descriptor packs ({', '.join(unmatched)} unmatched)",
        )
        for name in unmatched:
            out[name] = "None"
    return out


def arg_value(
    name: str, role: str, feeds: str, signature: str, configs, given: Mapping[str, Given[str]]
) -> tuple[str | None, Source | None]:
    explicit = given.get(name)
    if explicit is not None:
        return explicit.value, explicit.source
    fields = {k for group in configs for cfg in group["configs"] for k in cfg}
    if role == "compile_option":
        for field in _COMPILE_FIELDS[name]:
            if field in fields:
                return f"_compile_option(getattr(cfg, {field!r}, None))", Source(
                    "policy", f"config field {field}"
                )
        return "_AUTO_COMPILE_OPTION", Source("policy", "no config sets it: compiler default")
    if role == "generic" and feeds in fields:
        everywhere = all(feeds in cfg for group in configs for cfg in group["configs"])
        if everywhere:
            return f"cfg.{feeds}", Source("naming", f"config field {feeds} feeds generic {feeds}")
        # configs of a variant that lacks this generic do not set it; its launch ignores the value
        return f"getattr(cfg, {feeds!r}, 0)", Source(
            "naming", f"config field {feeds} feeds generic {feeds} (0 where a config lacks it)"
        )
    names = [p.split("=")[0].strip().lstrip("*") for p in signature.split(",")]
    if role == "selector" and name == "persistent" and "static_persistent" in names:
        return "1 if static_persistent else 0", Source(
            "naming", "static_persistent flag selects the persistent entry"
        )
    if name in names:
        return name, Source("naming", f"wrapper parameter {name}")
    return None, None
