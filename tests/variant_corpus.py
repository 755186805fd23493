"""A corpus of kernel-signature variants of our own, generated from the kernels we have.

Each kernel of ``tests/fixtures/tilegym_ops`` and each of the five cutile-rs ops of the
tilegym 1.5.1 wheel is rewritten, deterministically, into variants nobody wrote by hand:

- ``renamed``: every parameter and generic of the file gets a name of no meaning (``zarg3``,
  ``ZGEN1``, ``ZTY0``), body included; no new name is one the reference module uses, and no naming
  convention (``<t>_ptr``, ``<t>_row_stride``, GEMM letters, ``TILE_*``) applies to it;
- ``reordered``: each entry's tensors reversed among the tensor places, its scalars among the
  scalar places (outputs stay outputs: the reader finds them in the body);
- ``extra_scalar``: a count the reference's host program computes from a shape
  (``.shape``/``numel()``/``size()``, read with the semantic model: the registered function, then
  the functions it calls, then what else it reaches) that kernel.rs does not name yet, added last to the first entry under
  the reference's name and read once in the body;
- ``tensor_as_ptr`` / ``ptr_as_tensor``: the first input ``&Tensor`` of the first entry as
  ``*mut E``, or the first input ``*mut E`` as ``&Tensor<E, {[-1, -1]}>``. Signature only: the body
  is not rewritten (it would not compile, syn still parses it), so these say what the planner
  makes of the form alone.

Each variant carries the map from its names back to the original's, and ``normal_plan`` turns a
plan into data with those names mapped back, so a variant's plan can be compared with the
original's as data.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from rust_edit import (
    find_entry,
    identifiers,
    join,
    rename,
    split_params,
    tokens,
    with_params,
    without_comments,
)

from bot.infer import naming
from bot.plan.types import LaunchPlan
from bot.read.types import KernelSignature, Param

KINDS = ("renamed", "reordered", "extra_scalar", "tensor_as_ptr", "ptr_as_tensor")


@dataclass
class Variant:
    op: str
    kind: str
    kernel_rs: str
    names: dict[str, str] = field(default_factory=dict)  # variant's kernel name -> the original's
    extra: str = ""  # extra_scalar: the added parameter (the reference's name for the count)
    form: str = ""  # tensor_as_ptr / ptr_as_tensor: the parameter whose form changed
    note: str = ""


# --------------------------------------------------------------------------- names of the reference


def reference_names(path: Path) -> set[str]:
    """Every identifier the reference module spells (names, parameters, attributes, functions),
    lowercased, and each one's words (``TILE_SIZE`` gives ``tile``, ``size``)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        for attr in ("id", "arg", "attr", "name"):
            value = getattr(node, attr, None)
            if isinstance(value, str):
                found.add(value.lower())
    return found | {w for n in found for w in n.split("_") if w}


def _fresh(prefix: str, taken: set[str], start: int) -> tuple[str, int]:
    i = start
    while f"{prefix}{i}".lower() in taken:
        i += 1
    return f"{prefix}{i}", i + 1


# --------------------------------------------------------------------------- the variants


def renamed(op: str, text: str, sig: KernelSignature, ref_names: set[str]) -> Variant:
    toks = without_comments(tokens(text))
    taken = {n.lower() for n in identifiers(text)} | ref_names
    names: dict[str, str] = {}
    counters = {"zarg": 0, "ZGEN": 0, "ZTY": 0}
    for entry in sig.entries:
        for g in entry.generics:
            prefix = "ZTY" if g.kind == "type" else "ZGEN"
            if g.name not in names:
                names[g.name], counters[prefix] = _fresh(prefix, taken, counters[prefix])
        for p in entry.params:
            if p.name not in names:
                names[p.name], counters["zarg"] = _fresh("zarg", taken, counters["zarg"])
    for new in names.values():
        assert new.lower() not in ref_names, new
    return Variant(op, "renamed", join(rename(toks, names)), {v: k for k, v in names.items()})


