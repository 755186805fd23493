"""One helper of an autotuned reference that runs ``exhaustive_search(configs, stream, grid_fn,
kernel, args_fn, hints_fn)``, read as a variant: ``args_fn`` fed against the kernel's parameters
(config fields renamed to kernel.rs generics, or dropped; caller flags passed on or refused), the
compile hints, the 1-D grid, the config generator and the tuning cache key. ``args_fn`` and
``grid_fn`` may be lambdas or functions nested in the helper (bmm).
"""

from __future__ import annotations

import ast

from bot.infer import naming
from bot.infer.by_position import reference_kinds
from bot.infer.launch_ast import (
    NotThisShape,
    bind,
    bool_params,
    ceil_to_cdiv,
    cfg_field,
    flag_check,
    generic_twin,
    is_call,
    lambda_dict,
    lambda_tuple,
    num_sms,
    rename_fields,
    returning_body,
    substitute,
)
from bot.infer.launch_configs import generator_configs
from bot.infer.launch_variant import Variant, VariantReader
from bot.infer.list_params import ListArg, element_twin, list_elements

# hints_fn's compile hints -> the kernel.rs compile options they set
_HINTS = {"num_ctas": "NUM_CTAS", "occupancy": "OCCUPANCY"}


def search_variant(reader: VariantReader, helper: ast.FunctionDef, call: ast.Call, condition: str) -> Variant:
    """The variant a helper running ``exhaustive_search`` launches when ``condition`` holds."""
    names = [a.arg for a in helper.args.posonlyargs + helper.args.args]
    bound: dict[str, ast.expr] = dict(zip(names, call.args, strict=False))
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    local: dict[str, ast.expr] = {}
    search = None
    key: list[str] = []
    for node in helper.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            bind(node.targets[0], node.value, local)
    for node in ast.walk(helper):
        if is_call(node, "exhaustive_search"):
            search = node
    assert search is not None
    if len(search.args) < 6:
        raise NotThisShape(f"line {search.lineno}: exhaustive_search without its six arguments")
    configs_arg, _stream, grid_fn, kernel_arg, args_fn, hints_fn = search.args[:6]
    grid_fn, args_fn, hints_fn = (_as_lambda(f, helper) for f in (grid_fn, args_fn, hints_fn))
    kernel_name = getattr(kernel_arg, "id", "")
    kernel = reader.functions.get(kernel_name)
    if kernel is None:
        raise NotThisShape(f"line {search.lineno}: kernel {ast.unparse(kernel_arg)} is not a module function")
    entry = reader.entry(kernel_name)
    generics = {g.name for g in entry.generics if g.kind == "const"}
    rust_params = {p.name.lower() for p in entry.params}

    outer = {k: v for k, v in local.items() if k != "cfg"}  # the lambdas' own `cfg` shadows it

    def resolve(expr: ast.expr) -> ast.expr:
        return reader.caller_names(substitute(expr, outer, bound))

    rename: dict[str, str] = {}
    dropped: list[str] = []
    values: dict[str, str] = {}
    ref_params = [a.arg for a in kernel.args.args]
    kinds = reference_kinds(kernel, reader.functions)
    elements = list_elements(kernel)
    rust_tensors = [p.name for p in entry.params if p.kind in ("tensor", "ptr")]
    lists: list[ListArg] = []
    computed: dict[str, ast.expr] = {}  # C argument -> a config-dependent value, renamed once hints are read
    for ref, arg in zip(ref_params, lambda_tuple(args_fn), strict=False):
        field_name = cfg_field(arg)
        twin = generic_twin(ref, generics)
        element = element_twin(ref, elements[ref], rust_tensors) if ref in elements else None
        if element is not None:
            # a list the reference kernel walks; kernel.rs takes one element: launched per element
            lists.append(ListArg(element, ref, elements[ref], ast.unparse(resolve(arg))))
        elif ref in elements:
            raise NotThisShape(
                f"{kernel_name}: list {ref} ({elements[ref]} = {ref}[...]) has no kernel.rs twin"
            )
        elif twin is not None and field_name is None and _reads_config(arg):
            # a generic the launch computes from the config (NUM_SM <- NUM_SMS // cfg.num_ctas)
            computed[naming.generic_arg_name(twin)[0]] = resolve(arg)
        elif twin is not None and field_name is None:
            # a generic the caller's value feeds (TRANSPOSE_A <- transpose_a): 0/1 or a size
            flag = ast.unparse(resolve(arg))
            if flag not in reader.params:
                raise NotThisShape(f"{kernel_name}: {ref} gets {ast.unparse(arg)}, not a config field")
            c_arg = naming.generic_arg_name(twin)[0]
            values[c_arg] = f"int({flag})"
            if ref in bool_params(kernel):
                values[c_arg] = f"int(bool({flag}))"  # a caller may pass None for False
                reader.flag_checks.append(flag_check(c_arg))
        elif twin is not None:
            rename[field_name] = twin
        elif ref.lower() in rust_params or _derived_size(ref) in rust_params:
            continue  # a tensor or a size kernel.rs takes too: the FFI derives it
        elif field_name is not None:
            dropped.append(field_name)
            reader.dropped_notes.append(
                f"config field {field_name} ({kernel_name}.{ref}) dropped: not in {entry.name}"
            )
        else:
            flag = ast.unparse(resolve(arg))
            if flag not in reader.params or kinds[ref] == "tensor":  # a tensor is no caller flag
                raise NotThisShape(f"{kernel_name}: {ref} gets {ast.unparse(arg)}, which kernel.rs lacks")
            if flag not in reader.refused:
                reader.refused.append(flag)
                reader.refusal_notes.append(f"{flag} refused: {entry.name} has no {ref}")
    hints = lambda_dict(hints_fn)
    for hint, value in hints.items():
        field_name = cfg_field(value)
        if hint not in _HINTS or field_name is None:
            raise NotThisShape(f"{kernel_name}: compile hint {hint}={ast.unparse(value)} not understood")
        rename[field_name] = _HINTS[hint]
    grid = lambda_tuple(grid_fn)
    grid += [ast.Constant(1)] * (3 - len(grid))  # `(grid_size,)`: a 1-D grid
    if len(grid) != 3 or any(ast.unparse(g) != "1" for g in grid[1:]):
        raise NotThisShape(f"{kernel_name}: grid {ast.unparse(grid_fn.body)} is not 1-D")
    grid0 = rename_fields(ceil_to_cdiv(num_sms(resolve(grid[0]))), rename)
    for c_arg, expr in computed.items():
        values[c_arg] = ast.unparse(rename_fields(ceil_to_cdiv(num_sms(expr)), rename))
    configs = _configs(reader.functions, configs_arg, rename, dropped)
    # the tuned-config cache key: the tuple tested by `if <key> not in <cache>:`
    for node in ast.walk(helper):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.ops[0], ast.NotIn)
            and isinstance(node.left, ast.Name)
            and isinstance(local.get(node.left.id), ast.Tuple)
        ):
            key = [ast.unparse(resolve(e)) for e in local[node.left.id].elts]
    if not key:  # without one, every shape would share one tuned config
        raise NotThisShape(f"{helper.name}(): no `if <key tuple> not in <cache>` to key the autotuner by")
    generator = ast.unparse(configs_arg)
    return Variant(
        condition,
        kernel_name,
        entry.name,
        ast.unparse(grid0),
        configs,
        key,
        generator,
        rename,
        search.lineno,
        values,
        ref_params=ref_params,
        lists=lists,
    )


