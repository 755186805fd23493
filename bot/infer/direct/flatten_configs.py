"""The autotuned reference's configs as the flattener meets them: which generator the wrapper
tunes over, the one config launched, the values computed from it and the cache key.

A mixin of ``Flattener`` (bot/infer/direct/flatten.py): it reads and sets the flattener's state.
"""

from __future__ import annotations

import ast

from bot.infer.direct.autotune import ConfigChoice, generator_choice, generator_of
from bot.infer.launch.syntax import NotThisShape
from bot.infer.syntax import is_call, plain_assign


class ConfigSteps:
    module: object
    local: dict[str, ast.expr]
    generator: ConfigChoice | None
    choices: dict[str, ConfigChoice]
    config_lists: set[str]
    config_var: str
    per_config: dict[str, ast.expr]
    key: str

    def expr(self, node: ast.expr) -> str:  # the flattener's
        raise NotImplementedError

    def _tuned_key(self, stmts: list[ast.stmt]) -> None:
        """The tuning branch's cache key (``if key not in _cache:``, ``key = (...)`` there or before
        the switch) keys the wrapper's."""
        assigned = {k: v for k, v in self.local.items() if isinstance(v, ast.Tuple)}
        for node in (n for stmt in stmts for n in ast.walk(stmt)):
            if plain_assign(node) and isinstance(node.value, ast.Tuple):
                assigned[node.targets[0].id] = node.value
            if (
                isinstance(node, ast.Compare)
                and isinstance(node.ops[0], ast.NotIn)
                and isinstance(node.left, ast.Name)
                and node.left.id in assigned
            ):
                self.key = self.expr(assigned[node.left.id])
                return

    def _config_statement(self, target: ast.expr, value: ast.expr) -> bool:
        """``configs = list(_gen(...))`` and ``cfg = configs[0]`` (or ``cfg = next(_gen())``): the
        configs the wrapper tunes over and the name of the one launched; ``_fn = _a if <device> else
        _b``: the generator the device picks. No wrapper step for any of them."""
        if not isinstance(target, ast.Name):
            return False
        choice = generator_choice(self.module.functions, value, self.local)
        if choice is not None:
            self.choices[target.id] = choice
            return True
        first = is_call(value, "next") and len(value.args) == 1 and not value.keywords
        generator = generator_of(self.module.functions, value.args[0] if first else value, self.choices)
        if generator is not None:
            self._use_configs(generator, value)
            if first:  # the first config is the one launched
                self.config_var = target.id
            else:
                self.config_lists.add(target.id)
            return True
        if (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in self.config_lists
        ):
            self.config_var = target.id
            return True
        return False

    def _use_configs(self, configs: ConfigChoice, where: ast.expr) -> None:
        if self.generator is not None and self.generator != configs:
            raise NotThisShape(
                f"line {getattr(where, 'lineno', '?')}: configs of two generators: "
                f"{self.generator.name}, {configs.name}"
            )
        self.generator = configs

    def _per_config(self, value: ast.expr) -> bool:
        names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
        return bool(self.config_var) and (self.config_var in names or bool(names & set(self.per_config)))