def reordered(op: str, text: str, sig: KernelSignature) -> Variant | None:
    toks = without_comments(tokens(text))
    changed = False
    for entry in sig.entries:  # the token positions move with each entry rewritten: find it again
        where = find_entry(toks, entry.name)
        texts = split_params(toks, where)
        kinds = ["tensor" if p.kind in ("tensor", "ptr", "partition") else "scalar" for p in entry.params]
        new = list(texts)
        for kind in ("tensor", "scalar"):
            places = [i for i, k in enumerate(kinds) if k == kind]
            for i, j in zip(places, reversed(places), strict=True):
                new[i] = texts[j]
        if new != texts:
            changed = True
            toks = with_params(toks, where, new)
    if not changed:
        return None
    return Variant(op, "reordered", join(toks), note="tensors and scalars each reversed in place")


_COUNT = re.compile(r"(int\()?[A-Za-z_]\w*(\.shape\[-?\d+\]|\.numel\(\)|\.size\(-?\d+\))\)?")
_SHAPE = re.compile(r"[A-Za-z_]\w*\.shape")  # unpacked: `a, b = x.shape`


def program_counts(path: Path, dispatch: str, module: str) -> list[str]:
    """Counts the reference's host program binds from a shape (``n_elements = x.numel()``,
    ``batch_size, n_heads, seq, d = q.shape``): in the function registered for
    the cuTile backend first, then in each function it calls, in the order of the calls (an autograd
    Function's ``apply`` calls its ``forward``), then the functions and methods it reaches
    otherwise (a getter's returned class), each in source order. Read with the semantic model
    of the reference, so the corpus does not depend on which of agent-d's readers planned it."""
    from bot.infer.model.program import Program
    from bot.infer.model.semantic import ModuleModel
    from bot.plan.carry import registered

    model = ModuleModel.build(path.read_text(encoding="utf-8"), module, str(path))
    root = registered(model, dispatch)
    if root is None:
        return []
    order: list[ast.FunctionDef] = []
    todo = [root]
    while todo:
        fn = todo.pop(0)
        if fn in order:
            continue
        order.append(fn)
        calls = sorted(
            (n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset)
        )
        todo += [callee for call in calls if (callee := _called_function(model, call)) is not None]
    # then what it reaches otherwise (a getter's returned class and its methods), in source order
    for unit in Program(model, lambda _module: None).reach(root.name):
        binding = model.binding(unit.name)
        if binding is not None and binding.kind == "function" and binding.stmt not in order:
            order.append(binding.stmt)
        elif binding is not None and binding.kind == "class":
            order += [s for s in binding.stmt.body if isinstance(s, ast.FunctionDef) and s not in order]
    found: list[str] = []
    for fn in order:
        assigns = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign)), key=lambda a: a.lineno)
        for node in assigns:
            for name in _counts_bound(node):
                if not name.startswith("_") and name not in found:
                    found.append(name)
    return found


def _called_function(model, call: ast.Call) -> ast.FunctionDef | None:
    """The module function a call runs, or the autograd Function's ``forward`` it runs."""
    from bot.plan.carry_refusals import called

    runs = called(model, call)
    binding = model.binding(runs[0]) if runs is not None else None
    if binding is None:
        return None
    if not runs[1]:
        return binding.stmt if binding.kind == "function" else None
    if binding.kind != "class":
        return None
    return next((s for s in binding.stmt.body if isinstance(s, ast.FunctionDef) and s.name == runs[1]), None)


def _counts_bound(node: ast.Assign) -> list[str]:
    """The names an assignment binds to a count read off a shape."""
    if len(node.targets) != 1:
        return []
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Name):
        return [target.id] if _COUNT.fullmatch(ast.unparse(value)) else []
    if not isinstance(target, ast.Tuple) or not all(isinstance(e, ast.Name) for e in target.elts):
        return []
    names = [e.id for e in target.elts]
    if _SHAPE.fullmatch(ast.unparse(value)):  # a, b = x.shape
        return names
    if isinstance(value, ast.Tuple) and len(value.elts) == len(names):
        return [n for n, v in zip(names, value.elts, strict=True) if _COUNT.fullmatch(ast.unparse(v))]
    return []


