"""Which kernel parameter a reference's launches hand one of its names, read off the reference for
the variant corpus (tests/variant_corpus.py) on its own: a count the reference computes and passes
(bmm's ``Q_A``, handed on as ``batch_size``) is that parameter's value at every launch.
"""

from __future__ import annotations

import ast
from pathlib import Path


def handed_to(path: Path, module: str, name: str) -> set[str]:
    """The parameters of the reference's kernels that a launch or search of a kernel named there
    hands ``name`` as an element of its argument tuple, written at the site or returned by a
    function defined in the launching function (``args_fn``); or hands the parameter of a module
    function that a call gives ``name`` (one call down)."""
    from bot.infer.model.semantic import ModuleModel
    from bot.plan.carry import launch_sites

    model = ModuleModel.build(path.read_text(encoding="utf-8"), module, str(path))
    functions = {
        n: bs[0].stmt for n, bs in model.bindings.items() if len(bs) == 1 and bs[0].kind == "function"
    }
    handed: dict[tuple[str, str], set[str]] = {}  # (function, its name) -> kernel parameters
    for site in launch_sites(model, list(functions)):
        kernel = model.binding(site.kernel) if site.kernel else None
        function = model.node_of(site.scope)
        elements = _written(function, site.args)
        if kernel is None or not isinstance(function, ast.FunctionDef) or elements is None:
            continue
        params = [a.arg for a in kernel.stmt.args.args]
        for element, param in zip(elements, params, strict=False):
            if isinstance(element, ast.Starred):
                break
            if isinstance(element, ast.Name):
                handed.setdefault((function.name, element.id), set()).add(param)
    found = {p for (_function, local), params in handed.items() if local == name for p in params}
    for caller in functions.values():
        for call in ast.walk(caller):
            callee = (
                functions.get(call.func.id)
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                else None
            )
            if callee is None or any(isinstance(a, ast.Starred) for a in call.args):
                continue
            names = [a.arg for a in callee.args.posonlyargs + callee.args.args]
            given = list(zip(names, call.args, strict=False)) + [(k.arg, k.value) for k in call.keywords]
            for param, value in given:
                if isinstance(value, ast.Name) and value.id == name:
                    found |= handed.get((callee.name, param), set())
    return found


def _written(function: ast.AST | None, args: ast.expr | None) -> list[ast.expr | None] | None:
    """A launch's argument tuple: written at the site, or the one ``return`` of a function defined
    in ``function`` that the site names or calls (its own parameters: None, not the caller's)."""
    if isinstance(args, ast.Tuple):
        return list(args.elts)
    called = args.func if isinstance(args, ast.Call) else args
    if not isinstance(called, ast.Name):
        return None
    nested = [
        s for s in getattr(function, "body", []) if isinstance(s, ast.FunctionDef) and s.name == called.id
    ]
    body = nested[0].body if len(nested) == 1 else []
    if body and ast.get_docstring(nested[0]) is not None:
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Tuple):
        return None
    from bot.infer.model.semantic import parameter_names

    own = parameter_names(nested[0])
    return [None if isinstance(e, ast.Name) and e.id in own else e for e in body[0].value.elts]
