"""The carried-over wrapper's plan: the reference's host code is the wrapper's program.

The function the reference registers for the cuTile backend, and every module name it reaches
(helpers, autograd Functions, config generators, caches, imports), are carried over as code; only
what crosses the launch boundary is planned here: which kernel.rs entry ports each ``@ct.kernel``
the code launches, and each C argument's value over that kernel's parameters
(``carry_args``). Which names are carried is the module's semantic model's answer
(``infer.model.semantic``): the names the code reads in the module's scope, not a reading of
how it is spelled. A cuTile name with no counterpart in the table (``infer.model.known``) is
refused by name and line.
"""

from __future__ import annotations

import ast
import symtable
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.infer.model import known
from bot.infer.model.program import Program, Unit
from bot.infer.model.semantic import ModelError, ModuleModel
from bot.infer.naming import entry_key
from bot.plan import carry_args, carry_refusals, carry_shapes
from bot.plan.types import CarriedKernel, CarriedModule, CarryPlan, FfiPlan, MissingFact
from bot.read.types import Entry, KernelSignature
from bot.targets.discover import cutile_registration
from bot.targets.types import Source

# what carried host code says by running: the wrapper's values, and which entry each launch takes
_ANSWERED = ("python.", "ffi.variants", "ffi.sequence", "ffi.selector", "ffi.dispatch_key")


def answers(key: str) -> bool:
    """Whether a question of the plan is one the carried host code answers."""
    return key.startswith(_ANSWERED)


@dataclass
class Carried:
    plan: CarryPlan | None
    missing: list[MissingFact] = field(default_factory=list)  # C arguments nothing values
    refused: str = ""  # why the reference cannot be carried over (no plan)
    paired_scalars: dict[str, str] = field(
        default_factory=dict
    )  # kernel.rs scalars the launches pass -> where
    flags: list[str] = field(default_factory=list)  # C arguments the reference declares boolean


def plan(
    text: str,
    rel: str,
    module: str,
    register_name: str,
    signature: KernelSignature,
    ffi: FfiPlan,
    load: Callable[[str], tuple[str, str] | None] | None = None,
) -> Carried:
    """The carried wrapper for the reference ``text`` (the module at ``rel``), or what stops it.
    ``load``: a dotted module of the checkout -> (its source, its path), for helpers it imports."""
    try:
        model = ModuleModel.build(text, module, rel)
    except ModelError as exc:
        return _refused(str(exc))
    root = registered(model, register_name)
    if root is None:
        return _refused(f"{rel}: no module function registers {register_name!r} for the cuTile backend")
    program = Program(model, load or (lambda _module: None))
    units = program.reach(root.name)
    paths = {module: rel, **program.paths}
    refusals = [
        f"{paths[u.module]}: {why}"
        for u in units
        for why in foreign_names(program.model(u), [u.name], _satisfied_names(program, u.module))
    ]
    if refusals:
        return _refused("; ".join(dict.fromkeys(refusals[:4])))
    names = program.emitted_names(units)
    kernels = [u for u in units if program.bindings(u)[0].kind == "kernel"]
    if not kernels:
        return _refused(f"{rel}: {root.name}() reaches no @ct.kernel function it launches")
    sites = [
        site
        for m, model_m in program.models.items()
        for site in launch_sites(model_m, [u.name for u in units if u.module == m], m)
    ]
    passed = passed_names(sites)
    by_name = {names[u]: u for u in kernels}
    pairs = entries_of(program, by_name, signature.entries, ffi_derived(ffi, signature))
    carried: list[CarriedKernel] = []
    missing: list[MissingFact] = []
    paired: dict[str, str] = {}
    flags_of: dict[str, list[str]] = {}  # entry -> the C arguments its kernel declares boolean
    for wrapper_name, unit in by_name.items():
        kernel = program.bindings(unit)[0].stmt
        assert isinstance(kernel, ast.FunctionDef)
        where = f"{paths[unit.module]}:{kernel.lineno} {unit.name}"
        own = {
            "module": "" if unit.module == module else unit.module,
            "emitted": "" if wrapper_name == unit.name else wrapper_name,
        }
        entry = pairs.get(wrapper_name)
        if entry is None:
            src = Source("reference", f"{where}: no kernel.rs entry ports it; launching it raises")
            carried.append(CarriedKernel(unit.name, "", param_list(kernel), [], {}, "", src, **own))
            continue
        by_index = passed.get(wrapper_name, {})
        by_param = {p: by_index.get(str(i), {}) for i, p in enumerate(param_list(kernel))}
        mapped = carry_args.map_kernel(
            program.model(unit),
            kernel,
            entry,
            ffi,
            paths[unit.module],
            by_param,
            site_locals(sites, wrapper_name),
            carry_shapes.launched_scalars(
                lambda site: program.models[site.module],
                sites,
                wrapper_name,
                param_list(kernel),
                [p.name for p in entry.params if p.kind == "scalar"],
            ),
        )
        missing += mapped.missing
        paired = mapped.paired_scalars | paired  # the first kernel's pairing names it
        flags_of.setdefault(entry.name, []).extend(mapped.flags)
        src = Source("reference", f"{where} -> kernel.rs entry {entry.name} ({pairs.how})")
        carried.append(
            CarriedKernel(
                unit.name,
                entry.name,
                param_list(kernel),
                mapped.args,
                mapped.hints,
                mapped.dtype_tensor,
                src,
                site_values=mapped.site_values,
                per_element=mapped.per_element,
                **own,
            )
        )
    if not any(k.entry for k in carried):
        return _refused(
            f"{rel}: none of the kernels {root.name}() launches ({', '.join(by_name)}) is a kernel.rs entry "
            f"({', '.join(e.name for e in signature.entries)})"
        )
    primary = [u for u in units if u.module == module]
    where = Source(
        "reference", f"{rel}:{root.lineno} {root.name}() and the {len(units) - 1} module names it reaches"
    )
    carry = CarryPlan(
        rel,
        module,
        root.name,
        registration_name(model, root) or register_name,
        [u.name for u in primary if u.name != root.name],
        carried,
        where,
        helpers=[
            CarriedModule(
                program.paths[m],
                m,
                [u.name for u in units if u.module == m],
                _renames(names, [u for u in units if u.module == m]),
            )
            for m in dict.fromkeys(u.module for u in units)
            if m != module
        ],
        renames=_renames(names, primary),
        refused_by=carry_refusals.refused_by(
            program, units, {by_name[k.wrapper_name] for k in carried if not k.entry}
        ),
    )
    # in the order of the FFI's variants, as its launcher checks them
    flags = [f for v in ffi.variants for f in flags_of.get(v.entry, [])]
    return Carried(carry, missing, paired_scalars=paired, flags=list(dict.fromkeys(flags)))


