"""How a directly launched reference autotunes, read for the wrapper.

The wrapper tunes over the reference's configs itself, so the reader takes the side of an
``is_autotune_disabled()`` switch that launches one config, and turns each call of the module's
config generator into the wrapper's ``_autotune_configs()``. The generator may be chosen by the
device (``_fn = _sm80_configs if cap[0] < 9 else _sm90_configs``): each then is a config group
under its condition, as a generator's own ``if`` on the capability is.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from bot.infer.launch.configs import generator_configs
from bot.infer.launch.syntax import NotThisShape
from bot.infer.naming import CONFIGS_CALL, DEVICE_CALL
from bot.infer.syntax import is_call, substitute

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


@dataclass(frozen=True)
class ConfigChoice:
    """Where the launched configs come from: the module's config generators, each with the wrapper
    condition under which the reference calls it ("" for the one it calls otherwise)."""

    options: tuple[tuple[str, ast.FunctionDef], ...]

    @property
    def name(self) -> str:
        return ", ".join(f"{gen.name}()" for _, gen in self.options)

    def groups(self) -> list[dict[str, object]]:
        """The wrapper's config groups (``python.configs``), in the order the reference tests them."""
        out: list[dict[str, object]] = []
        unmet: list[str] = []  # an earlier choice that may yield nothing: later groups exclude it
        for cond, gen in self.options:
            branches = generator_configs(gen, {}, [])
            for inner, configs in branches:
                parts = [f"not ({c})" for c in unmet] + [c for c in (cond, inner) if c]
                when = parts[0] if len(parts) == 1 else " and ".join(f"({p})" for p in parts)
                out.append({"when": when or "always", "configs": configs})
            if cond and branches and branches[-1][0]:
                unmet.append(cond)
        return out


def generator_choice(
    functions: dict[str, ast.FunctionDef], value: ast.expr, local: dict[str, ast.expr]
) -> ConfigChoice | None:
    """``_a if <device test> else _b`` (chained for more) over the module's config generators; each
    test read over ``local`` as wrapper Python (``device_condition``)."""
    options: list[tuple[str, ast.FunctionDef]] = []
    while isinstance(value, ast.IfExp):
        gen = _generator_named(functions, value.body)
        if gen is None:
            return None
        options.append((device_condition(value.test, local), gen))
        value = value.orelse
    last = _generator_named(functions, value)
    if not options or last is None:
        return None
    return ConfigChoice((*options, ("", last)))


def device_condition(test: ast.expr, local: dict[str, ast.expr]) -> str:
    """A config choice's test as the wrapper's Python: the capability query (of any device argument)
    is the wrapper's ``_device_capability()``, asked once per device, so nothing else may be read."""

    class Query(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if is_call(node, "get_device_capability"):
                return ast.Call(func=ast.Name(DEVICE_CALL, ast.Load()), args=[], keywords=[])
            return self.generic_visit(node)

    condition = Query().visit(substitute(test, local, {}))
    others = {n.id for n in ast.walk(condition) if isinstance(n, ast.Name)} - {DEVICE_CALL}
    if others:
        raise NotThisShape(
            f"line {test.lineno}: the config generator is chosen by `{ast.unparse(test)}`, "
            f"which reads {', '.join(sorted(others))} besides the device capability"
        )
    return ast.unparse(condition)


def _generator_named(functions: dict[str, ast.FunctionDef], node: ast.expr) -> ast.FunctionDef | None:
    fn = functions.get(node.id) if isinstance(node, ast.Name) else None
    return fn if fn is not None and any(isinstance(n, ast.Yield) for n in ast.walk(fn)) else None


def generator_of(
    functions: dict[str, ast.FunctionDef], value: ast.expr, choices: dict[str, ConfigChoice] | None = None
) -> ConfigChoice | None:
    """The configs ``value`` calls for: ``_gen(...)`` or ``list(_gen(...))`` of a module generator,
    or a call of a variable ``choices`` holds (a generator chosen by the device)."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "list" and len(value.args) == 1:
        value = value.args[0]
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return None
    if value.func.id in (choices or {}):
        return choices[value.func.id]
    fn = _generator_named(functions, value.func)
    return ConfigChoice((("", fn),)) if fn is not None else None


def configs_calls(
    functions: dict[str, ast.FunctionDef], node: ast.expr, choices: dict[str, ConfigChoice] | None = None
) -> tuple[ast.expr, ConfigChoice | None]:
    """``node`` with each call of a config generator replaced by the wrapper's ``_autotune_configs()``,
    and the configs of the first call replaced."""
    found: list[ConfigChoice] = []

    class Replace(ast.NodeTransformer):
        def visit_Call(self, call: ast.Call) -> ast.AST:
            configs = generator_of(functions, call, choices)
            if configs is None or getattr(call.func, "id", "") == "list":
                return self.generic_visit(call)
            found.append(configs)
            return ast.Call(func=ast.Name(CONFIGS_CALL, ast.Load()), args=[], keywords=[])

    replaced = Replace().visit(copy.deepcopy(node))
    return replaced, (found[0] if found else None)