def extra_scalar(
    op: str, text: str, sig: KernelSignature, plan: LaunchPlan, counts: list[str]
) -> Variant | None:
    """``counts``: the reference program's counts (``program_counts``); the first that kernel.rs
    does not name already, as a parameter, a generic's C argument or a C name of its launcher."""
    kernel_names = identifiers(text)
    generic_args = {naming.generic_arg_name(g.name)[0] for e in sig.entries for g in e.generics}
    c_names = {s.name for s in plan.ffi.scalars} | {t.name for t in plan.ffi.tensors}
    names = [
        n
        for n in counts
        if n not in kernel_names
        and n.lower() not in generic_args
        and n not in naming.RESERVED_C_NAMES
        and n not in c_names
    ]
    if not names:
        return None
    name = names[0]
    toks = without_comments(tokens(text))
    entry = sig.entries[0]
    where = find_entry(toks, entry.name)
    params = split_params(toks, where) + [f"{name}: i32"]
    toks = with_params(toks, where, params, body_prefix=f"let _ = {name};")
    return Variant(op, "extra_scalar", join(toks), extra=name, note=f"{entry.name} also takes {name}: i32")


def pointer_forms(op: str, text: str, sig: KernelSignature) -> list[Variant]:
    """The first input tensor of the first entry as a raw pointer, or the first input raw
    pointer as a rank-2 tensor; the parameter's name and the body unchanged."""
    entry = sig.entries[0]
    out: list[Variant] = []
    for kind, want, new_type in (
        ("tensor_as_ptr", "tensor", "*mut {elem}"),
        ("ptr_as_tensor", "ptr", "&Tensor<{elem}, {{ [-1, -1] }}>"),
    ):
        param = next((p for p in entry.params if p.kind == want and p.name not in entry.outputs), None)
        if param is None:
            continue
        toks = without_comments(tokens(text))
        where = find_entry(toks, entry.name)
        params = split_params(toks, where)
        i = [p.name for p in entry.params].index(param.name)
        params[i] = f"{param.name}: {new_type.format(elem=param.elem)}"
        out.append(
            Variant(
                op,
                kind,
                join(with_params(toks, where, params)),
                form=param.name,
                note=f"{param.name} as {new_type.format(elem=param.elem)}, body unchanged",
            )
        )
    return out


# --------------------------------------------------------------------------- plans as data


def c_names(
    plan: LaunchPlan, sig: KernelSignature, names: dict[str, str], original: KernelSignature
) -> dict[str, str]:
    """Variant name -> original name, for the kernel's names and the C names made from them
    (``ZGEN1`` -> ``zgen1`` is ``tile_size``; ``zarg0`` -> ``out`` for ``out_ptr``), a later
    launch's numbered C arguments as the original's are numbered (flash_decode's ``b`` and ``B``
    meet as ``b``, ``b_2``; renamed, they do not meet)."""
    out = dict(names)
    for entry in sig.entries:
        for p in entry.params:
            if p.name in names and p.kind in ("tensor", "ptr"):
                new_c, new_bind, _ = naming.c_tensor_name(p)
                old = Param(names[p.name], p.kind, p.elem, p.rank, p.ty, p.mutable)
                old_c, old_bind, _ = naming.c_tensor_name(old)
                out[new_c], out[new_bind] = old_c, old_bind
    order = [v.entry for v in plan.ffi.variants] if plan.ffi.sequence else [e.name for e in sig.entries]
    new_c, old_c = _scalar_c_names(sig, order), _scalar_c_names(original, order)
    for (entry, name), c in new_c.items():
        old = old_c.get((entry, names.get(name, name)))
        if old is not None:
            out[c] = old
    return out


