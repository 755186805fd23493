"""One cuTile kernel's launch on its kernel.rs entry: each C argument of the symbol valued over the
kernel's own parameters (what the reference's launch hands it), the launch's grid and the
kernel's hints.

The pairing of the cuTile kernel's parameters with the entry's is made by the mechanisms the
reader has, each recorded: a generic's twin name (``TILE_D`` ~ ``BLOCK_D``), the parameter's own
name (case aside, ``X`` ~ ``x_ptr``, its words in any order), position when exactly one split of
the parameters into kernel.rs's runtime run and its generics fits (``by_position``), and the one
tensor each kernel takes. A C argument nothing pairs is asked for, never guessed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

from bot.infer import by_position
from bot.infer.list_params import element_twin, list_elements
from bot.infer.model.semantic import ModuleModel
from bot.infer.syntax import bool_params, generic_twin, plain_assign
from bot.plan.types import CarriedArg, CScalar, FfiPlan, MissingFact, Variant
from bot.read.types import Entry
from bot.targets.types import Source

# a cuTile hint -> the compile option (C argument) that carries it
HINTS = {"num_ctas": "num_cta_in_cga", "occupancy": "occupancy"}
_WHEN = re.compile(r"^\s*(?P<name>\w+)\s*(?P<op>==|!=)\s*(?P<value>-?\d+)\s*$")


@dataclass
class Mapped:
    args: list[CarriedArg] = field(default_factory=list)
    hints: dict[str, int] = field(default_factory=dict)
    dtype_tensor: str = ""
    missing: list[MissingFact] = field(default_factory=list)
    site_values: list[str] = field(default_factory=list)  # locals each launch site passes along
    per_element: list[str] = field(default_factory=list)  # list parameters walked together, one launch each
    # kernel.rs scalars a parameter pairs with -> where (the launch line and the parameter)
    paired_scalars: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # C arguments a boolean parameter feeds (0 or 1)


def map_kernel(
    model: ModuleModel,
    kernel: ast.FunctionDef,
    entry: Entry,
    ffi: FfiPlan,
    rel: str,
    passed: dict[str, dict[str, int]] | None = None,
    site_locals: dict[str, int] | None = None,
    launched: dict[str, tuple[str, int]] | None = None,
) -> Mapped:
    """``passed``: per parameter, the names the carried code's launches hand it (name -> line);
    ``site_locals``: the locals every launch site of the kernel has (name -> line); ``launched``:
    the locals its launches hold over the tensors they pass (name -> (expression over the kernel's
    parameters, line): ``carry_shapes``)."""
    pairs, how = pair_params(
        model, kernel, entry, passed, {d.name for d in ffi.derived}, set(site_locals or {})
    )
    of_place = {place: ref for ref, place in pairs.items()}
    variant = next(v for v in ffi.variants if v.entry == entry.name)
    own = {p.name for p in entry.params}
    generics = {g.name for g in entry.generics if g.kind == "const"}
    flags = bool_params(kernel)
    where = f"{rel}:{kernel.lineno} {kernel.name}"
    out = Mapped(hints=decorator_hints(model, kernel))
    out.per_element = [ref for ref in list_elements(kernel) if ref in pairs and pairs[ref] in own]
    out.paired_scalars = {
        p.name: _pairing(rel, where, of_place[p.name], p.name, (passed or {}).get(of_place[p.name], {}))
        for p in entry.params
        if p.kind == "scalar" and p.name in of_place
    }

    def add(c_param: str, expr: str, why: str) -> None:
        out.args.append(CarriedArg(c_param, expr, Source("reference", f"{where}: {why}")))

    def ask(c_param: str, what: str) -> None:
        out.missing.append(
            MissingFact(
                f"python.args.{c_param}",
                f"the value of C argument `{c_param}` ({what}) when the reference launches {kernel.name}",
                [f"{where}: none of its parameters ({', '.join(pairs) or 'none'}) pairs with it"],
            )
        )
        add(c_param, "0", "asked for")

    for t in ffi.tensors:
        ref = of_place.get(t.param)
        if t.param not in own:
            add(t.name, "None", f"{entry.name} takes no `{t.param}`")
        elif ref is None:
            ask(t.name, f"the tensor kernel.rs's `{t.param}` takes")
        else:
            add(t.name, ref, f"parameter {ref} -> kernel.rs `{t.param}`{how.get(ref, '')}")
    dtype_ref = next((a.expr for a in out.args if a.c_param == ffi.dtype_from), "")
    out.dtype_tensor = dtype_ref if dtype_ref != "None" else ""
    for s in _as_this_entry_reads(ffi, variant, entry):
        if s.role == "runtime_scalar":
            local = (site_locals or {}).get(s.feeds)
            if s.feeds in own and s.feeds not in of_place and local is not None:
                # kernel.rs's `n_elements`, the reference's own local at its launch, passed nowhere else
                cast = "float" if s.ctype == "f32" else "int"
                out.site_values.append(s.feeds)
                add(
                    s.name,
                    f"{cast}(site[{s.feeds!r}])",
                    f"the reference's own `{s.feeds}` at its launch (line {local})",
                )
                continue
            over_tensors = (launched or {}).get(s.feeds)
            _scalar(s.name, s.feeds, s.ctype, own, of_place, kernel, how, add, ask, entry.name, over_tensors)
        elif s.role == "generic":
            if s.feeds not in generics:
                add(s.name, "0", f"{entry.name} has no generic `{s.feeds}`")
            elif (ref := of_place.get(s.feeds)) is not None:
                value = f"int(bool({ref}))" if ref in flags else f"int({ref})"
                if ref in flags:
                    out.flags.append(s.name)
                add(s.name, value, f"parameter {ref} -> generic `{s.feeds}`{how.get(ref, '')}")
            elif (local := kernel_local(kernel, s.feeds)) is not None:
                add(s.name, f"int({local})", f"{kernel.name}'s own `{s.feeds.lower()}` over its parameters")
            else:
                ask(s.name, f"generic `{s.feeds}`")
        elif s.role == "grid":
            _grid(s.name, variant, add)
        elif s.role == "compile_option":
            hint = next(h for h, option in HINTS.items() if option == s.name)
            add(s.name, f"hints.get({hint!r})", f"the kernel's `{hint}` hint (none: the compiler's default)")
        elif s.role == "selector":
            value = selector_value(s.name, variant, ffi.variants)
            if value is None:
                ask(s.name, f"the selector of {entry.name}")
            else:
                add(s.name, str(value), f"selects {entry.name} (when {variant.when})")
    return out


def _as_this_entry_reads(ffi: FfiPlan, variant: Variant, entry: Entry) -> list[CScalar]:
    """The C scalars with the role each has for ``entry``: one C argument may be one entry's
    runtime scalar and another's generic (flash_decode's `b`: a scalar of the attention kernel, the
    generic `B` of splitk_reduce's), and a launch of each passes what its own entry reads."""
    generic_of = {
        expr: g.name for g, expr in zip(entry.generics, variant.generics, strict=False) if g.kind == "const"
    }
    param_of = {
        expr: p.name for p, expr in zip(entry.params, variant.args, strict=False) if p.kind == "scalar"
    }
    out = []
    for s in ffi.scalars:
        if s.role in ("runtime_scalar", "generic") and s.name in param_of:
            s = replace(s, role="runtime_scalar", feeds=param_of[s.name])
        elif s.role in ("runtime_scalar", "generic") and s.name in generic_of:
            s = replace(s, role="generic", feeds=generic_of[s.name])
        out.append(s)
    return out


