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
- the grid gives ``num_programs`` or ``grid_x/y/z``; the returned expression the result.

Control flow the wrapper can say too is kept: ``if not training: return x`` (an early return),
``if inplace: a = x else: a = ...`` (a conditional value), ``if x is None: x = c``, asserts. A
small pure helper of the module (``_mix_seed``) is inlined into the expression that calls it.
Anything else is not guessed: the reader stops and says which line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from bot.infer import naming
from bot.infer.direct_autotune import CONFIGS_CALL
from bot.infer.direct_flatten import Flattener, Launch
from bot.infer.direct_module import ReferenceModule
from bot.infer.direct_statements import plain_assign
from bot.infer.facts import Facts
from bot.infer.launch_ast import (
    NotThisShape,
    bool_params,
    flag_check,
    generic_twin,
    substitute,
)
from bot.infer.launch_configs import generator_configs
from bot.infer.reference import ModuleLoader, ReferenceOp, read_with, registered_function
from bot.types import Entry, KernelSignature, Source, Target

KEYS = ("python.steps", "python.alloc", "python.tensors", "python.result")
# names a generated wrapper has without importing anything of the reference module
_WRAPPER_NAMES = {
    "torch",
    "math",
    "cdiv",
    "next_power_of_2",
    "get_num_sm",
    "None",
    "True",
    "False",
    CONFIGS_CALL,
}
_BUILTINS = {
    "int",
    "float",
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
}


@dataclass
class Direct:
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
    generator: ast.FunctionDef | None = None  # the config generator the wrapper autotunes over
    key: str = ""  # the reference's own tuning cache key
    checks: list[dict[str, str]] = field(default_factory=list)  # FFI checks (bool flags are 0 or 1)


def gather(target: Target, signature: KernelSignature | None, facts: Facts, ref: ReferenceOp) -> None:
    loader = ModuleLoader(target.repo) if target is not None else None

    def reader(tree: ast.Module, name: str, sig: KernelSignature) -> Direct | None:
        return read_tree(tree, name, sig, loader, ref.rel)

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
        groups = [
            {"when": cond or "always", "configs": configs}
            for cond, configs in generator_configs(reading.generator, {}, [])
        ]
        facts.offer("python.configs", groups, where(f"{reading.generator.name}(), the configs it launches"))
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
) -> Direct | None:
    """The reading of a reference that reaches ``ct.launch``: one launch for a one-entry kernel, or
    launches one after the other, each of a kernel with an entry of its own name; None when the
    reference launches nothing or one kernel for several entries (variants: another reader's)."""
    fn = registered_function(tree, name)
    if fn is None:
        return None
    module = ReferenceModule(tree, loader, rel)
    if not module.launches(fn):
        return None
    if len(signature.entries) != 1 and module.launch_count(fn) < 2:
        return None
    params = _param_names(fn)
    flat = Flattener(module, name, params)
    flat.result = flat.walk(fn, depth=0)
    if not flat.launches:
        raise NotThisShape(f"{fn.name}() reaches ct.launch only through a path the reader does not follow")
    if len(flat.launches) == 1:
        if len(signature.entries) != 1:
            return None
        return _map_launch(flat, flat.launches[0], signature.entries[0], fn, {})
    entries = [_entry_of(launch, signature) for launch in flat.launches]
    if len({e.name for e in entries}) != len(entries) or len(entries) != len(signature.entries):
        raise NotThisShape(
            f"{fn.name}() launches {', '.join(_kernel_name(launch) for launch in flat.launches)}; "
            f"kernel.rs has {', '.join(e.name for e in signature.entries)}: not one entry per launch"
        )
    steps = [
        _map_launch(flat, launch, entry, fn, rename)
        for launch, entry, rename in zip(flat.launches, entries, naming.sequence_names(entries), strict=True)
    ]
    return _merge(steps, [e.name for e in entries])


def _kernel_name(launch: Launch) -> str:
    return launch.kernel.name if launch.kernel is not None else ast.unparse(launch.call.args[2])


def _entry_of(launch: Launch, signature: KernelSignature) -> Entry:
    """The kernel.rs entry a launch runs: the one named as the reference kernel (``_x_kernel`` ~ ``x_kernel``)."""
    wanted = _kernel_name(launch).lstrip("_").lower()
    for entry in signature.entries:
        if entry.name.lstrip("_").lower() == wanted:
            return entry
    raise NotThisShape(
        f"line {launch.call.lineno}: kernel.rs has no entry named like {_kernel_name(launch)} "
        f"(entries: {', '.join(e.name for e in signature.entries)})"
    )


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


