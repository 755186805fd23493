"""The host program a registered function is: the module names it reaches, across the reference
module and the cuTile-backend modules it imports helpers from (``from tilegym.ops.cutile.splitk_reduce
import splitk_reduce``), each module read by its own semantic model.

A helper imported from another module of the cuTile backend is carried with its own reach (its
kernels included), never imported: the wrapper runs no cuTile code. Each carried name gets the
wrapper's name for it: its own, or, when two modules bind the same name, ``_<module>_<name>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.infer.model import known
from bot.infer.model.semantic import Binding, ModelError, ModuleModel


@dataclass(frozen=True, order=True)
class Unit:
    """One module name the program carries."""

    module: str  # the dotted module that binds it
    name: str


@dataclass
class Program:
    primary: ModuleModel
    load: Callable[[str], tuple[str, str] | None]  # dotted module -> (source, path in the repo)
    models: dict[str, ModuleModel] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    # an import another carried module's name satisfies: (module, local name) -> that unit
    satisfied: dict[Unit, Unit] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # helper modules that could not be read

    def __post_init__(self) -> None:
        self.models[self.primary.module] = self.primary

    def model(self, unit: Unit) -> ModuleModel:
        return self.models[unit.module]

    def bindings(self, unit: Unit) -> list[Binding]:
        return self.models[unit.module].bindings.get(unit.name, [])

    def reach(self, root: str) -> list[Unit]:
        """``root`` of the primary module and every name it reads, transitively, across modules:
        helper modules first, in the order first reached, each in its own source order; then the
        primary's."""
        seen: set[Unit] = set()
        order: list[str] = []
        todo = [Unit(self.primary.module, root)]
        while todo:
            unit = todo.pop()
            if unit in seen or unit.name not in self.models[unit.module].bindings:
                continue  # a builtin, or a name the module never binds
            seen.add(unit)
            if unit.module not in order:
                order.append(unit.module)
            model = self.models[unit.module]
            for binding in model.bindings[unit.name]:
                if binding.kind == "import":
                    target = self._helper(binding)
                    if target is not None:
                        self.satisfied[unit] = target
                        todo.append(target)
                    continue
                if binding.kind == "kernel":
                    continue  # a kernel is replaced, never run
                todo += [Unit(unit.module, n) for n in sorted(model.module_names_read(binding.stmt))]
        modules = [m for m in order if m != self.primary.module] + [self.primary.module]
        return [u for m in modules for u in sorted((u for u in seen if u.module == m), key=self._line)]

    def _same_import(self, unit: Unit) -> bool:
        """``unit`` is an import, and the primary module binds its name to the same import."""
        mine = self.bindings(unit)
        theirs = self.primary.bindings.get(unit.name, [])
        return (
            bool(mine)
            and all(b.kind == "import" for b in mine + theirs)
            and {b.qualified for b in mine} == {b.qualified for b in theirs}
        ) or (bool(mine) and mine[0].kind == "import" and not theirs)

    def _line(self, unit: Unit) -> tuple[int, int]:
        stmt = self.bindings(unit)[0].stmt
        return stmt.lineno, stmt.col_offset

    def _helper(self, binding: Binding) -> Unit | None:
        """The unit an import of a cuTile-backend module's name stands for, when that module is in
        the checkout and binds it as a function, a class or a value."""
        qualified = binding.qualified
        if not qualified.startswith(known.CUTILE_BACKEND + ".") or known.resolve(qualified).kind != "refuse":
            return None
        module, _, name = qualified.rpartition(".")
        model = self._model_of(module)
        if model is None:
            return None
        target = model.binding(name)
        if target is None or target.kind == "import":
            return None
        return Unit(module, name)

    def _model_of(self, module: str) -> ModuleModel | None:
        if module in self.models:
            return self.models[module]
        loaded = self.load(module)
        if loaded is None:
            return None
        text, path = loaded
        try:
            model = ModuleModel.build(text, module, path)
        except ModelError as exc:
            self.problems.append(str(exc))
            return None
        self.models[module], self.paths[module] = model, path
        return model

    def emitted_names(self, units: list[Unit]) -> dict[Unit, str]:
        """The wrapper's name for each carried unit: its own, unless a name of the primary module
        or of an earlier unit already holds it (then ``_<module>_<name>``)."""
        # the primary's import of a carried helper gives its name to the helper
        taken = set(self.primary.bindings) - {
            u.name for u in self.satisfied if u.module == self.primary.module
        }
        out: dict[Unit, str] = {}
        for unit in units:
            if unit.module == self.primary.module:
                out[unit] = unit.name
        for unit in units:
            if unit.module == self.primary.module or unit in self.satisfied:
                continue
            name = unit.name
            if self._same_import(unit):
                out[unit] = name  # the same import under the same name: one line serves both
                continue
            if name in taken:
                name = f"_{unit.module.rpartition('.')[2]}_{unit.name.lstrip('_')}"
            taken.add(name)
            out[unit] = name
        for unit, target in self.satisfied.items():
            out[unit] = out.get(target, target.name)
        return out
