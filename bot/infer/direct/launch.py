"""A launch's arguments mapped onto its kernel.rs entry.

By position onto the reference kernel's parameters, then by name onto kernel.rs: a const generic
(or its twin) gets ``int(value)``, a scalar of the same name its value, a tensor is packed from
the argument, an output is what holds it; the grid gives ``num_programs`` or ``grid_x/y/z``.
Every name the wrapper would evaluate must exist there.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from bot.infer import by_position, naming
from bot.infer.direct.autotune import ConfigChoice
from bot.infer.direct.flatten import Flattener, Launch
from bot.infer.direct.statements import message_names
from bot.infer.launch.syntax import NotThisShape, flag_check
from bot.infer.naming import CONFIGS_CALL
from bot.infer.syntax import bool_params, generic_twin, plain_assign, substitute
from bot.read.types import Entry, Param

# names a generated wrapper has without importing anything of the reference module
_WRAPPER_NAMES = {
    "torch",
    "math",
    "cdiv",
    "next_power_of_2",
    "get_num_sm",
    "_device_capability",
    "SimpleNamespace",
    "None",
    "True",
    "False",
    CONFIGS_CALL,
}
_BUILTINS = {
    "int",
    "float",
    "str",
    "bool",
    "min",
    "max",
    "abs",
    "len",
    "tuple",
    "list",
    "range",
    "round",
    "isinstance",
    "enumerate",
}


@dataclass
class Direct:
    """What the reader offers: one launch's reading, or launches one after the other merged."""

    function: str  # "<name>():<line>" of the registered function
    launch_lines: list[str]  # where each launch is: its line, or file:line in another module
    steps: list[dict[str, str]]
    tensors: dict[str, str]  # C tensor -> Python expression packed into it
    outputs: dict[str, str]  # output C tensor -> the variable that holds it
    args: dict[str, tuple[str, str]]  # C argument -> (Python value, what it comes from)
    result: str
    tensor_params: list[str] = field(default_factory=list)  # wrapper parameters read as tensors
    unmatched: list[str] = field(default_factory=list)  # reference parameters kernel.rs has no twin of
    sequence: list[str] = field(default_factory=list)  # entries launched one after the other, in order
    generator: ConfigChoice | None = None  # the config generator(s) the wrapper autotunes over
    key: str = ""  # the reference's own tuning cache key
    checks: list[dict[str, str]] = field(default_factory=list)  # FFI checks (bool flags are 0 or 1)


# a @ct.kernel(...) hint -> the compile option (C argument) that carries it
_KERNEL_HINTS = {"occupancy": "occupancy", "num_ctas": "num_cta_in_cga"}


def kernel_hints(record: Launch) -> dict[str, tuple[str, str]]:
    """The compile hints the launched kernel's ``@ct.kernel(occupancy=2)`` states, as C arguments.
    Only a literal integer, and only where the launch passes the decorated function itself (a
    ``replace_hints`` kernel or a per-target ``ct.ByTarget(..)`` says other values: left at the
    compiler default, as before)."""
    kernel = record.kernel
    handed = record.call.args[2] if len(record.call.args) > 2 else None
    if kernel is None or not (isinstance(handed, ast.Name) and handed.id == kernel.name):
        return {}
    out: dict[str, tuple[str, str]] = {}
    for deco in kernel.decorator_list:
        if not (isinstance(deco, ast.Call) and ast.unparse(deco.func).split(".")[-1] == "kernel"):
            continue
        for kw in deco.keywords:
            value = kw.value
            if kw.arg in _KERNEL_HINTS and isinstance(value, ast.Constant) and type(value.value) is int:
                out[_KERNEL_HINTS[kw.arg]] = (
                    str(value.value),
                    f"@{ast.unparse(deco)} of {kernel.name} (line {deco.lineno})",
                )
    return out


def param_names(fn: ast.FunctionDef) -> list[str]:
    """Every name a function's parameters bind, ``*args`` and ``**kwargs`` included."""
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]]


