"""Render the carried-over wrapper: the reference's host code, each cuTile name rewritten to its
cutile-rs counterpart, each ``@ct.kernel`` replaced by a kernel object whose launcher calls the
kernel.rs entry that ports it (``plan.carry``).

The carried statements are the reference's own, in its order; only names change: a cuTile name
by the table (``infer.model.known``), the registration's backend, and a kernel's definition. The
launchers are rendered from the plan alone. ruff formats the text afterwards (``bot.apply``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from bot.emit import carried_autograd, wrapper_py
from bot.emit import carried_runtime as runtime
from bot.infer.model import known
from bot.infer.model.semantic import Binding, ModuleModel
from bot.plan.carry import launch_sites, nested_imports, qualified_uses
from bot.plan.types import CarriedKernel, CarryPlan, LaunchPlan
from bot.targets.discover import cutile_registration

_HELPERS = "from tilegym.backend.cutile_rs.utils import bind_kernel_function_cffi, check_rc, make_tensor_desc"
LAUNCH_PARAMS = ("_grid", "_args", "_hints", "_stream", "_site")
SEARCH_SITE = "_rs_site"  # a search site passes locals along (the search piece then takes them)


class CarryError(Exception):
    """The reference cannot be rendered as the plan says (agent-d's own bug)."""


def render(plan: LaunchPlan, read: Callable[[str], str]) -> str:
    """The wrapper text; ``read``: a path in the repository -> the module's source."""
    carry = plan.carry
    assert carry is not None
    used_runtime: set[str] = set()
    imports: list[str] = []
    body: list[str] = []
    kernels = {(k.module or carry.module, k.name): k for k in carry.kernels}
    primary = (carry.reference, carry.module, [carry.function, *carry.carried], carry.renames)
    for path, module, names, renames in [
        (h.reference, h.module, h.carried, h.renames) for h in carry.helpers
    ] + [primary]:
        model = ModuleModel.build(read(path), module, path)
        root = model.binding(carry.function) if module == carry.module else None
        if module == carry.module and (root is None or not isinstance(root.stmt, ast.FunctionDef)):
            raise CarryError(f"{path}: {carry.function}() is no longer a module function")
        site_values = _site_values(launch_sites(model, names, module), kernels, module)
        emitted: set[int] = set()
        for binding in _in_source_order(model, names):
            if id(binding.stmt) in emitted and binding.kind != "import":
                continue
            emitted.add(id(binding.stmt))
            if binding.kind == "import":
                line = _import_line(binding, renames.get(binding.name, binding.name))
                if line:
                    imports.append(line)
            elif binding.kind == "kernel":
                body.append(_kernel_object(kernels[(module, binding.name)]))
            else:
                stmt = _rewritten(
                    model, binding.stmt, used_runtime, imports, {h.module for h in carry.helpers}
                )
                _pass_site_values(stmt, site_values, used_runtime)
                _rename(model, stmt, renames)
                if root is not None and binding.stmt is root.stmt:
                    _register(stmt, carry.register_name)
                else:
                    _unregister(stmt)
                body.append(ast.unparse(stmt))
    lines = _head(plan, carry, imports, used_runtime)
    lines += ["\n".join(wrapper_py.constants(plan)).strip("\n")]
    lines += [runtime.KERNEL.rstrip("\n")]
    for piece in sorted(used_runtime & set(runtime.PIECES)):
        text = runtime.PIECES[piece]
        if piece == runtime.SEARCH and SEARCH_SITE in used_runtime:
            text = runtime.search_piece(passes_site=True)
        lines += [text.rstrip("\n")]
    lines += [_ffi_call(plan)]
    for kernel in carry.kernels:
        if kernel.entry:
            lines.append(_launcher(plan, kernel))
    lines += body
    return "\n\n\n".join(part.strip("\n") for part in lines if part.strip()) + "\n"


def _rename(model: ModuleModel, stmt: ast.stmt, renames: dict[str, str]) -> None:
    """Each module name of ``stmt`` the wrapper knows by another name, renamed where it is the
    module's (a local of the same name is left alone)."""
    if not renames:
        return
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name in renames:
        stmt.name = renames[stmt.name]
    for node, scope in model.walk(stmt):
        if isinstance(node, ast.Name) and node.id in renames and model.is_module_name(node.id, scope):
            node.id = renames[node.id]
        elif isinstance(node, ast.Global):
            node.names = [renames.get(n, n) for n in node.names]


def _in_source_order(model: ModuleModel, names: list[str]) -> list[Binding]:
    bindings = [b for n in names for b in model.bindings.get(n, [])]
    return sorted(bindings, key=lambda b: (b.stmt.lineno, b.stmt.col_offset, b.name))


def _import_line(binding: Binding, local: str) -> str:
    """The import line of a carried import ('' when the wrapper rewrites its uses, or carries the
    helper it imports)."""
    use = known.resolve(binding.qualified)
    if use.kind == "import":
        module, name = use.text.split(":")
        return f"from {module} import {name}" + (f" as {local}" if local != name else "")
    if use.kind != "keep" or _cutile_module(binding.qualified):
        return ""  # rewritten where read
    alias = binding.alias
    assert alias is not None
    if isinstance(binding.stmt, ast.Import):
        if not alias.asname and local == binding.name:
            return f"import {alias.name}"
        return f"import {binding.qualified} as {local}"  # `import a.b` binds `a`: its alias binds `a` too
    module, _, name = binding.qualified.rpartition(".")
    return f"from {module} import {name}" + (f" as {local}" if local != name else "")


def _cutile_module(qualified: str) -> bool:
    return qualified == known.CUDA_TILE or qualified.startswith(known.CUDA_TILE + ".")


def _rewritten(
    model: ModuleModel, stmt: ast.stmt, used: set[str], imports: list[str], helpers: set[str]
) -> ast.stmt:
    """``stmt`` with each cuTile name replaced (in place: the model is this render's own); a name
    imported from a module in ``helpers`` is the carried helper's."""
    replace: dict[int, ast.expr] = {}
    for text, _line, node in qualified_uses(model, stmt):
        if isinstance(node, ast.Name) and text.rpartition(".")[0] in helpers:
            continue
        use = known.resolve(text)
        if use.kind == "runtime":
            used.add(use.text)
            replace[id(node)] = ast.Name(use.text, ast.Load())
        elif use.kind == "torch":
            replace[id(node)] = ast.parse(use.text, mode="eval").body
        elif use.kind == "import":
            module, name = use.text.split(":")
            imports.append(f"from {module} import {name}")
            replace[id(node)] = ast.Name(name, ast.Load())
        elif use.kind == "refuse":
            raise CarryError(f"line {node.lineno}: {use.text}")

    for owner in ast.walk(stmt):
        # an annotation that names a cuTile type documents what the wrapper no longer imports
        if isinstance(owner, ast.arg) and _names_cutile(model, owner.annotation):
            owner.annotation = None
        elif isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)) and _names_cutile(
            model, owner.returns
        ):
            owner.returns = None

    _rewrite_nested_imports(model, stmt, used, imports)
    carried_autograd.forward_directly(model, stmt, used)

    class Swap(ast.NodeTransformer):
        def visit(self, node):
            if id(node) in replace:
                return ast.copy_location(replace[id(node)], node)
            return super().visit(node)

    return Swap().visit(stmt)