def _renames(names: dict[Unit, str], units: list[Unit]) -> dict[str, str]:
    return {u.name: names[u] for u in units if names[u] != u.name}


def _satisfied_names(program: Program, module: str) -> set[str]:
    """The names of ``module`` bound to imports a carried helper stands for."""
    return {u.name for u in program.satisfied if u.module == module}


def _refused(why: str) -> Carried:
    return Carried(None, refused=why)


def registered(model: ModuleModel, name: str) -> ast.FunctionDef | None:
    """The module function registered for the cuTile backend under ``name`` (or its getter
    ``get_<name>``), by decorator or by the call ``register_impl(...)(fn)``."""
    wanted = (name, f"get_{name}")
    for stmt in model.tree.body:
        if isinstance(stmt, ast.FunctionDef) and any(
            cutile_registration(d) in wanted for d in stmt.decorator_list
        ):
            return stmt
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call) and node.args:
            if cutile_registration(node.func) in wanted and isinstance(node.args[0], ast.Name):
                binding = model.binding(node.args[0].id)
                if binding is not None and isinstance(binding.stmt, ast.FunctionDef):
                    return binding.stmt
    return None


def registration_name(model: ModuleModel, fn: ast.FunctionDef) -> str:
    """The name ``fn`` is registered under for the cuTile backend (``get_swiglu`` for a getter)."""
    for deco in fn.decorator_list:
        if (name := cutile_registration(deco)) is not None:
            return name
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call) and node.args:
            if isinstance(node.args[0], ast.Name) and node.args[0].id == fn.name:
                if (name := cutile_registration(node.func)) is not None:
                    return name
    return ""


def reached(model: ModuleModel, root: str) -> list[str]:
    """``root`` and every name of its module it reads, transitively, in the module's order."""
    return [u.name for u in Program(model, lambda _module: None).reach(root) if u.module == model.module]


