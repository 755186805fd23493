"""Config generators of a cuTile reference op, expanded statically (``ast``, nothing is run).

A generator is straight-line assignments, then an ``if/elif/else`` chain on the device
capability whose branches ``yield SimpleNamespace(...)`` under ``for`` loops over literal lists.
Each branch becomes one config group; its condition is kept as Python for the wrapper to test.
"""

from __future__ import annotations

import ast

from bot.infer.launch.syntax import NotThisShape
from bot.infer.syntax import bind, substitute

MAX_CONFIGS = 64  # per branch: more would make every new shape autotune for minutes


def generator_configs(
    gen: ast.FunctionDef, rename: dict[str, str], dropped: list[str]
) -> list[tuple[str, list[dict[str, object]]]]:
    """``gen``'s configs as (capability condition or "", configs), fields renamed, dropped ones left out."""
    local: dict[str, ast.expr] = {}
    branches: list[tuple[str, list[ast.stmt]]] = []
    run: list[ast.stmt] | None = None  # the unconditional statements being read, one group
    for stmt in gen.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            bind(stmt.targets[0], stmt.value, local)
            continue
        if isinstance(stmt, ast.If):
            branches += _branches(stmt)
            run = None
            continue
        if run is not None:
            run.append(stmt)  # `for ...: yield` loops one after another: one group
            continue
        run = [stmt]
        branches.append(("", run))
    out = []
    for cond, body in branches:
        text = ast.unparse(substitute(ast.parse(cond, mode="eval").body, local, {})) if cond else ""
        # the wrapper asks each device once (bot/emit/wrapper_py.py)
        text = text.replace("torch.cuda.get_device_capability()", "_device_capability()")
        configs = [
            {rename.get(k, k): v for k, v in cfg.items() if k not in dropped} for cfg in _expand(body, {})
        ]
        if len(configs) > MAX_CONFIGS:
            raise NotThisShape(f"{gen.name}() yields {len(configs)} configs in one branch")
        out.append((text, configs))
    return out


def _branches(stmt: ast.If) -> list[tuple[str, list[ast.stmt]]]:
    """An if/elif/else chain as (condition, body) pairs, the final else with condition ""."""
    out = [(ast.unparse(stmt.test), stmt.body)]
    rest = stmt.orelse
    if len(rest) == 1 and isinstance(rest[0], ast.If):
        return out + _branches(rest[0])
    if rest:
        out.append(("", rest))
    return out


def _expand(body: list[ast.stmt], env: dict[str, object]) -> list[dict[str, object]]:
    """The configs a generator body yields: ``yield SimpleNamespace(...)`` under literal for-loops."""
    out: list[dict[str, object]] = []
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Yield):
            value = stmt.value.value
            if not (isinstance(value, ast.Call) and getattr(value.func, "id", "") == "SimpleNamespace"):
                raise NotThisShape(f"line {stmt.lineno}: yields {ast.unparse(value)}, not a SimpleNamespace")
            out.append({k.arg: _literal(k.value, env) for k in value.keywords if k.arg})
        elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and not stmt.orelse:
            items = _literal(stmt.iter, env)
            if not isinstance(items, (list, tuple)):
                raise NotThisShape(
                    f"line {stmt.lineno}: loops over {ast.unparse(stmt.iter)}, not a literal list"
                )
            for item in items:
                out += _expand(stmt.body, {**env, stmt.target.id: item})
        else:
            raise NotThisShape(f"line {stmt.lineno}: cannot expand `{ast.unparse(stmt).splitlines()[0]}`")
    return out


def _literal(expr: ast.expr, env: dict[str, object]) -> object:
    if isinstance(expr, ast.Name) and expr.id in env:
        return env[expr.id]
    try:
        return ast.literal_eval(expr)
    except ValueError:
        raise NotThisShape(f"line {expr.lineno}: {ast.unparse(expr)} is not a literal") from None