def _rewrite_nested_imports(model: ModuleModel, stmt: ast.stmt, used: set[str], imports: list[str]) -> None:
    """Each import inside a carried function, as the wrapper needs it, in its place: relative made
    absolute, a cuTile helper's twin imported instead, a cuTile host name bound to the runtime's."""
    replacements: dict[int, list[ast.stmt]] = {}
    for node, alias, text in nested_imports(model, stmt):
        use = known.resolve(text)
        local = alias.asname or alias.name.split(".")[0]
        if use.kind == "keep" and isinstance(node, ast.ImportFrom):
            module, _, name = text.rpartition(".")
            new: ast.stmt = ast.ImportFrom(module, [ast.alias(name, alias.asname)], 0)
        elif use.kind == "keep":
            new = ast.Import([alias])
        elif use.kind == "import":
            module, name = use.text.split(":")
            new = ast.ImportFrom(module, [ast.alias(name, local if local != name else None)], 0)
        elif use.kind in ("runtime", "torch"):
            if use.kind == "runtime":
                used.add(use.text)
            new = ast.Assign([ast.Name(local, ast.Store())], ast.parse(use.text, mode="eval").body)
        else:
            continue  # cuda.tile itself: only the base of names rewritten where read
        replacements.setdefault(id(node), []).append(ast.copy_location(new, node))
    if not replacements:
        return
    for parent in ast.walk(stmt):
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(parent, field_name, None)
            if isinstance(block, list) and any(id(n) in replacements for n in block):
                new_block = [r for n in block for r in replacements.get(id(n), [n])]
                setattr(parent, field_name, new_block or [ast.Pass()])