def map_launch(
    flat: Flattener, record: Launch, entry: Entry, fn: ast.FunctionDef, rename: dict[str, str]
) -> Direct:
    """One launch's arguments on ``entry``; ``rename`` numbers the C arguments of a later step."""
    params = param_names(fn)
    launch = record.call
    grid = _tuple(launch.args[1], flat.local, "grid")
    kernel = record.kernel
    kernel_name = record.kernel_name
    if kernel is None:
        raise NotThisShape(
            f"line {launch.lineno}: kernel {ast.unparse(launch.args[2])} is not a module function"
        )
    args = _tuple(launch.args[3], flat.local, "arguments")
    ref_params = [a.arg for a in kernel.args.args]
    if len(args) != len(ref_params):
        raise NotThisShape(
            f"line {launch.lineno}: {len(args)} arguments for {kernel_name}'s {len(ref_params)}"
        )
    fed = _feed(flat, record, kernel, entry, args, params, rename)
    _own_locals(flat, record, entry, fed.claimed, rename, fed.values)
    _kernel_locals(flat, kernel, entry, dict(zip(ref_params, args, strict=True)), rename, fed.values)
    missing = [naming.c_tensor_name(p)[0] for p in entry.params if p.kind in ("tensor", "ptr")]
    missing = [c for c in missing if c not in fed.tensors]
    if missing:
        raise NotThisShape(
            f"line {launch.lineno}: kernel.rs tensors {', '.join(missing)} have no twin among "
            f"{kernel_name}'s parameters {', '.join(ref_params)}"
        )
    fed.values.update({rename.get(k, k): v for k, v in _grid_args(grid, entry, flat).items()})
    returned = flat.expr(flat.result) if flat.result is not None else ""
    _check_names(flat, params, fed.tensors, fed.values, returned)
    return Direct(
        f"{fn.name}():{fn.lineno}",
        [record.where],
        flat.steps,
        fed.tensors,
        fed.outputs,
        fed.values,
        returned,
        fed.inputs,
        fed.unmatched,
        generator=flat.generator,
        key=flat.key,
        checks=fed.checks,
    )


@dataclass
class _Fed:
    """What a launch's arguments feed on kernel.rs, by C name."""

    claimed: set[str]  # kernel.rs parameters some argument feeds
    tensors: dict[str, str] = field(default_factory=dict)  # C tensor -> the value packed
    outputs: dict[str, str] = field(default_factory=dict)  # C tensor -> the variable it writes
    values: dict[str, tuple[str, str]] = field(default_factory=dict)  # C argument -> (value, why)
    unmatched: list[str] = field(default_factory=list)  # reference parameters kernel.rs lacks
    inputs: list[str] = field(default_factory=list)  # wrapper parameters read as tensors, in kernel order
    checks: list[dict[str, str]] = field(default_factory=list)  # a boolean generic's C argument is 0 or 1


def _feed(
    flat: Flattener,
    record: Launch,
    kernel: ast.FunctionDef,
    entry: Entry,
    args: list[ast.expr],
    params: list[str],
    rename: dict[str, str],
) -> _Fed:
    """Each argument onto its kernel.rs twin: a generic's ``int(value)``, a tensor packed (an
    output: the variable that holds it), a scalar's value; unmatched otherwise."""
    ref_params = [a.arg for a in kernel.args.args]
    generics = {g.name for g in entry.generics if g.kind == "const"}
    flags = bool_params(kernel)
    twins = {
        ref: generic_twin(ref, generics) or next((g for g in generics if g.lower() == ref.lower()), None)
        for ref in ref_params
    }
    matched = _match_params(ref_params, args, twins, entry, flat.local)
    placed = _by_position(kernel, entry, twins, matched, record.module.functions)
    fed = _Fed({param.name for param, _ in matched.values()})
    for ref, arg in zip(ref_params, args, strict=True):
        text = flat.expr(arg)
        twin = twins[ref]
        param, how = matched.get(ref, (None, ""))
        if twin is not None:
            c_arg, _ = naming.generic_arg_name(twin)
            c_arg = rename.get(c_arg, c_arg)
            why = f"argument {ref} -> generic {twin}" + (f" ({by_position.HOW})" if ref in placed else "")
            fed.values[c_arg] = (f"int({text})", why)
            if ref in flags:
                fed.checks.append(flag_check(c_arg))
                if text in params:  # the caller's own flag: None means False, as `if flag:` reads it
                    fed.values[c_arg] = (f"int(bool({text}))", why)
        elif param is not None and param.kind in ("tensor", "ptr"):
            c_name, _bind, _src = naming.c_tensor_name(param)
            fed.tensors[c_name] = text
            root = _root(arg, flat.local)
            if param.name in entry.outputs:
                fed.outputs[c_name] = root
            if root in params and root not in fed.inputs:  # the caller's tensor, read or written in place
                fed.inputs.append(root)
        elif param is not None:
            fed.values[rename.get(param.name, param.name)] = (
                text,
                f"argument {ref} -> scalar {param.name}{how}",
            )
        else:
            fed.unmatched.append(ref)
    return fed