def _param_names(fn: ast.FunctionDef) -> list[str]:
    """Every name a function's parameters bind, ``*args`` and ``**kwargs`` included."""
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]]


def _map_launch(
    flat: Flattener, record: Launch, entry: Entry, fn: ast.FunctionDef, rename: dict[str, str]
) -> Direct:
    """One launch's arguments on ``entry``; ``rename`` numbers the C arguments of a later step."""
    function = f"{fn.name}():{fn.lineno}"
    params = _param_names(fn)
    launch = record.call
    grid = _tuple(launch.args[1], flat.local, "grid")
    kernel = record.kernel
    kernel_name = _kernel_name(record)
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
    generics = {g.name for g in entry.generics if g.kind == "const"}
    by_lower = {p.name.lower(): p for p in entry.params}
    tensors: dict[str, str] = {}
    outputs: dict[str, str] = {}
    values: dict[str, tuple[str, str]] = {}
    unmatched: list[str] = []
    inputs: list[str] = []  # wrapper parameters the kernel reads as tensors, in kernel order
    flags = bool_params(kernel)
    checks: list[dict[str, str]] = []  # a boolean generic's C argument is 0 or 1
    for ref, arg in zip(ref_params, args, strict=True):
        text = flat.expr(arg)
        twin = generic_twin(ref, generics) or next((g for g in generics if g.lower() == ref.lower()), None)
        param = by_lower.get(ref.lower()) or by_lower.get(f"{ref.lower()}_ptr")
        if twin is not None:
            c_arg, _ = naming.generic_arg_name(twin)
            c_arg = rename.get(c_arg, c_arg)
            values[c_arg] = (f"int({text})", f"argument {ref} -> generic {twin}")
            if ref in flags:
                checks.append(flag_check(c_arg))
                if text in params:  # the caller's own flag: None means False, as `if flag:` reads it
                    values[c_arg] = (f"int(bool({text}))", f"argument {ref} -> generic {twin}")
        elif param is not None and param.kind in ("tensor", "ptr"):
            c_name, _bind, _src = naming.c_tensor_name(param)
            tensors[c_name] = text
            root = _root(arg, flat.local)
            if param.name in entry.outputs:
                outputs[c_name] = root
            if root in params and root not in inputs:  # the caller's tensor, read or written in place
                inputs.append(root)
        elif param is not None:
            values[rename.get(param.name, param.name)] = (text, f"argument {ref} -> scalar {param.name}")
        else:
            unmatched.append(ref)
    by_ref = dict(zip(ref_params, args, strict=True))
    for generic in sorted(generics):
        c_arg = rename.get(naming.generic_arg_name(generic)[0], naming.generic_arg_name(generic)[0])
        if c_arg not in values:
            local = _kernel_local(kernel, generic, by_ref)
            if local is not None:
                values[c_arg] = (f"int({flat.expr(local)})", f"{kernel_name}'s own `{generic.lower()}`")
    missing = [naming.c_tensor_name(p)[0] for p in entry.params if p.kind in ("tensor", "ptr")]
    missing = [c for c in missing if c not in tensors]
    if missing:
        raise NotThisShape(
            f"line {launch.lineno}: kernel.rs tensors {', '.join(missing)} have no twin among "
            f"{kernel_name}'s parameters {', '.join(ref_params)}"
        )
    values.update({rename.get(k, k): v for k, v in _grid_args(grid, entry, flat).items()})
    returned = flat.expr(flat.result) if flat.result is not None else ""
    _check_names(flat, params, tensors, values, returned)
    return Direct(
        function,
        [record.where],
        flat.steps,
        tensors,
        outputs,
        values,
        returned,
        inputs,
        unmatched,
        generator=flat.generator,
        key=flat.key,
        checks=checks,
    )


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
    """The variable behind ``out.view(-1)`` or ``out_flat = out.view(-1)``: what holds the output."""
    for _ in range(8):
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
    known = set(params) | _WRAPPER_NAMES | _BUILTINS | ({flat.config_var} if flat.config_var else set())
    texts: list[str] = []
    for step in flat.steps:
        texts += [step[k] for k in ("expr", "check", "return", "when") if k in step]
        if "let" in step:
            known |= {n.strip() for n in step["let"].split(",")}
    texts += list(tensors.values()) + [v for v, _ in values.values()] + [returned]
    unknown = sorted(
        {
            n.id
            for text in texts
            if text
            for n in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(n, ast.Name) and n.id not in known and n.id not in _comprehension_names(text)
        }
    )
    if unknown:
        raise NotThisShape(f"the wrapper would need {', '.join(unknown)} of the reference module")