def _site_values(sites, kernels: dict, module: str) -> dict[int, tuple[bool, list[str]]]:
    """id(site call) -> (a launch, not a search; the locals it passes along): a launch of a named
    kernel passes that kernel's, one of a computed kernel every kernel's, whatever its module (the
    plan found each at every launch that may run its kernel, computed ones included)."""
    out: dict[int, tuple[bool, list[str]]] = {}
    for site in sites:
        if site.kernel:
            found = kernels.get((module, site.kernel))
            names = list(found.site_values) if found is not None else []
        elif site.direct:
            names = sorted({n for kernel in kernels.values() for n in kernel.site_values})
        else:
            names = []
        if names:
            out[id(site.call)] = (site.direct, names)
    return out


def _pass_site_values(stmt: ast.stmt, site_values: dict[int, tuple[bool, list[str]]], used: set[str]) -> None:
    """``ct.launch(s, g, k, args)`` -> ``_launch(s, g, k, args, n_elements=n_elements)`` where the
    plan takes kernel.rs's ``n_elements`` from the launch's own local; a search passes them as
    ``_rs_site={...}``, for each launch it makes."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and id(node) in site_values:
            direct, names = site_values[id(node)]
            if direct:
                node.keywords += [ast.keyword(name, ast.Name(name, ast.Load())) for name in names]
            else:
                site = ast.Dict([ast.Constant(n) for n in names], [ast.Name(n, ast.Load()) for n in names])
                node.keywords.append(ast.keyword(SEARCH_SITE, site))
                used.add(SEARCH_SITE)


def _names_cutile(model: ModuleModel, annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, (ast.Name, ast.Attribute)):
            text = model.qualified(node, module_scope=True)
            if (
                text == known.CUDA_TILE
                or text.startswith(known.CUDA_TILE + ".")
                or text.startswith(known.CUTILE_BACKEND + ".")
            ):
                binding = model.binding(_base(node))
                if binding is not None and binding.kind == "import":
                    return True
    return False


def _base(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _register(fn: ast.stmt, name: str) -> None:
    """The registered function, registered for cutile-rs, its tensor inputs detached first: the
    wrapper is forward only (the skill's rule), so a reference's autograd path, whose backward
    launches kernels kernel.rs need not port, is never taken; the output is plain, as a
    hand-written port's is, and a test asks no gradient of it."""
    assert isinstance(fn, ast.FunctionDef)
    kept = [d for d in fn.decorator_list if cutile_registration(d) is None]
    deco = ast.parse(f'register_impl("{name}", backend="cutile-rs")', mode="eval").body
    fn.decorator_list = [deco, *kept]
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    detach = [
        ast.parse(f"{n} = {n}.detach() if isinstance({n}, torch.Tensor) and {n}.requires_grad else {n}").body[
            0
        ]
        for n in params
    ]
    docstring = 1 if ast.get_docstring(fn, clean=False) is not None else 0
    fn.body[docstring:docstring] = detach


def _unregister(stmt: ast.stmt) -> None:
    """A carried helper that registers another op for the cuTile backend registers nothing here."""
    if isinstance(stmt, ast.FunctionDef):
        stmt.decorator_list = [d for d in stmt.decorator_list if cutile_registration(d) is None]


def _head(plan: LaunchPlan, carry: CarryPlan, imports: list[str], used: set[str]) -> list[str]:
    doc = (
        f'"""cutile-rs {plan.op}: host wrapper generated by agent-d (forward only).\n\n'
        f"The host code below is {carry.reference}'s, carried over; each cuTile kernel it launches\n"
        "is launched through kernel.rs instead. Do not edit: change the kernel, the reference or the\n"
        "host contract and run `agent-d port` again; `agent-d plan` lists where every value comes from.\n"
        '"""'
    )
    wanted = set(imports) | {"import torch", "from tilegym.backend import register_impl", _HELPERS}
    switch = False
    for piece in sorted(used):
        for line in runtime.NEEDS.get(piece, []):
            if line == "AUTOTUNE_SWITCH":
                switch = True
            else:
                wanted.add(line)
    lines = [doc, "\n".join(sorted(wanted, key=_import_order))]
    if switch:
        lines.append(runtime.AUTOTUNE_SWITCH.strip("\n"))
    return lines


def _import_order(line: str) -> tuple[int, str]:
    module = line.split()[1]
    top = module.split(".")[0]
    group = 0 if top in _STDLIB else (2 if top == "tilegym" else 1)
    return group, line


_STDLIB = {
    "math",
    "types",
    "functools",
    "operator",
    "contextlib",
    "typing",
    "dataclasses",
    "collections",
    "warnings",
    "itertools",
    "logging",
    "os",
    "re",
    "enum",
}


def _ffi_call(plan: LaunchPlan) -> str:
    ffi = plan.ffi
    tensors = [t.name for t in ffi.tensors]
    scalars = [s.name for s in ffi.scalars]
    casts = {s.name: ("float" if s.ctype == "f32" else "int") for s in ffi.scalars}
    options = {s.name for s in ffi.scalars if s.role == "compile_option"}
    lines = [
        f"def {runtime.FFI_CALL}({', '.join(tensors + scalars + ['stream'])}):",
        f'    """Pack descriptors and call {ffi.symbol} on the stream given (the device\'s current one if none)."""',
        "    ffi, lib = bind_kernel_function_cffi(_KERNEL, _FFI_CDEF)",
        f"    device = ({_first_given(tensors)}).device",
        "    device_id = device.index if device.index is not None else torch.cuda.current_device()",
        "    raw_stream = getattr(stream, 'cuda_stream', None)",
        "    if raw_stream is None:",
        "        raw_stream = torch.cuda.current_stream(device=device).cuda_stream",
    ]
    for t in tensors:
        lines.append(f"    {t}_desc = make_tensor_desc(ffi, {t}) if {t} is not None else ffi.NULL")
    call = [f"{t}_desc" for t in tensors]
    for s in scalars:
        if s in options:
            call.append(f"_AUTO_COMPILE_OPTION if {s} is None else int({s})")
        else:
            call.append(f"{casts[s]}({s})")
    call += ["int(device_id)", "int(raw_stream)"]
    lines.append(f"    rc = lib.{ffi.symbol}({', '.join(call)})")
    lines.append("    check_rc(rc, _FFI_NAME)")
    return "\n".join(lines)


def _first_given(tensors: list[str]) -> str:
    """The first tensor that is not None, as one expression (a generator costs a call's time)."""
    *given, last = tensors
    return "".join(f"{t} if {t} is not None else " for t in given) + last


def launcher_name(kernel: CarriedKernel) -> str:
    return f"_rs_launch_{kernel.wrapper_name.lstrip('_')}"


def _launcher(plan: LaunchPlan, kernel: CarriedKernel) -> str:
    grid, args, hints, stream, site = LAUNCH_PARAMS
    clash = set(kernel.params) & set(LAUNCH_PARAMS)
    if clash:
        raise CarryError(f"{kernel.name}'s parameters {sorted(clash)} clash with the launcher's own")
    exprs = {a.c_param: _launch_expr(a.expr) for a in kernel.args}
    ordered = [t.name for t in plan.ffi.tensors] + [s.name for s in plan.ffi.scalars]
    unpack = ", ".join(kernel.params) + ("," if len(kernel.params) == 1 else "")
    lines = [
        f"def {launcher_name(kernel)}({grid}, {args}, {hints}, {stream}, {site}):",
        f'    """The reference\'s {kernel.name}, launched as kernel.rs\'s {kernel.entry}."""',
        f"    {unpack} = {args}",
    ]
    body: list[str] = []
    if kernel.dtype_tensor and plan.ffi.dtype_generic:
        t = kernel.dtype_tensor
        body += [
            f"if {t}.dtype not in _DTYPES:",
            f'    raise NotImplementedError(f"cutile-rs {plan.op}: {kernel.entry} takes '
            f'{{_DTYPES}}, not {{{t}.dtype}}")',
        ]
    call = ", ".join(exprs[name] for name in ordered)
    body.append(f"{runtime.FFI_CALL}({call}, {stream})")
    if kernel.per_element:
        # kernel.rs takes one element of each list: one launch per element, the lists walked together
        lists = ", ".join(kernel.per_element)
        lines.append(
            "    # kernel.rs takes one element of each list: one launch per element, walked together"
        )
        lines.append(f"    for {lists} in zip({lists}, strict=True):")
        lines += ["        " + line for line in body]
    else:
        lines += ["    " + line for line in body]
    return "\n".join(lines)


def _launch_expr(expr: str) -> str:
    """A planned value over ``grid``, ``hints`` and ``site`` as the launcher names them."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("grid", "hints", "site"):
            node.id = "_" + node.id
    return ast.unparse(tree)


def _kernel_object(kernel: CarriedKernel) -> str:
    launcher = launcher_name(kernel) if kernel.entry else "None"
    hints = f", {kernel.hints!r}" if kernel.hints else ""
    return f'{kernel.wrapper_name} = {runtime.KERNEL_CLASS}("{kernel.name}", {launcher}{hints})'
