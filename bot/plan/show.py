"""``agent-d plan``: the launch plan as text, every value with the source it came from."""

from __future__ import annotations

from bot.plan.types import CarryPlan, FfiPlan, LaunchPlan, PyPlan


def render_plan(plan: LaunchPlan) -> str:
    wrapper = _carry_lines(plan.carry) if plan.carry is not None else _python_lines(plan.python)
    out = [f"launch plan for {plan.op}", "", *_ffi_lines(plan.ffi), "", *wrapper, ""]
    for wired in [plan.tests, *plan.more_tests]:
        where = f"  [{wired.source}]" if wired.source else ""
        out.append(
            f"tests: {wired.file or '(no test file)'} ({wired.scope or 'unknown'}-level _backends){where}"
        )
    out.append(f"contract lines written by the porter: {plan.contract_lines}")
    if plan.missing:
        out += ["", "MISSING (write these in host_contract.yaml):"]
        for m in plan.missing:
            out.append(f"  {m.key}: {m.question}")
            out += [f"    tried: {t}" for t in m.tried]
    return "\n".join(out)


def _carry_lines(carry: CarryPlan) -> list[str]:
    """The carried-over wrapper: whose code it is, and each launched kernel's way to kernel.rs."""
    out = [
        "Python wrapper: the reference's host code, carried over",
        f"  @register_impl({carry.register_name!r}) {carry.function}()  [{carry.source}]",
        f"  carried with it: {', '.join(carry.carried) or '(nothing)'}",
    ]
    for kernel in carry.kernels:
        if not kernel.entry:
            out.append(
                f"  {kernel.name}: not ported, its launch raises NotImplementedError  [{kernel.source}]"
            )
            continue
        out.append(f"  {kernel.name}({', '.join(kernel.params)}) -> {kernel.entry}  [{kernel.source}]")
        out += [f"    {a.c_param:<14} = {a.expr}  [{a.source}]" for a in kernel.args]
    return out


def _ffi_lines(ffi: FfiPlan) -> list[str]:
    """The C ABI, its descriptors and dtypes, scalars, FFI locals and launches."""
    out = ["C ABI:", f"  {ffi.c_declaration()}", "", "descriptors:"]
    for t in ffi.tensors:
        out.append(
            f"  {t.name:<14} {t.role:<6} -> {t.param} ({t.kind} {t.elem}, rank {t.rank})  [{t.source}]"
        )
    element = f"element generic {ffi.dtype_generic}" if ffi.dtype_generic else "element type (fixed)"
    out.append(f"  {element} from {ffi.dtype_from} in {ffi.dtypes}  [{ffi.sources.get('dtype_from')}]")
    for slot in ffi.type_slots:
        value = f"the dtype of {ffi.dtype_from}" if slot.dtype == "dtype" else f'"{slot.dtype}"'
        out.append(f"  type generic {slot.generic} = {value} (not the element generic)  [{slot.source}]")
    out.append("scalars:")
    for s in ffi.scalars:
        feeds = f" -> {s.feeds}" if s.feeds else ""
        out.append(f"  {s.name:<14} {s.ctype} {s.role}{feeds}  [{s.source}]")
    out.append("derived in the FFI:")
    for d in ffi.derived:
        out.append(f"  {d.name:<14} = {d.expr}  [{d.source}]")
    out.append(
        "launches:"
        if not ffi.sequence
        else f"launches, one after the other:  [{ffi.sources.get('sequence')}]"
    )
    for i, v in enumerate(ffi.variants, 1):
        head = f"step {i}" if ffi.sequence else f"when {v.when}"
        out.append(
            f"  {head}: {v.entry}<{', '.join(v.generics)}>({', '.join(v.args)}) grid ({', '.join(v.grid)})"
        )
    return out


def _python_lines(py: PyPlan) -> list[str]:
    """The wrapper: its registration, sources, steps and launch."""
    out = [
        "Python wrapper:",
        f"  @register_impl({py.register_name!r}) def {py.register_name}({py.signature})",
    ]
    for key, source in py.sources.items():
        out.append(f"  {key}: [{source}]")
    for step in py.steps:
        text = {
            "check": f"if {step.expr}: raise {step.error}",
            "detach": f"detach {', '.join(step.names)}",
            "let": f"{step.target} = {step.expr}",
            "return": f"if {step.target}: return {step.expr}",
        }[step.kind]
        out.append(f"  {text}" + (f"  [{step.source}]" if step.source else ""))
    out.append(f"  launch: {py.launch_mode}; tensors {py.tensors_py}; scalars {py.ffi_args}")
    if py.per_element:
        walked = ", ".join(f"{e.item} in {e.list_expr} -> {e.tensor}" for e in py.per_element)
        out.append(f"  once per list element: {walked}  [{py.per_element[0].source}]")
    return out