def _own_locals(
    flat: Flattener,
    record: Launch,
    entry: Entry,
    claimed: set[str],
    rename: dict[str, str],
    values: dict[str, tuple[str, str]],
) -> None:
    """A kernel.rs scalar no argument feeds: the reference's own local of its name."""
    for p in entry.params:
        c_arg = rename.get(p.name, p.name)
        if p.kind == "scalar" and p.name not in claimed and c_arg not in values:
            if _bound(flat.steps[: record.steps_before], p.name):
                values[c_arg] = (
                    p.name,
                    f"kernel.rs's `{p.name}` is the reference's own `{p.name}`, bound before the launch "
                    "and passed to no kernel parameter",
                )


def _kernel_locals(
    flat: Flattener,
    kernel: ast.FunctionDef,
    entry: Entry,
    by_ref: dict[str, ast.expr],
    rename: dict[str, str],
    values: dict[str, tuple[str, str]],
) -> None:
    """A generic no argument feeds: the reference kernel's own local of its name, over the arguments."""
    for generic in sorted(g.name for g in entry.generics if g.kind == "const"):
        c_arg = rename.get(naming.generic_arg_name(generic)[0], naming.generic_arg_name(generic)[0])
        if c_arg not in values:
            local = _kernel_local(kernel, generic, by_ref)
            if local is not None:
                values[c_arg] = (f"int({flat.expr(local)})", f"{kernel.name}'s own `{generic.lower()}`")


def _match_params(
    ref_params: list[str],
    args: list[ast.expr],
    twins: dict[str, str | None],
    entry: Entry,
    local: dict[str, ast.expr],
) -> dict[str, tuple[Param, str]]:
    """Each reference parameter's kernel.rs parameter (a generic twin aside), with how it was found
    ("" by its own name). By the reference parameter's name (case aside, ``X`` ~ ``x_ptr``, the
    words in any order: ``STRIDE_X`` ~ ``x_stride``), else by the name of what the launch passes at
    its place in the tuple (``n_cols = x.shape[-1]`` handed to ``N``: kernel.rs's ``n_cols``). Not
    by position here: ``_by_position`` places what names leave, and only where both kernels take
    the same parameters of the same kinds in the same order; otherwise it is asked for, not guessed."""
    by_lower = {p.name.lower(): p for p in entry.params}
    by_words: dict[tuple[str, ...], list[Param]] = {}
    for p in entry.params:
        by_words.setdefault(_words(p.name), []).append(p)

    def named(name: str) -> Param | None:
        exact = by_lower.get(name.lower()) or by_lower.get(f"{name.lower()}_ptr")
        if exact is not None:
            return exact
        same = by_words.get(_words(name), []) or by_words.get(_words(f"{name}_ptr"), [])
        return same[0] if len(same) == 1 else None

    found: dict[str, tuple[Param, str]] = {}
    for ref in ref_params:
        if twins[ref] is None and (param := named(ref)) is not None:
            found[ref] = (param, "")
    claimed = {p.name for p, _ in found.values()}
    for ref, arg in zip(ref_params, args, strict=True):
        if twins[ref] is not None or ref in found:
            continue
        for name in _passed_names(arg, local):
            param = named(name)
            if param is not None and param.name not in claimed:
                found[ref] = (param, f" (the launch passes `{name}` there)")
                claimed.add(param.name)
                break
    return found