def foreign_names(
    model: ModuleModel, names: list[str], skip: set[str] | frozenset[str] = frozenset()
) -> list[str]:
    """Why the carried code cannot run without the cuTile backend: each cuTile or cuTile-backend
    name it reads that the table has no counterpart for, with its line. (An import is judged where
    its name is read: ``import cuda.tile as ct`` is only the base of ``ct.launch``; ``skip``: names
    bound to imports whose helper is carried.)"""
    found: list[str] = []
    for name in names:
        for binding in model.bindings[name]:
            if binding.kind in ("kernel", "import"):
                continue
            for text, line, node in qualified_uses(model, binding.stmt):
                if _base(node) in skip:
                    continue
                use = known.resolve(text)
                if use.kind == "refuse":
                    found.append(f"line {line}: {use.text}")
            for node, _alias, text in nested_imports(model, binding.stmt):
                use = known.resolve(text)
                if use.kind == "refuse":
                    found.append(f"line {node.lineno}: {use.text}")
    return list(dict.fromkeys(found))


def nested_imports(model: ModuleModel, stmt: ast.stmt) -> list[tuple[ast.stmt, ast.alias, str]]:
    """(import statement, alias, qualified name) of each import inside a carried function
    (``from .utils import next_power_of_2`` in a helper's body), relative ones resolved against
    the module."""
    out = []
    for node in ast.walk(stmt):
        if node is stmt or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for alias in node.names:
            if isinstance(node, ast.ImportFrom):
                out.append((node, alias, f"{model.absolute(node.module, node.level)}.{alias.name}"))
            else:
                out.append((node, alias, alias.name))
    return out


