"""Facts from a cuTile reference that launches its kernel directly: ``ct.launch(stream, grid, kernel, args)``.

Most TileGym ops (dropout, splitk_reduce, layer_norm_legacy, rope, flash_decode) have this shape,
often behind an ``autograd.Function`` and a helper or two. The reader follows the registered
function into those callees (their parameters bound by ``let`` steps), keeps every statement
before the launch as a wrapper step, and then maps the launch's arguments onto the reference
kernel's parameters by position and from there onto kernel.rs by name:

- a kernel.rs const generic (``TILE_D``, or its twin ``BLOCK_D``) gets the argument as its C
  argument's Python value, ``int(...)`` (a Python ``bool`` flag feeds an ``i32`` generic);
- a kernel.rs scalar of the same name (case aside: ``S_kv`` ~ ``S_KV``, ``P`` ~ ``p``) gets it too,
  so a runtime scalar such as ``eps`` or ``sm_scale`` has its value;
- a kernel.rs tensor of the same name is packed from the argument (``x_flat``); an output is
  whatever the reference writes into: an allocation, a caller's tensor (in place), or either
  (``output = x if inplace else torch.empty_like(x)``);
- the grid gives ``num_programs`` or ``grid_x/y/z``; the returned expression the result;
- a literal hint of the launched kernel's decorator (``@ct.kernel(occupancy=2)``) its compile option.

Control flow the wrapper can say too is kept: ``if not training: return x`` (an early return),
``if inplace: a = x else: a = ...`` (a conditional value), ``if dim == 0: .. elif ..: .. else:
raise ..`` (strides and counts chosen by an argument), ``if x is None: x = c``, asserts,
``shape[dim] = v`` on a list built there. A small pure helper of the module (``_mix_seed``) is
inlined into the expression that calls it. A kernel.rs parameter named after the variable the launch
passes (``n_elements``, handed to the reference kernel's ``N``) is matched through that name.
Anything else is not guessed: the reader stops and says which line.

This module picks the case (one launch, or a sequence) and offers the facts; the pieces are
``direct.module`` (the reference's module and its callees), ``direct.flatten`` (the steps, with
``direct.statements`` and ``direct.autotune``) and ``direct.launch`` (the launch's mapping).
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

from bot.infer import naming
from bot.infer.direct.flatten import Flattener, Launch
from bot.infer.direct.flatten_ast import with_names
from bot.infer.direct.launch import Direct, kernel_hints, map_launch, param_names
from bot.infer.direct.module import ReferenceModule
from bot.infer.facts import Facts
from bot.infer.launch.syntax import NotThisShape
from bot.infer.naming import entry_key
from bot.infer.reference.op import ModuleLoader, ReferenceOp, read_with, registered_function
from bot.read.types import Entry, KernelSignature
from bot.targets.types import Source, Target

KEYS = ("python.steps", "python.alloc", "python.tensors", "python.result")


def gather(target: Target, signature: KernelSignature | None, facts: Facts, ref: ReferenceOp) -> None:
    loader = ModuleLoader(target.repo) if target is not None else None

    declared = _declared(facts.get("python.signature"))

    def reader(tree: ast.Module, name: str, sig: KernelSignature) -> Direct | None:
        return read_tree(tree, name, sig, loader, ref.rel, declared)

    written = [k for k in KEYS if (src := facts.source(k)) is not None and src.kind == "contract"]
    if written:
        # the reading is one piece (its arguments name what its steps bind): the porter's wrapper wins
        for key in KEYS:
            facts.note_tried(key, f"{ref.rel}: not read, the contract writes {', '.join(written)}")
        return
    reading = read_with(reader, ref, signature, facts, KEYS)
    if reading is None:
        return
    rel = ref.rel

    def where(what: str) -> Source:
        return Source("reference", f"{rel}: {what}")

    launch = "ct.launch:" + ", ".join(reading.launch_lines)
    if reading.sequence:
        facts.offer(
            "ffi.sequence",
            reading.sequence,
            where(f"{reading.function} launches {', '.join(reading.sequence)} one after the other"),
        )
    # reference parameters kernel.rs has no twin of are said, not silently dropped
    dropped = f"; not in kernel.rs: {', '.join(reading.unmatched)}" if reading.unmatched else ""
    facts.offer("python.steps", reading.steps, where(f"{reading.function} before {launch}{dropped}"))
    facts.offer(
        "python.alloc", {v: v for v in reading.outputs.values()}, where(f"outputs written by {launch}")
    )
    facts.offer("python.tensors", reading.tensors, where(f"arguments of {launch}"))
    if reading.result:
        facts.offer("python.result", reading.result, where(f"{reading.function} returns it"))
    if reading.tensor_params:
        facts.offer("python.tensor_params", reading.tensor_params, where(f"parameters packed by {launch}"))
    for name, (value, what) in reading.args.items():
        facts.offer(f"python.args.{name}", value, where(f"{launch} {what}"))
    if reading.checks:
        facts.offer("ffi.checks", reading.checks, where("boolean kernel parameters: 0 or 1"))
    if reading.generator is not None:
        groups = reading.generator.groups()
        facts.offer("python.configs", groups, where(f"{reading.generator.name}, the configs it launches"))
        key = (
            reading.key
            or "(" + ", ".join(f"tuple({t}.shape), {t}.dtype" for t in reading.tensors.values()) + ")"
        )
        facts.offer(
            "python.key", key, where("its tuning cache key" if reading.key else "the launch's tensors")
        )


def read_tree(
    tree: ast.Module,
    name: str,
    signature: KernelSignature,
    loader: ModuleLoader | None = None,
    rel: Path | None = None,
    declared: ast.arguments | None = None,
) -> Direct | None:
    """The reading of a reference that reaches ``ct.launch``: one launch for a one-entry kernel, or
    launches one after the other, each of a kernel with an entry of its own name; None when the
    reference launches nothing or one kernel for several entries (variants: another reader's).
    ``declared``: the wrapper's parameters, when its signature is not the reference's."""
    fn = registered_function(tree, name)
    if fn is None:
        return None
    if declared:
        fn = _as_declared(fn, declared)
    module = ReferenceModule(tree, loader, rel)
    if not module.launches(fn):
        return None
    if len(signature.entries) != 1 and module.launch_count(fn) < 2:
        return None
    params = param_names(fn)
    flat = Flattener(module, name, params, [e.name for e in signature.entries])
    flat.result = flat.walk(fn, depth=0)
    if not flat.launches:
        raise NotThisShape(f"{fn.name}() reaches ct.launch only through a path the reader does not follow")
    if len(flat.launches) == 1:
        if len(signature.entries) != 1:
            return None
        direct = map_launch(flat, flat.launches[0], signature.entries[0], fn, {})
        direct.args.update(kernel_hints(flat.launches[0]))
        return direct
    entries = _entries_of(flat.launches, signature)
    if len({e.name for e in entries}) != len(entries) or len(entries) != len(signature.entries):
        raise NotThisShape(
            f"{fn.name}() launches {', '.join(launch.kernel_name for launch in flat.launches)}; "
            f"kernel.rs has {', '.join(e.name for e in signature.entries)}: not one entry per launch"
        )
    steps = [
        map_launch(flat, launch, entry, fn, rename)
        for launch, entry, rename in zip(flat.launches, entries, naming.sequence_names(entries), strict=True)
    ]
    return _merge(steps, [e.name for e in entries])


def _declared(signature: object) -> ast.arguments | None:
    """The parameters of the wrapper's signature (``x, approximate='none', **kwargs``)."""
    if not isinstance(signature, str):
        return None
    try:
        return ast.parse(f"def f({signature}): pass").body[0].args
    except SyntaxError:
        return None


def _as_declared(fn: ast.FunctionDef, declared: ast.arguments) -> ast.FunctionDef:
    """``fn`` with its positional parameters named as the wrapper's, position by position: the
    public declaration may name them otherwise (``gelu(x, ...)`` declared, the reference registers
    ``gelu(input, ...)``), and the wrapper's steps must read the names its signature binds."""
    positional = [a.arg for a in declared.posonlyargs + declared.args]
    every = param_names(fn)
    own = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    # only a name the other side lacks altogether: a declaration that adds or reorders parameters
    # (`use_tma` declared before `partial_rotary_factor`) keeps the reference's names
    renames = {r: d for r, d in zip(own, positional, strict=False) if r not in positional and d not in every}
    if renames:
        used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        taken = sorted(d for d in renames.values() if d in used)
        if taken:
            raise NotThisShape(
                f"{fn.name}() names its parameters {', '.join(renames)} where the wrapper's signature has "
                f"{', '.join(renames.values())}, and already uses {', '.join(taken)}"
            )
        fn = with_names(fn, renames)
    return _from_kwargs(fn, declared)


def _from_kwargs(fn: ast.FunctionDef, declared: ast.arguments) -> ast.FunctionDef:
    """``fn`` reading from the wrapper's ``**kwargs`` the defaulted parameters the declaration lacks.

    The dispatcher hands the reference the caller's arguments as given, so a keyword the public
    declaration does not name (``kv_len_per_split=``) reaches the reference's parameter through
    the declaration's ``**kwargs``: the wrapper binds it as ``kwargs.get(name, default)``."""
    if declared.kwarg is None:
        return fn
    kwargs = declared.kwarg.arg
    names = {a.arg for a in declared.posonlyargs + declared.args + declared.kwonlyargs} | {kwargs}
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = dict(
        zip([p.arg for p in positional[len(positional) - len(a.defaults) :]], a.defaults, strict=True)
    )
    defaults |= {p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None}
    left = [name for name in defaults if name not in names]
    if not left or (a.kwarg is not None and a.kwarg.arg != kwargs):
        return fn
    fn = copy.deepcopy(fn)
    a = fn.args
    kept = [p for p in a.posonlyargs + a.args if p.arg not in left]
    a.defaults = [defaults[p.arg] for p in kept if p.arg in defaults]
    a.posonlyargs = [p for p in a.posonlyargs if p.arg not in left]
    a.args = [p for p in a.args if p.arg not in left]
    a.kw_defaults = [d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if p.arg not in left]
    a.kwonlyargs = [p for p in a.kwonlyargs if p.arg not in left]
    a.kwarg = ast.arg(arg=kwargs)
    reads = [
        ast.parse(f"{name} = {kwargs}.get({name!r}, {ast.unparse(defaults[name])})").body[0] for name in left
    ]
    docstring = (
        1
        if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
        else 0
    )
    fn.body[docstring:docstring] = reads
    return ast.fix_missing_locations(fn)


def _entries_of(launches: list[Launch], signature: KernelSignature) -> list[Entry]:
    """The kernel.rs entry each launch runs: the one named as the reference kernel (``_x_kernel`` ~
    ``x_kernel``); the one launch no entry is named like, when exactly one entry is named by no
    launch, runs that entry (a reference that renamed one stage: ``_stage4b_scatter_kernel`` beside
    kernel.rs's ``stage4_kernel``)."""
    by_name = {entry_key(e.name): e for e in signature.entries}
    found = [by_name.get(entry_key(launch.kernel_name)) for launch in launches]
    unnamed = [e for e in signature.entries if e not in found]
    for i, (launch, entry) in enumerate(zip(launches, found, strict=True)):
        if entry is not None:
            continue
        if found.count(None) == 1 and len(unnamed) == 1:
            found[i] = unnamed[0]
            continue
        raise NotThisShape(
            f"line {launch.call.lineno}: kernel.rs has no entry named like {launch.kernel_name} "
            f"(entries: {', '.join(e.name for e in signature.entries)})"
        )
    return [e for e in found if e is not None]


def _merge(steps: list[Direct], sequence: list[str]) -> Direct:
    """One reading of launches run one after the other: a descriptor packs one value in every step."""
    tensors: dict[str, str] = {}
    for step in steps:
        for c_name, value in step.tensors.items():
            if tensors.setdefault(c_name, value) != value:
                raise NotThisShape(
                    f"descriptor {c_name} packs `{tensors[c_name]}` in one launch and `{value}` in another"
                )
    first, last = steps[0], steps[-1]
    return Direct(
        function=first.function,
        launch_lines=[line for step in steps for line in step.launch_lines],
        steps=last.steps,
        tensors=tensors,
        outputs={k: v for step in steps for k, v in step.outputs.items()},
        args={k: v for step in steps for k, v in step.args.items()},
        result=last.result,
        tensor_params=list(dict.fromkeys(p for step in steps for p in step.tensor_params)),
        unmatched=list(dict.fromkeys(u for step in steps for u in step.unmatched)),
        sequence=sequence,
        generator=last.generator,
        key=last.key,
        checks=[c for step in steps for c in step.checks],
    )