def _scalar(
    c_name, feeds, ctype, own, of_place, kernel, how, add, ask, entry_name, over_tensors=None
) -> None:
    cast = "float" if ctype == "f32" else "int"
    if feeds not in own:
        add(c_name, "0", f"{entry_name} takes no `{feeds}`")
    elif (ref := of_place.get(feeds)) is not None:
        add(c_name, f"{cast}({ref})", f"parameter {ref} -> kernel.rs `{feeds}`{how.get(ref, '')}")
    elif (local := kernel_local(kernel, feeds)) is not None:
        add(c_name, f"{cast}({local})", f"{kernel.name}'s own `{feeds}` over its parameters")
    elif over_tensors is not None:
        expr, line = over_tensors
        add(
            c_name,
            f"{cast}({expr})",
            f"the reference's own `{feeds}` at its launch (line {line}), over the tensors it launches",
        )
    else:
        ask(c_name, f"kernel.rs's scalar `{feeds}`")


def _grid(c_name: str, variant: Variant, add) -> None:
    if c_name in variant.grid:
        axis = variant.grid.index(c_name)
        add(c_name, f"grid[{axis}]", f"the launch's grid, axis {axis}")
    else:
        add(c_name, "1", f"{variant.entry} does not read it")


def selector_value(name: str, variant: Variant, variants: list[Variant]) -> int | None:
    """The selector value for which ``variant``'s condition holds and no earlier one's does."""
    if variant.when == "always":
        return 0
    conditions = [_WHEN.match(v.when) for v in variants if v.when not in ("else", "always")]
    if any(m is None or m.group("name") != name for m in conditions):
        return None
    if variant.when == "else":
        taken = {int(m.group("value")) for m in conditions if m.group("op") == "=="}
        if any(m.group("op") == "!=" for m in conditions):
            return 0 if all(int(m.group("value")) == 0 for m in conditions if m.group("op") == "!=") else None
        return next(v for v in range(len(variants) + 1) if v not in taken)
    match = _WHEN.match(variant.when)
    assert match is not None
    value = int(match.group("value"))
    return value if match.group("op") == "==" else (1 if value == 0 else 0)