def _scalar_c_names(sig: KernelSignature, order: list[str]) -> dict[tuple[str, str], str]:
    """(entry, kernel name or grid name) -> its C argument, numbered as the planner numbers a sequence's."""
    by_name = {e.name: e for e in sig.entries}
    entries = [by_name[n] for n in order]
    renames = naming.sequence_names(entries) if len(entries) > 1 else [{} for _ in entries]
    out: dict[tuple[str, str], str] = {}
    for entry, numbered in zip(entries, renames, strict=True):
        for g in entry.generics:
            if g.kind == "const":
                base = naming.generic_arg_name(g.name)[0]
                out[(entry.name, g.name)] = numbered.get(base, base)
        for p in entry.params:
            if p.kind == "scalar":
                out[(entry.name, p.name)] = numbered.get(p.name, p.name)
        for grid in naming.grid_arg_names(entry):
            out[(entry.name, grid)] = numbered.get(grid, grid)
    return out


def _map_text(text: str, names: dict[str, str]) -> str:
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: names.get(m.group(), m.group()), text)


def _mapped(value, names: dict[str, str]):
    if isinstance(value, str):
        return _map_text(value, names)
    if isinstance(value, dict):
        return {_mapped(k, names): _mapped(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mapped(v, names) for v in value]
    return value


def normal_plan(
    plan: LaunchPlan, sig: KernelSignature, names: dict[str, str], original: KernelSignature
) -> dict:
    """The plan as data, names mapped back, sources left out, and what the kernel's parameter
    order alone decides read as the same thing:

    - C tensors, C scalars, derived values and wrapper arguments keyed by name (their order in the
      C signature follows kernel.rs's; the wrapper passes them in that order, whatever it is);
    - a launch's arguments keyed by the kernel parameter they feed;
    - the lists launched per element keyed by their C tensor (walked together, in any order);
    - ``dtype_from``: any input typed by the element generic (the FFI checks they all agree; so
      does ``cast_tf32(t)`` of it), and ``device_of`` likewise any tensor the wrapper packs (one
      device for all, checked by the launch).
    """
    names = c_names(plan, sig, names, original)
    d = _drop_sources(plan.to_dict())
    ffi, py = d["ffi"], d["python"]
    entries = {e.name: e for e in sig.entries}
    variants = []
    for v in ffi["variants"]:
        params = [p.name for p in entries[v["entry"]].params]
        v = dict(v)
        v["args"] = dict(zip(params, v["args"], strict=True))
        variants.append(v)
    ffi["variants"] = variants
    inputs_of_dtype = {
        t["name"] for t in ffi["tensors"] if t["role"] == "input" and t["elem"] == ffi["dtype_generic"]
    }
    if ffi["dtype_from"] in inputs_of_dtype:
        same = "<an input of the element generic>"
        ffi["derived"] = [
            dict(x, expr=x["expr"].replace(f"cast_tf32({ffi['dtype_from']})", f"cast_tf32({same})"))
            for x in ffi["derived"]
        ]
        ffi["dtype_from"] = same
    if py["device_of"] in set(py["tensors_py"].values()):
        py["device_of"] = "<a tensor the wrapper packs>"
    ffi["tensors"] = {t.pop("name"): t for t in ffi["tensors"]}
    ffi["scalars"] = {s.pop("name"): s for s in ffi["scalars"]}
    py["per_element"] = {e.pop("tensor"): e for e in py["per_element"]}
    ffi["derived"] = {x["name"]: x["expr"] for x in ffi["derived"]}
    if d["carry"]:  # carried: each kernel by name, each C argument's value by name
        for kernel in d["carry"]["kernels"]:
            kernel["args"] = {a["c_param"]: a["expr"] for a in kernel["args"]}
            # as dtype_from: any parameter handed to an input of the element generic
            dtype_inputs = {kernel["args"].get(t) for t in inputs_of_dtype}
            if kernel["dtype_tensor"] in dtype_inputs:
                kernel["dtype_tensor"] = "<an input of the element generic>"
        d["carry"]["kernels"] = {k.pop("name"): k for k in d["carry"]["kernels"]}
    d["missing"] = [m["key"] for m in d["missing"]]
    mapped = _mapped(d, names)
    # the checks in an order of the original's names: sorted by the variant's own names, two flag
    # checks (mla_decoding_split_kv's even_n and use_dot) would swap places when renamed
    mapped["ffi"]["checks"] = sorted(mapped["ffi"]["checks"], key=lambda c: sorted(c.items()))
    return mapped


def _drop_sources(value):
    if isinstance(value, dict):
        return {
            k: _drop_sources(v)
            for k, v in value.items()
            if k not in ("source", "sources", "tried", "question")
        }
    if isinstance(value, list):
        return [_drop_sources(v) for v in value]
    return value


def without_extra(data: dict, c_arg: str, param: str) -> dict:
    """``data`` less the extra scalar: its C argument, its wrapper value, the launch argument."""
    data = _copy(data)
    data["ffi"]["scalars"].pop(c_arg, None)
    data["python"]["ffi_args"].pop(c_arg, None)
    for v in data["ffi"]["variants"]:
        v["args"].pop(param, None)
    for kernel in (data["carry"] or {}).get("kernels", {}).values():  # carried: the launch site's own local
        kernel["args"].pop(c_arg, None)
        kernel["site_values"] = [n for n in kernel["site_values"] if n != param]
    return data


def with_form_aside(data: dict, c_tensor: str, param: str) -> dict:
    """``data`` with the converted parameter's form left out: its C tensor's kind and rank, and
    ``ten(t)`` / ``ptr(t)`` around its launch argument."""
    data = _copy(data)
    tensor = data["ffi"]["tensors"].get(c_tensor)
    if tensor is not None:
        tensor.pop("kind"), tensor.pop("rank")
    for v in data["ffi"]["variants"]:
        if param in v["args"]:
            v["args"][param] = re.sub(r"^(ten|ptr)\(", "desc(", v["args"][param])
    return data


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def diff(a, b, path: str = "") -> list[str]:
    """Where two plans as data differ, one line each."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(dict.fromkeys([*a, *b])):
            if k not in a:
                out.append(f"{path}.{k}: only in the variant: {b[k]!r}"[:300])
            elif k not in b:
                out.append(f"{path}.{k}: only in the original: {a[k]!r}"[:300])
            else:
                out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if a != b:
        return [f"{path}: {a!r} != {b!r}"[:300]]
    return []


# --------------------------------------------------------------------------- the corpus, planned


@dataclass
class Outcome:
    result: str  # "same plan" | "asks" | "differs" | "stops"
    keys: list[str] = field(default_factory=list)  # asks: the keys asked
    detail: list[str] = field(default_factory=list)  # differs: where; stops: why


@dataclass
class Original:
    """An op's kernel.rs as the checkout has it, its signature and its plan."""

    text: str
    sig: KernelSignature
    plan: LaunchPlan


def original(repo: Path, op: str) -> Original:
    """The op's kernel.rs planned as a port plans it."""
    from bot.pipeline import make_plan
    from bot.read.reader import read_kernel
    from bot.targets.types import Target

    target = Target(repo, op)
    plan = make_plan(target, repo / "out" / op)[0]
    return Original(target.kernel_rs.read_text(), read_kernel(target.kernel_rs), plan)


def variants_of(repo: Path, op: str, orig: Original) -> list[Variant]:
    """The variants of ``op``'s kernel.rs in the checkout ``repo``, in ``KINDS`` order."""
    from bot.targets.discover import discover
    from bot.targets.types import Target
    from bot.testing.stage_tests import module_of

    found = discover(Target(repo, op))
    ref = found.reference
    ref_names = reference_names(repo / ref.path) if ref is not None else set()
    counts = (
        program_counts(repo / ref.path, found.dispatch_name, module_of(ref.path)) if ref is not None else []
    )
    made = [
        renamed(op, orig.text, orig.sig, ref_names),
        reordered(op, orig.text, orig.sig),
        extra_scalar(op, orig.text, orig.sig, orig.plan, counts),
    ]
    return [v for v in made if v is not None] + pointer_forms(op, orig.text, orig.sig)


def plan_variant(repo: Path, variant: Variant, orig: Original) -> Outcome:
    """``variant`` planned in ``repo`` (its kernel.rs written there, the original put back after),
    compared with the original's plan."""
    from bot.emit.soundness import check_plan
    from bot.errors import StageStop
    from bot.pipeline import make_plan
    from bot.read.reader import read_kernel
    from bot.targets.types import Target

    target = Target(repo, variant.op)
    try:
        target.kernel_rs.write_text(variant.kernel_rs)
        sig = read_kernel(target.kernel_rs)  # syn parses it
        try:
            plan = make_plan(target, repo / "out" / variant.op)[0]
        except StageStop as stop:
            return Outcome("stops", detail=[f"{stop.kind} {stop.klass}: {stop.reason}"])
    finally:
        target.kernel_rs.write_text(orig.text)
    if plan.missing:
        return Outcome("asks", keys=[m.key for m in plan.missing])
    check_plan(plan)  # a name the wrapper reads and nothing binds is agent-d's own bug
    before = normal_plan(orig.plan, orig.sig, {}, orig.sig)
    after = normal_plan(plan, sig, variant.names, orig.sig)
    if variant.extra:
        c_arg = variant.extra
        if after["carry"]:
            values = [
                value
                for k in after["carry"]["kernels"].values()
                for name, value in k["args"].items()
                if name.lower() == c_arg.lower()
            ]
            value = next((v for v in values if v != "0"), "")  # "0": a launch whose entry takes none
        else:
            value = after["python"]["ffi_args"].get(c_arg, "")
        own = re.fullmatch(r"int\((\w+)\)", value)  # the reference kernel's own parameter of that name
        named = own is not None and own.group(1).lower() == variant.extra.lower()
        # the kernel parameter the reference's launch hands its local (bmm's `Q_A`, handed on as
        # `batch_size` to `Batch`): the same value at every launch
        handed = own is not None and not named and own.group(1) in _handed_to(repo, variant)
        # the reference's local as a function of the tensors the launch passes, over the kernel's
        # parameters (bot/plan/carry_shapes.py): its value is the dry run's to prove
        # (tests/test_carry_dry_run.py runs one)
        over_tensors = re.fullmatch(r"int\(.*\b(\w+)\.(shape|size|stride|numel)\b.*\)", value)
        over_tensors = over_tensors is not None and over_tensors.group(1) in _kernel_params(plan)
        if not (named or handed or over_tensors) and value not in (
            variant.extra,
            f"int(site[{variant.extra!r}])",
        ):
            return Outcome("differs", detail=[f"{c_arg} = {value!r}, not the reference's {variant.extra}"])
        after = without_extra(after, c_arg, variant.extra)
    if variant.form:
        param = next(p for p in sig.entries[0].params if p.name == variant.form)
        c_tensor = naming.c_tensor_name(param)[0]
        before, after = (
            with_form_aside(before, c_tensor, param.name),
            with_form_aside(after, c_tensor, param.name),
        )
    where = diff(before, after)
    return Outcome("differs", detail=where) if where else Outcome("same plan")


def _handed_to(repo: Path, variant: Variant) -> set[str]:
    from handed_to import handed_to

    from bot.targets.discover import discover
    from bot.targets.types import Target
    from bot.testing.stage_tests import module_of

    ref = discover(Target(repo, variant.op)).reference
    return handed_to(repo / ref.path, module_of(ref.path), variant.extra) if ref is not None else set()


def _kernel_params(plan) -> set[str]:
    return {p for k in (plan.carry.kernels if plan.carry else []) for p in k.params}


__all__ = ["KINDS", "Original", "Outcome", "Variant", "original", "plan_variant", "variants_of"]