def _reads_config(expr: ast.expr) -> bool:
    """Whether ``expr`` reads a field of the launched config (``cfg.num_ctas``)."""
    return any(cfg_field(n) is not None for n in ast.walk(expr))


def _configs(
    functions: dict[str, ast.FunctionDef], configs_arg: ast.expr, rename: dict[str, str], dropped: list[str]
) -> list[tuple[str, list[dict[str, object]]]]:
    """The config groups of the module generator ``configs_arg`` calls, expanded statically."""
    call = configs_arg
    if is_call(call, "list") and call.args:
        call = call.args[0]
    gen = functions.get(getattr(getattr(call, "func", None), "id", ""))
    if gen is None:
        raise NotThisShape(f"configs {ast.unparse(configs_arg)} do not come from a module generator")
    return generator_configs(gen, rename, dropped)


def _as_lambda(node: ast.expr, helper: ast.FunctionDef) -> ast.expr:
    """``def args_fn(cfg): ... return (...)`` nested in ``helper`` as ``lambda cfg: (...)``, its
    single assignments substituted into what it returns; anything else is returned as is."""
    if not isinstance(node, ast.Name):
        return node
    nested = next((s for s in helper.body if isinstance(s, ast.FunctionDef) and s.name == node.id), None)
    if nested is None or len(nested.args.args) != 1:
        return node
    body = returning_body(nested)
    if body is None:
        return node
    local: dict[str, ast.expr] = {}
    for stmt in body[:-1]:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return node
        bind(stmt.targets[0], substitute(stmt.value, local, {}), local)
    return ast.Lambda(args=nested.args, body=substitute(body[-1].value, local, {}))


def passed_by_name(param: str, ref_params: list[str]) -> bool:
    """Whether a reference kernel parameter is kernel.rs's ``param`` by name: the same name (case
    aside) or the size the FFI derives for it (``M`` -> ``rt_m``)."""
    return any(param.lower() == ref.lower() or param == _derived_size(ref) for ref in ref_params)


def _derived_size(ref: str) -> str:
    """The kernel.rs scalar the FFI derives for a reference size: ``M`` -> ``rt_m``, ``Batch`` -> ``rt_q``."""
    name = ref.lower()
    return "rt_q" if name in ("batch", "q") else f"rt_{name}"
