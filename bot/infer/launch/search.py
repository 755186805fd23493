"""One helper of an autotuned reference that runs ``exhaustive_search(configs, stream, grid_fn,
kernel, args_fn, hints_fn)``, read as a variant: ``args_fn`` fed against the kernel's parameters
(config fields renamed to kernel.rs generics, or dropped; caller flags passed on or refused), the
compile hints, the 1-D grid, the config generator and the tuning cache key. ``args_fn`` and
``grid_fn`` may be lambdas or functions nested in the helper (bmm).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from bot.infer import naming
from bot.infer.by_position import reference_kinds
from bot.infer.launch.configs import generator_configs
from bot.infer.launch.syntax import (
    NotThisShape,
    ceil_to_cdiv,
    cfg_field,
    flag_check,
    lambda_dict,
    lambda_tuple,
    num_sms,
    rename_fields,
    returning_body,
)
from bot.infer.launch.variant import Variant, VariantReader
from bot.infer.list_params import ListArg, element_twin, list_elements
from bot.infer.syntax import bind, bool_params, generic_twin, is_call, substitute
from bot.read.types import Entry

# hints_fn's compile hints -> the kernel.rs compile options they set
_HINTS = {"num_ctas": "NUM_CTAS", "occupancy": "OCCUPANCY"}
Resolve = Callable[[ast.expr], ast.expr]  # an expression of the helper in the caller's names


def search_variant(reader: VariantReader, helper: ast.FunctionDef, call: ast.Call, condition: str) -> Variant:
    """The variant a helper running ``exhaustive_search`` launches when ``condition`` holds."""
    names = [a.arg for a in helper.args.posonlyargs + helper.args.args]
    bound: dict[str, ast.expr] = dict(zip(names, call.args, strict=False))
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    local: dict[str, ast.expr] = {}
    for node in helper.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            bind(node.targets[0], node.value, local)
    search = _search_call(helper)
    configs_arg, _stream, grid_fn, kernel_arg, args_fn, hints_fn = search.args[:6]
    grid_fn, args_fn, hints_fn = (_as_lambda(f, helper) for f in (grid_fn, args_fn, hints_fn))
    kernel_name = getattr(kernel_arg, "id", "")
    kernel = reader.functions.get(kernel_name)
    if kernel is None:
        raise NotThisShape(f"line {search.lineno}: kernel {ast.unparse(kernel_arg)} is not a module function")
    entry = reader.entry(kernel_name)
    outer = {k: v for k, v in local.items() if k != "cfg"}  # the lambdas' own `cfg` shadows it

    def resolve(expr: ast.expr) -> ast.expr:
        return reader.caller_names(substitute(expr, outer, bound))

    ref_params = [a.arg for a in kernel.args.args]
    fed = _Fed(reader, kernel_name, kernel, entry, resolve)
    for ref, arg in zip(ref_params, lambda_tuple(args_fn), strict=False):
        fed.feed(ref, arg)
    _read_hints(kernel_name, hints_fn, fed.rename)
    grid0 = _grid0(kernel_name, grid_fn, resolve, fed.rename)
    for c_arg, expr in fed.computed.items():
        fed.values[c_arg] = ast.unparse(rename_fields(ceil_to_cdiv(num_sms(expr)), fed.rename))
    configs = _configs(reader.functions, configs_arg, fed.rename, fed.dropped)
    key = _cache_key(helper, local, resolve)
    return Variant(
        condition,
        kernel_name,
        entry.name,
        ast.unparse(grid0),
        configs,
        key,
        ast.unparse(configs_arg),
        fed.rename,
        search.lineno,
        fed.values,
        ref_params=ref_params,
        lists=fed.lists,
    )


def _search_call(helper: ast.FunctionDef) -> ast.Call:
    """The helper's (last) ``exhaustive_search`` call, with its six arguments."""
    search = None
    for node in ast.walk(helper):
        if is_call(node, "exhaustive_search"):
            search = node
    assert search is not None
    if len(search.args) < 6:
        raise NotThisShape(f"line {search.lineno}: exhaustive_search without its six arguments")
    return search