def _by_position(
    kernel: ast.FunctionDef,
    entry: Entry,
    twins: dict[str, str | None],
    matched: dict[str, tuple[Param, str]],
    functions: dict[str, ast.FunctionDef],
) -> set[str]:
    """The reference parameters names left without a twin, placed by position where both kernels
    take the same parameters of the same kinds in the same order (``by_position.align``); ``twins``
    and ``matched`` are completed in place. Returns the parameters so placed."""
    named = {ref: twin for ref, twin in twins.items() if twin is not None}
    named.update({ref: param.name for ref, (param, _) in matched.items()})
    if len(named) == len(twins):
        return set()
    pairs = by_position.align(kernel, entry, named, functions)
    if pairs is None:
        single = by_position.single_tensor(kernel, entry, functions)
        if single is None or single[0] in named or single[1] in named.values():
            return set()
        matched[single[0]] = (entry.param(single[1]), f" ({by_position.SINGLE})")
        return {single[0]}
    generics = {g.name for g in entry.generics if g.kind == "const"}
    placed = set()
    for ref, name in pairs.items():
        if ref in named:
            continue
        if name in generics:
            twins[ref] = name
        else:
            matched[ref] = (entry.param(name), f" ({by_position.HOW})")
        placed.add(ref)
    return placed


def _bound(steps: list[dict[str, str]], name: str) -> bool:
    """Whether a wrapper step binds ``name`` (``let``, one of a tuple's names)."""
    return any(name in (n.strip() for n in step["let"].split(",")) for step in steps if "let" in step)


def _words(name: str) -> tuple[str, ...]:
    """A name's words, their order aside: ``STRIDE_X`` and ``x_stride`` are the same words."""
    return tuple(sorted(w for w in name.lower().split("_") if w))


def _passed_names(arg: ast.expr, local: dict[str, ast.expr]) -> list[str]:
    """The names a launch argument goes by: the variable passed, then what it was bound to
    (``x = input``: a callee's parameter that is the caller's variable)."""
    names: list[str] = []
    node = arg
    while isinstance(node, ast.Name) and node.id not in names and len(names) < 8:
        names.append(node.id)
        node = local.get(node.id)
    return names


def _kernel_local(kernel: ast.FunctionDef, generic: str, by_ref: dict[str, ast.expr]) -> ast.expr | None:
    """A const generic the reference kernel computes in its body from its parameters
    (``total = N * N`` for kernel.rs's ``TOTAL``, a tile shape Rust cannot spell as ``N * N``):
    that expression over the launch's arguments."""
    for stmt in kernel.body:
        if (
            plain_assign(stmt)
            and stmt.targets[0].id.lower() == generic.lower()
            and all(n.id in by_ref for n in ast.walk(stmt.value) if isinstance(n, ast.Name))
        ):
            return substitute(stmt.value, {}, by_ref)
    return None


def _comprehension_names(text: str) -> set[str]:
    """Names a comprehension binds (``c`` of ``max(c.TILE_N for c in configs)``)."""
    return {
        n.id
        for comp in ast.walk(ast.parse(text, mode="eval"))
        if isinstance(comp, ast.comprehension)
        for n in ast.walk(comp.target)
        if isinstance(n, ast.Name)
    }


def _tuple(node: ast.expr, local: dict[str, ast.expr], what: str) -> list[ast.expr]:
    if isinstance(node, ast.Name) and node.id in local:
        node = local[node.id]
    if not isinstance(node, (ast.Tuple, ast.List)):
        raise NotThisShape(f"the launch {what} `{ast.unparse(node)}` is not a tuple")
    return list(node.elts)


