"""How a directly launched reference autotunes, read for the wrapper.

The wrapper tunes over the reference's configs itself, so the reader takes the side of an
``is_autotune_disabled()`` switch that launches one config, and turns each call of the module's
config generator into the wrapper's ``_autotune_configs()``.
"""

from __future__ import annotations

import ast
import copy

CONFIGS_CALL = "_autotune_configs"  # the wrapper's configs for this device (bot/emit/wrapper_py.py)
# the switch's name -> whether it is true when autotuning is off
_TUNING_SWITCHES = {"is_autotune_disabled": True, "is_autotune_enabled": False}


def switch_name(value: ast.expr) -> str:
    """``is_autotune_disabled`` for a call of it (or of ``is_autotune_enabled``), else ""."""
    if not (isinstance(value, ast.Call) and not value.args):
        return ""
    name = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
    return name if name in _TUNING_SWITCHES else ""


def untuned_branch(stmt: ast.stmt, switches: dict[str, str]) -> list[ast.stmt] | None:
    """The statements run with autotuning off, for ``if is_autotune_disabled(): ... else: ...``
    (or ``is_autotune_enabled()``, either negated, or a variable holding one of them)."""
    if not isinstance(stmt, ast.If):
        return None
    test, negated = stmt.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    name = switches.get(test.id, "") if isinstance(test, ast.Name) else switch_name(test)
    if not name:
        return None
    off_when_true = _TUNING_SWITCHES[name] != negated
    return stmt.body if off_when_true else stmt.orelse


def generator_of(functions: dict[str, ast.FunctionDef], value: ast.expr) -> ast.FunctionDef | None:
    """The module's config generator ``value`` calls: ``_gen(...)`` or ``list(_gen(...))``."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "list" and len(value.args) == 1:
        value = value.args[0]
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return None
    fn = functions.get(value.func.id)
    return fn if fn is not None and any(isinstance(n, ast.Yield) for n in ast.walk(fn)) else None


def configs_calls(
    functions: dict[str, ast.FunctionDef], node: ast.expr
) -> tuple[ast.expr, ast.FunctionDef | None]:
    """``node`` with each call of a config generator replaced by the wrapper's ``_autotune_configs()``,
    and the generator of the first call replaced."""
    found: list[ast.FunctionDef] = []

    class Replace(ast.NodeTransformer):
        def visit_Call(self, call: ast.Call) -> ast.AST:
            generator = generator_of(functions, call)
            if generator is None or getattr(call.func, "id", "") == "list":
                return self.generic_visit(call)
            found.append(generator)
            return ast.Call(func=ast.Name(CONFIGS_CALL, ast.Load()), args=[], keywords=[])

    replaced = Replace().visit(copy.deepcopy(node))
    return replaced, (found[0] if found else None)