def pair_params(
    model: ModuleModel,
    kernel: ast.FunctionDef,
    entry: Entry,
    passed: dict[str, dict[str, int]] | None = None,
    derived: set[str] | frozenset[str] = frozenset(),
    site_names: set[str] | frozenset[str] = frozenset(),
) -> tuple[dict[str, str], dict[str, str]]:
    """(cuTile parameter -> kernel.rs parameter or const generic, parameter -> how, when not by its
    own name). A parameter its own name leaves unpaired is paired through the one name the
    launches hand it, when that name is a kernel.rs parameter's (``N`` given ``n_elements``)."""
    refs = [a.arg for a in kernel.args.posonlyargs + kernel.args.args]
    generics = {g.name for g in entry.generics if g.kind == "const"}
    pairs: dict[str, str] = {}
    how: dict[str, str] = {}
    tensors = [p.name for p in entry.params if p.kind in ("tensor", "ptr")]
    for ref, item in list_elements(kernel).items():
        twin = element_twin(ref, item, tensors)
        if twin is not None:
            pairs[ref], how[ref] = (
                twin,
                f" (a list: kernel.rs takes one element, `{item}`, launched once per element)",
            )
    for ref in refs:
        if ref in pairs:
            continue
        twin = generic_twin(ref, generics) or next((g for g in generics if g.lower() == ref.lower()), None)
        if twin is not None:
            pairs[ref] = twin
    by_name = _by_name(entry)
    for ref in refs:
        if ref not in pairs and (param := by_name(ref)) is not None and param not in pairs.values():
            pairs[ref] = param
    for ref in refs:
        if ref in pairs:
            continue
        found = {
            param: line
            for name, line in sorted((passed or {}).get(ref, {}).items())
            if (param := by_name(name)) is not None and param not in pairs.values()
        }
        if len(found) == 1:
            ((param, line),) = found.items()
            pairs[ref], how[ref] = param, f" (the launch at line {line} passes `{param}` there)"
    if len(pairs) < len(refs):
        functions = {
            n: b[-1].stmt for n, b in model.bindings.items() if isinstance(b[-1].stmt, ast.FunctionDef)
        }
        placed = by_position.align(kernel, entry, dict(pairs), functions)
        if placed is not None:
            for ref, place in placed.items():
                if ref not in pairs:
                    pairs[ref], how[ref] = place, f" ({by_position.HOW})"
        else:
            single = by_position.single_tensor(kernel, entry, functions)
            if single is not None and single[0] not in pairs and single[1] not in pairs.values():
                pairs[single[0]], how[single[0]] = single[1], f" ({by_position.SINGLE})"
        _by_role(kernel, entry, functions, pairs, how)
        # a kernel.rs scalar the launch sites' own locals give is not left for pairing
        _one_left(kernel, entry, functions, set(derived) | set(site_names), pairs, how)
    return pairs, how


