"""A semantic model of a reference module: what each name is bound to, in which scope.

The compiler's own scope analysis (``symtable``) says, for every name a function reads, whether it
is its own local, a closure's, or the module's; the module's top-level statements say what a
module name is bound to: an import (resolved to its qualified name, ``ct.launch`` ->
``cuda.tile.launch`` however it was imported or aliased), a function, a class, a ``@ct.kernel``
function or a value. Nothing here looks at how host code is spelled beyond that: which statement
binds a name, and the qualified name behind it.
"""

from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass, field

KERNEL_DECORATOR = "cuda.tile.kernel"
# the compiler's names for the scopes of lambdas and comprehensions (Python 3.11)
_ANONYMOUS = {
    ast.Lambda: "lambda",
    ast.ListComp: "listcomp",
    ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp",
    ast.GeneratorExp: "genexpr",
}


class ModelError(Exception):
    """The module cannot be modelled (it does not compile)."""


@dataclass
class Binding:
    """One top-level statement that binds a module name."""

    name: str
    kind: str  # "import" | "function" | "class" | "kernel" | "value"
    stmt: ast.stmt
    qualified: str  # an import's target ("cuda.tile.launch"); else "<module>.<name>"
    alias: ast.alias | None = None  # an import's own alias (one import statement binds several names)


@dataclass
class ModuleModel:
    tree: ast.Module
    module: str  # the module's dotted name ("tilegym.ops.cutile.softmax")
    bindings: dict[str, list[Binding]] = field(default_factory=dict)  # in source order
    _tables: dict[int, symtable.SymbolTable] = field(default_factory=dict)  # id(def node) -> its table
    _nodes: dict[int, ast.AST] = field(default_factory=dict)  # id(table) -> its def node
    _top: symtable.SymbolTable | None = None

    # ----------------------------------------------------------------------------- building

    @classmethod
    def build(cls, source: str, module: str, filename: str = "<reference>") -> ModuleModel:
        try:
            tree = ast.parse(source, filename=filename)
            top = symtable.symtable(source, filename, "exec")
        except (SyntaxError, ValueError) as exc:
            raise ModelError(f"{filename} does not compile: {exc}") from exc
        model = cls(tree, module, _top=top)
        model._pair_tables(tree, top)
        for stmt in tree.body:
            model._bind(stmt)
        return model

    def _pair_tables(self, node: ast.AST, table: symtable.SymbolTable) -> None:
        """Each function, class, lambda and comprehension node with the compiler's table for it:
        children come in source order, so the k-th scope-making node of a name and line is the
        k-th table of that name and line."""
        waiting: dict[tuple[str, int], list[symtable.SymbolTable]] = {}
        for child in table.get_children():
            waiting.setdefault((child.get_name(), child.get_lineno()), []).append(child)
        for sub in _scope_nodes(node):
            key = (_scope_name(sub), sub.lineno)
            tables = waiting.get(key)
            if not tables:
                continue  # a scope the compiler folded away: its names stay the enclosing table's
            child = tables.pop(0)
            self._tables[id(sub)] = child
            self._nodes[id(child)] = sub
            self._pair_tables(sub, child)

    def _bind(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self._add(Binding(alias.asname, "import", stmt, alias.name, alias))
                else:  # `import a.b` binds `a`
                    top = alias.name.split(".")[0]
                    self._add(Binding(top, "import", stmt, top, alias))
        elif isinstance(stmt, ast.ImportFrom):
            base = self.absolute(stmt.module, stmt.level)
            for alias in stmt.names:
                if alias.name != "*":
                    self._add(
                        Binding(alias.asname or alias.name, "import", stmt, f"{base}.{alias.name}", alias)
                    )
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "kernel" if self.is_kernel(stmt) else "function"
            self._add(Binding(stmt.name, kind, stmt, f"{self.module}.{stmt.name}"))
        elif isinstance(stmt, ast.ClassDef):
            self._add(Binding(stmt.name, "class", stmt, f"{self.module}.{stmt.name}"))
        else:
            for name in sorted(bound_names(stmt)):
                self._add(Binding(name, "value", stmt, f"{self.module}.{name}"))

    def _add(self, binding: Binding) -> None:
        self.bindings.setdefault(binding.name, []).append(binding)

    def absolute(self, module: str | None, level: int) -> str:
        """The dotted name an import names, a relative one resolved against this module's package."""
        if not level:
            return module or ""
        parts = self.module.split(".")[:-level]
        return ".".join(parts + ([module] if module else []))

    # ----------------------------------------------------------------------------- reading

    def binding(self, name: str) -> Binding | None:
        """The module-level binding of ``name`` (the last one, as at the end of the import)."""
        found = self.bindings.get(name)
        return found[-1] if found else None

    def is_kernel(self, fn: ast.stmt) -> bool:
        """A function decorated ``@ct.kernel`` or ``@ct.kernel(...)``, however ``cuda.tile`` was imported."""
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        for deco in fn.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if self.qualified(target, module_scope=True) == KERNEL_DECORATOR:
                return True
        return False

    def qualified(self, node: ast.expr, scope: symtable.SymbolTable | None = None, module_scope=False) -> str:
        """The qualified name of a name or attribute chain read in ``scope`` ('' when it is local
        there, or not a chain): ``tile.cdiv`` -> ``cuda.tile.cdiv`` after ``import cuda.tile as tile``."""
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value, scope, module_scope)
            return f"{base}.{node.attr}" if base else ""
        if not isinstance(node, ast.Name):
            return ""
        if not module_scope and scope is not None and not self.is_module_name(node.id, scope):
            return ""
        binding = self.binding(node.id)
        return binding.qualified if binding is not None else ""

    def is_module_name(self, name: str, scope: symtable.SymbolTable) -> bool:
        """Whether ``name`` read in ``scope`` is the module's (not a local or a closure's)."""
        if scope.get_type() == "module":
            return True
        try:
            symbol = scope.lookup(name)
        except KeyError:
            return True  # not in this table at all: the compiler resolves it globally
        if scope.get_type() == "class":
            return not symbol.is_assigned() and not symbol.is_free()
        return symbol.is_global()

    def table_of(self, node: ast.AST) -> symtable.SymbolTable | None:
        return self._tables.get(id(node))

    def node_of(self, table: symtable.SymbolTable) -> ast.AST | None:
        """The def (or lambda, class, comprehension) node of a table ``walk`` handed out."""
        return self._nodes.get(id(table))

    @property
    def top(self) -> symtable.SymbolTable:
        assert self._top is not None
        return self._top

    def module_names_read(self, stmt: ast.stmt) -> set[str]:
        """The module names a top-level statement reads when it runs and whenever anything it
        defines runs (a function's body, a nested function's, a class's methods)."""
        names: set[str] = set()
        for node, scope in self.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if self.is_module_name(node.id, scope):
                    names.add(node.id)
        return names

    def walk(self, node: ast.AST, scope: symtable.SymbolTable | None = None):
        """Every node under ``node`` with the scope it is evaluated in (a def's decorators,
        defaults and annotations in the enclosing scope, its body in its own; a comprehension's
        first iterable in the enclosing scope, the rest in its own)."""
        scope = scope or self.top
        yield node, scope
        inner = self._tables.get(id(node))
        for field_name, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for index, child in enumerate(children):
                if not isinstance(child, ast.AST):
                    continue
                if inner is None or not _in_own_scope(node, field_name):
                    yield from self.walk(child, scope)
                elif field_name == "generators" and index == 0:
                    yield child, inner
                    yield from self.walk(child.iter, scope)
                    for part in [child.target, *child.ifs]:
                        yield from self.walk(part, inner)
                else:
                    yield from self.walk(child, inner)