_VIEWS = {"view", "reshape", "contiguous", "flatten", "view_as", "detach"}


def _root(node: ast.expr, local: dict[str, ast.expr]) -> str:
    """The variable behind ``out.view(-1)`` or ``out_flat = out.view(-1)``: what holds the output.
    A view of a fresh allocation (``out = torch.empty_like(x).flatten()``) is held by its variable."""
    held = ""  # the last variable on the way down
    for _ in range(8):
        if isinstance(node, ast.Name):
            held = node.id
        if isinstance(node, ast.Name) and isinstance(local.get(node.id), ast.Name):
            node = local[node.id]  # x = input: a callee's parameter bound to the caller's name
            continue
        if isinstance(node, ast.Name) and isinstance(local.get(node.id), ast.Call):
            inner = local[node.id]
        elif isinstance(node, ast.Call):
            inner = node
        else:
            break
        func = inner.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in _VIEWS
            and isinstance(func.value, (ast.Name, ast.Call))
        ):
            break
        node = func.value
    if held and not isinstance(node, ast.Name):
        return held
    return ast.unparse(node)


def _grid_args(grid: list[ast.expr], entry: Entry, flat: Flattener) -> dict[str, tuple[str, str]]:
    terms = [flat.expr(g) for g in grid] + ["1"] * (3 - len(grid))
    if entry.block.axes <= 1:
        if any(t != "1" for t in terms[1:]):
            raise NotThisShape(
                f"the launch grid ({', '.join(terms)}) is not 1-D, kernel.rs reads one block axis"
            )
        return {naming.grid_arg_names(entry)[0]: (terms[0], "grid")}  # the planner's name for it
    return {name: (term, "grid") for name, term in zip(("grid_x", "grid_y", "grid_z"), terms, strict=True)}


def _check_names(
    flat: Flattener, params: list[str], tensors: dict[str, str], values: dict, returned: str
) -> None:
    """Every name the wrapper evaluates must exist there: the wrapper's parameters, what a step
    binds, builtins and the wrapper's helpers. A module constant was inlined; a module function
    or global the generated wrapper does not have stops the reading, named."""
    outside = list(tensors.values()) + [v for v, _ in values.values()] + [returned]
    unknown = _unknown_names(flat, params, outside)
    if unknown and len(flat.launches) == 1:
        # steps nothing reads (the reference's tuning of a launch hint cutile-rs has no twin of:
        # `hints = _cfg_hints(cfg)`) need not be read at all; with one launch, all readers are here
        flat.steps[:] = _read_steps(flat.steps, outside)
        unknown = _unknown_names(flat, params, outside)
    if unknown:
        raise NotThisShape(f"the wrapper would need {', '.join(unknown)} of the reference module")


def _read_steps(steps: list[dict[str, str]], outside: list[str]) -> list[dict[str, str]]:
    """``steps`` less each ``let`` whose names no later kept step, check or launch value reads."""
    read = {n for text in outside if text for n in _names(text)}
    kept: list[dict[str, str]] = []
    for step in reversed(steps):
        if "let" in step and not {n.strip() for n in step["let"].split(",")} & read:
            continue
        kept.append(step)
        read |= {n for k in ("expr", "check", "return", "when") if k in step for n in _names(step[k])}
        read |= set(message_names(step.get("message", "")))
    return kept[::-1]


def _names(text: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}


def _unknown_names(flat: Flattener, params: list[str], outside: list[str]) -> list[str]:
    known = set(params) | _WRAPPER_NAMES | _BUILTINS | ({flat.config_var} if flat.config_var else set())
    texts: list[str] = []
    for step in flat.steps:
        texts += [step[k] for k in ("expr", "check", "return", "when") if k in step]
        if "let" in step:
            known |= {n.strip() for n in step["let"].split(",")}
    texts += outside
    return sorted(
        {
            n.id
            for text in texts
            if text
            for n in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(n, ast.Name) and n.id not in known and n.id not in _comprehension_names(text)
        }
        | {n for step in flat.steps for n in message_names(step.get("message", "")) if n not in known}
    )