def _by_role(
    kernel: ast.FunctionDef, entry: Entry, functions, pairs: dict[str, str], how: dict[str, str]
) -> None:
    """The tensors names leave: the one each kernel writes with each other, the one each only
    reads with each other (``input, output`` ~ ``in_ptr, out_ptr``)."""
    kinds = by_position.reference_kinds(kernel, functions)
    uses = by_position.array_uses(kernel, functions)
    refs = [r for r, kind in kinds.items() if kind == "tensor" and r not in pairs]
    rs = [p.name for p in entry.params if p.kind in ("tensor", "ptr") and p.name not in pairs.values()]
    for written in (True, False):
        mine = [r for r in refs if (uses.get(r) == "write") == written]
        theirs = [p for p in rs if (p in entry.outputs) == written]
        if len(mine) == 1 and len(theirs) == 1:
            role = "written" if written else "read"
            pairs[mine[0]], how[mine[0]] = (
                theirs[0],
                f" (the one tensor each kernel has {role} that no name pairs)",
            )


def _one_left(
    kernel: ast.FunctionDef,
    entry: Entry,
    functions,
    derived: set[str],
    pairs: dict[str, str],
    how: dict[str, str],
) -> None:
    """The one scalar parameter each side has left when everything else is paired (kernel.rs's
    values the FFI derives from descriptors aside), of the same kind: no order to guess."""
    kinds = by_position.reference_kinds(kernel, functions)
    refs = [r for r, kind in kinds.items() if r not in pairs]
    places = [
        (name, kind, generic)
        for name, kind, generic in by_position.kernel_rs_places(entry)
        if name not in pairs.values() and name not in derived and kind != "tensor"
    ]
    if len(refs) != 1 or len(places) != 1:
        return
    (ref,), ((name, kind, generic),) = refs, places
    if kinds[ref] not in ("int", "float") or kind != kinds[ref]:
        return
    if ref in bool_params(kernel) and not generic:
        return  # a flag is a generic's value, never a count
    pairs[ref], how[ref] = name, " (the one parameter each kernel has left)"


def _by_name(entry: Entry):
    by_lower = {p.name.lower(): p.name for p in entry.params}
    by_words: dict[tuple[str, ...], list[str]] = {}
    for p in entry.params:
        by_words.setdefault(_words(p.name), []).append(p.name)

    def named(name: str) -> str | None:
        base = name.lower().removesuffix("_ptr")  # `a_ptr` names the tensor `a` as kernel.rs's `a_ptr` does
        exact = by_lower.get(name.lower()) or by_lower.get(f"{base}_ptr") or by_lower.get(base)
        if exact is not None:
            return exact
        same = by_words.get(_words(name), []) or by_words.get(_words(f"{name}_ptr"), [])
        return same[0] if len(same) == 1 else None

    return named


def _words(name: str) -> tuple[str, ...]:
    return tuple(sorted(w for w in name.lower().split("_") if w))


def kernel_local(kernel: ast.FunctionDef, name: str) -> str | None:
    """A value the cuTile kernel computes in its body from its parameters alone, by arithmetic
    (``total = N * N`` for kernel.rs's ``TOTAL``): that expression, over the same names."""
    params = {a.arg for a in kernel.args.args}
    for stmt in kernel.body:
        if plain_assign(stmt) and stmt.targets[0].id.lower() == name.lower():
            allowed = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load)
            nodes = list(ast.walk(stmt.value))
            if all(isinstance(n, allowed) for n in nodes) and all(
                n.id in params for n in nodes if isinstance(n, ast.Name)
            ):
                return ast.unparse(stmt.value)
    return None


def decorator_hints(model: ModuleModel, kernel: ast.FunctionDef) -> dict[str, int]:
    """``@ct.kernel(occupancy=2)``: the literal hints the kernel is compiled with."""
    out: dict[str, int] = {}
    for deco in kernel.decorator_list:
        if isinstance(deco, ast.Call) and model.qualified(deco.func, module_scope=True) == "cuda.tile.kernel":
            for kw in deco.keywords:
                if kw.arg in HINTS and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int):
                    out[kw.arg] = kw.value.value
    return out


def _pairing(rel: str, where: str, ref: str, scalar: str, names: dict[str, int]) -> str:
    """Where kernel.rs's ``scalar`` pairs with the cuTile parameter ``ref``: the first launch line
    that hands it a value, else the kernel's definition."""
    if names:
        return f"{rel}: ct.launch:{min(names.values())} argument {ref} -> scalar {scalar}"
    return f"{where}: parameter {ref} -> scalar {scalar}"