def parameter_names(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Every name a function's parameters bind, ``*args`` and ``**kwargs`` included."""
    a = fn.args
    return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p is not None}


def bound_names(stmt: ast.stmt) -> set[str]:
    """The names a statement binds in its own scope (nested defs' insides excluded)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
            return
        elif isinstance(node, (ast.Lambda, *_ANONYMOUS)):
            return
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(stmt)
    return names


def _scope_nodes(node: ast.AST):
    """The scope-making nodes directly under ``node``'s scope, in source order."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, *_ANONYMOUS)):
            yield child
            # a def's decorators, defaults and annotations are evaluated outside it
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                outer = list(getattr(child, "decorator_list", [])) + list(child.args.defaults)
                outer += [d for d in child.args.kw_defaults if d is not None]
                for expr in outer:
                    yield from _scope_nodes_in(expr)
            elif isinstance(child, ast.ClassDef):
                for expr in child.decorator_list + child.bases + [k.value for k in child.keywords]:
                    yield from _scope_nodes_in(expr)
            elif isinstance(child, tuple(_ANONYMOUS)) and not isinstance(child, ast.Lambda):
                # a comprehension's first iterable is evaluated outside it
                yield from _scope_nodes_in(child.generators[0].iter)
        else:
            yield from _scope_nodes(child)


def _scope_nodes_in(expr: ast.AST):
    if isinstance(expr, (ast.Lambda, *_ANONYMOUS)):
        yield expr
    yield from _scope_nodes(expr)


def _scope_name(node: ast.AST) -> str:
    for kind, name in _ANONYMOUS.items():
        if isinstance(node, kind):
            return name
    return node.name  # type: ignore[attr-defined]


def _in_own_scope(node: ast.AST, field_name: str) -> bool:
    """Whether the value of ``node``'s field is evaluated in ``node``'s own scope."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return field_name == "body"
    return isinstance(node, tuple(_ANONYMOUS))