def _base(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def qualified_uses(model: ModuleModel, stmt: ast.stmt) -> list[tuple[str, int, ast.expr]]:
    """(qualified name, line, node) of each outermost name or attribute chain ``stmt`` reads that resolves
    to an import of the cuTile world (``ct.cdiv`` -> ``cuda.tile.cdiv``)."""
    out: list[tuple[str, int, ast.expr]] = []
    inner = {id(sub) for annotation in annotations(stmt) for sub in ast.walk(annotation)}
    for node, scope in model.walk(stmt):
        if id(node) in inner or not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        if not isinstance(node.ctx, ast.Load):
            continue
        text = model.qualified(node, scope)
        if not text or not _cutile_world(text) or not _imported(model, node):
            continue
        out.append((text, node.lineno, node))
        inner.update(id(sub) for sub in ast.walk(node))
    return out


@dataclass
class Site:
    """One launch in the carried code: ``ct.launch`` or the exhaustive search's."""

    kernel: str  # the module kernel named at the site; "" when the kernel is a value computed there
    call: ast.Call
    scope: symtable.SymbolTable
    args: ast.expr | None  # the arguments as written (a lambda's body for the search)
    direct: bool  # ct.launch itself
    module: str = ""  # the module the site is in


def launch_sites(model: ModuleModel, names: list[str], module: str = "") -> list[Site]:
    """The launches in the statements binding ``names`` (``module``: tags the sites' kernels)."""
    sites: list[Site] = []
    for name in names:
        for binding in model.bindings[name]:
            if binding.kind in ("import", "kernel"):
                continue
            for node, scope in model.walk(binding.stmt):
                if not isinstance(node, ast.Call):
                    continue
                what = model.qualified(node.func, scope)
                if what == "cuda.tile.launch" and len(node.args) >= 4:
                    kernel, args, direct = node.args[2], node.args[3], True
                elif what == "cuda.tile.tune.exhaustive_search" and len(node.args) >= 5:
                    kernel, args, direct = node.args[3], node.args[4], False
                else:
                    continue
                if isinstance(args, ast.Lambda):
                    args = args.body
                target = None
                if isinstance(kernel, ast.Name) and model.is_module_name(kernel.id, scope):
                    target = model.binding(kernel.id)
                named = target.name if target is not None and target.kind == "kernel" else ""
                sites.append(Site(named, node, scope, args, direct, module))
    return sites


def passed_names(sites: list[Site]) -> dict[str, dict[str, dict[str, int]]]:
    """kernel -> parameter -> {name a launch hands it: line}, from the sites whose kernel is named
    there and whose arguments are a tuple written there."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for site in sites:
        if not site.kernel or not isinstance(site.args, ast.Tuple):
            continue
        for index, arg in enumerate(site.args.elts):
            if isinstance(arg, ast.Name):
                by_param = out.setdefault(site.kernel, {}).setdefault(str(index), {})
                by_param.setdefault(arg.id, site.call.lineno)
    return out


def site_locals(sites: list[Site], kernel: str) -> dict[str, int]:
    """The locals (parameters included) every launch that may run ``kernel`` has in its scope
    (name -> the first site's line): a kernel.rs scalar the kernel's parameters do not give can be
    the reference's own local of its name, passed from the site. A launch or search of ``kernel``
    may run it, and so may one whose kernel is a computed value (a tuned kernel from a cache)."""
    own = [s for s in sites if s.kernel in (kernel, "")]
    if not any(s.kernel == kernel for s in own):
        return {}
    common: set[str] | None = None
    for site in own:
        if site.scope.get_type() != "function":
            return {}
        names = {
            sym.get_name()
            for sym in site.scope.get_symbols()
            if sym.is_local() and (sym.is_assigned() or sym.is_parameter())
        }
        common = names if common is None else common & names
    first = next(s for s in own if s.kernel == kernel)
    return dict.fromkeys(sorted(common or ()), first.call.lineno)


def annotations(stmt: ast.stmt) -> list[ast.expr]:
    """The parameter and return annotations of the functions in ``stmt``: they document, they do
    not run (the carried code drops those that name cuTile types, ``compute_type: ct.DType``)."""
    found: list[ast.expr] = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            found.append(node.returns)
    return found


def _imported(model: ModuleModel, node: ast.expr) -> bool:
    """Whether the chain's base name is bound by an import (not one of the module's own names)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    binding = model.binding(node.id) if isinstance(node, ast.Name) else None
    return binding is not None and binding.kind == "import"


def _cutile_world(qualified: str) -> bool:
    return any(
        qualified == root or qualified.startswith(root + ".")
        for root in (known.CUDA_TILE, known.CUTILE_BACKEND)
    )


class _Pairs(dict):
    how = ""


def entries_of(
    program: Program,
    kernels: dict[str, Unit],
    entries: list[Entry],
    derived: set[str] | frozenset[str] = frozenset(),
) -> _Pairs:
    """Each launched kernel's kernel.rs entry (``kernels``: the wrapper's name -> its unit): by name
    (``_x_kernel`` ~ ``x_kernel``); an entry no name pairs goes to the one unpaired kernel whose
    parameters all pair with the entry's."""
    pairs = _Pairs()
    by_key = {entry_key(e.name): e for e in entries}
    for name, unit in kernels.items():
        if entry_key(unit.name) in by_key:
            pairs[name] = by_key[entry_key(unit.name)]
    hows = ["the same name"] if pairs else []
    for entry in entries:
        if entry in pairs.values():
            continue
        fits = [
            k for k, unit in kernels.items() if k not in pairs and _pairs_fully(program, unit, entry, derived)
        ]
        if len(fits) == 1:
            pairs[fits[0]] = entry
            hows.append(f"{entry.name}: the one kernel whose parameters all pair with it")
    pairs.how = "; ".join(hows)
    return pairs


def ffi_derived(ffi: FfiPlan, signature: KernelSignature) -> set[str]:
    """The values ffi.rs derives from descriptors, by their own names and by the kernel.rs
    parameters and generics they feed (matmul's `cast_tf32` and the generic `CAST_TF32`): no cuTile
    parameter is their counterpart."""
    names = {d.name for d in ffi.derived}
    entries = {e.name: e for e in signature.entries}
    fed = set()
    for v in ffi.variants:
        entry = entries.get(v.entry)
        if entry is None:
            continue
        for g, expr in zip(entry.generics, v.generics, strict=False):
            if expr in names:
                fed.add(g.name)
        for param, expr in zip(entry.params, v.args, strict=False):
            if expr in names:
                fed.add(param.name)
    return names | fed


def _pairs_fully(program: Program, unit: Unit, entry: Entry, derived: set[str] | frozenset[str]) -> bool:
    """Whether every tensor parameter and const generic of ``entry`` (but those the FFI derives
    from descriptors) pairs with one of the kernel's. A runtime scalar need not: the reference may
    compute it at the launch and not pass it (a local of the site, or asked for by name)."""
    kernel = program.bindings(unit)[0].stmt
    assert isinstance(kernel, ast.FunctionDef)
    pairs, _how = carry_args.pair_params(program.model(unit), kernel, entry, derived=derived)
    wanted = {p.name for p in entry.params if p.kind != "scalar"}
    wanted |= {g.name for g in entry.generics if g.kind == "const"}
    return bool(pairs) and wanted - set(derived) <= set(pairs.values())


def param_list(kernel: ast.FunctionDef) -> list[str]:
    return [a.arg for a in kernel.args.posonlyargs + kernel.args.args]