class _Fed:
    """What ``args_fn``'s tuple feeds kernel.rs, one reference kernel parameter at a time: config
    fields renamed to kernel.rs generics or dropped, the caller's values of generics, lists launched
    once per element, generics computed from the config; the caller's flags kernel.rs lacks refused."""

    def __init__(
        self, reader: VariantReader, kernel_name: str, kernel: ast.FunctionDef, entry: Entry, resolve: Resolve
    ):
        self.reader, self.kernel_name, self.kernel, self.entry = reader, kernel_name, kernel, entry
        self.resolve = resolve
        self.generics = {g.name for g in entry.generics if g.kind == "const"}
        self.rust_params = {p.name.lower() for p in entry.params}
        self.rust_tensors = [p.name for p in entry.params if p.kind in ("tensor", "ptr")]
        self.kinds = reference_kinds(kernel, reader.functions)
        self.elements = list_elements(kernel)
        self.rename: dict[str, str] = {}
        self.dropped: list[str] = []
        self.values: dict[str, str] = {}
        self.lists: list[ListArg] = []
        self.computed: dict[
            str, ast.expr
        ] = {}  # C argument -> a config-dependent value, renamed after the hints

    def feed(self, ref: str, arg: ast.expr) -> None:
        field_name = cfg_field(arg)
        twin = generic_twin(ref, self.generics)
        elements = self.elements
        element = element_twin(ref, elements[ref], self.rust_tensors) if ref in elements else None
        if element is not None:
            # a list the reference kernel walks; kernel.rs takes one element: launched per element
            self.lists.append(ListArg(element, ref, elements[ref], ast.unparse(self.resolve(arg))))
        elif ref in elements:
            raise NotThisShape(
                f"{self.kernel_name}: list {ref} ({elements[ref]} = {ref}[...]) has no kernel.rs twin"
            )
        elif twin is not None and field_name is None and _reads_config(arg):
            # a generic the launch computes from the config (NUM_SM <- NUM_SMS // cfg.num_ctas)
            self.computed[naming.generic_arg_name(twin)[0]] = self.resolve(arg)
        elif twin is not None and field_name is None:
            self._caller_value(ref, arg, twin)
        elif twin is not None:
            self.rename[field_name] = twin
        elif ref.lower() in self.rust_params or _derived_size(ref) in self.rust_params:
            return  # a tensor or a size kernel.rs takes too: the FFI derives it
        elif field_name is not None:
            self.dropped.append(field_name)
            self.reader.dropped_notes.append(
                f"config field {field_name} ({self.kernel_name}.{ref}) dropped: not in {self.entry.name}"
            )
        else:
            self._refuse(ref, arg)

    def _caller_value(self, ref: str, arg: ast.expr, twin: str) -> None:
        """A generic the caller's value feeds (TRANSPOSE_A <- transpose_a): 0/1 or a size."""
        flag = ast.unparse(self.resolve(arg))
        if flag not in self.reader.params:
            raise NotThisShape(f"{self.kernel_name}: {ref} gets {ast.unparse(arg)}, not a config field")
        c_arg = naming.generic_arg_name(twin)[0]
        self.values[c_arg] = f"int({flag})"
        if ref in bool_params(self.kernel):
            self.values[c_arg] = f"int(bool({flag}))"  # a caller may pass None for False
            self.reader.flag_checks.append(flag_check(c_arg))

    def _refuse(self, ref: str, arg: ast.expr) -> None:
        """A caller's flag kernel.rs has no parameter for: refused when the caller passes it."""
        flag = ast.unparse(self.resolve(arg))
        if flag not in self.reader.params or self.kinds[ref] == "tensor":  # a tensor is no caller flag
            raise NotThisShape(f"{self.kernel_name}: {ref} gets {ast.unparse(arg)}, which kernel.rs lacks")
        if flag not in self.reader.refused:
            self.reader.refused.append(flag)
            self.reader.refusal_notes.append(f"{flag} refused: {self.entry.name} has no {ref}")


def _read_hints(kernel_name: str, hints_fn: ast.expr, rename: dict[str, str]) -> None:
    """``hints_fn``'s compile hints: each config field it reads renamed to the option it sets."""
    for hint, value in lambda_dict(hints_fn).items():
        field_name = cfg_field(value)
        if hint not in _HINTS or field_name is None:
            raise NotThisShape(f"{kernel_name}: compile hint {hint}={ast.unparse(value)} not understood")
        rename[field_name] = _HINTS[hint]


def _grid0(kernel_name: str, grid_fn: ast.expr, resolve: Resolve, rename: dict[str, str]) -> ast.expr:
    """The first term of ``grid_fn``'s 1-D grid (``(grid_size,)`` or ``(n, 1, 1)``), fields renamed."""
    grid = lambda_tuple(grid_fn)
    grid += [ast.Constant(1)] * (3 - len(grid))  # `(grid_size,)`: a 1-D grid
    if len(grid) != 3 or any(ast.unparse(g) != "1" for g in grid[1:]):
        raise NotThisShape(f"{kernel_name}: grid {ast.unparse(grid_fn.body)} is not 1-D")
    return rename_fields(ceil_to_cdiv(num_sms(resolve(grid[0]))), rename)


def _cache_key(helper: ast.FunctionDef, local: dict[str, ast.expr], resolve: Resolve) -> list[str]:
    """The tuned-config cache key: the tuple tested by ``if <key> not in <cache>:``."""
    key: list[str] = []
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
    return key


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
