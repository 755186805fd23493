"""The re-spelling kinds of spelling alone: products (``math.prod``, ``reduce``, ``numel``) and the
cuda.tile import alias (tests/respell_corpus.py).
"""

from __future__ import annotations

import ast
import io
import tokenize

from respell.model import (
    _FUNCTIONS,
    _INT_CALLS,
    _INT_METHODS,
    _INT_OPS,
    Module,
    _opaque,
    _own_nodes,
    _params,
    host_functions,
    is_plain,
    is_pure,
    owners,
)


def prod_spelling(source: str) -> str | None:
    """A product spelled another way: ``math.prod(s)`` <-> ``functools.reduce(operator.mul, s, 1)``,
    ``x.numel()`` -> ``math.prod(x.shape)``, a product of ints ``a * b`` -> ``math.prod((a, b))``."""
    mod = Module.parse(source)
    importable = set()  # modules the new spellings may name: imported already, or free to import
    for name in ("math", "functools", "operator"):
        if (mod.origins.get(name) == name and mod.bindings.get(name) == 1) or name not in mod.taken:
            importable.add(name)
    if "math" not in importable:
        return None
    products = _Products(mod, importable)
    for function in [None, *host_functions(mod)]:
        products.respell(function)
    if not products.count:
        return None
    for name in sorted(products.used, reverse=True):
        if mod.origins.get(name) != name:
            mod.tree.body.insert(_first_code(mod.tree), ast.Import(names=[ast.alias(name=name)]))
    return mod.render()


def _first_code(tree: ast.Module) -> int:
    """Where a new import goes: after the docstring and ``from __future__`` imports."""
    i = 0
    while i < len(tree.body):
        s = tree.body[i]
        docstring = i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
        if not (docstring or (isinstance(s, ast.ImportFrom) and s.module == "__future__")):
            break
        i += 1
    return i


class _Products(ast.NodeTransformer):
    """The product sites of one host function's own code at a time (``None``: module-level code)."""

    def __init__(self, mod: Module, importable: set[str]) -> None:
        self.mod = mod
        self.importable = importable
        self.used: set[str] = set()
        self.count = 0
        self.function: ast.AST | None = None
        self.owner: dict[int, ast.AST | None] = {}
        self.ints: set[str] = set()

    def respell(self, function: ast.AST | None) -> None:
        if function is None:  # module-level code, once the modules it may name are imported
            body = self.mod.tree.body
            imports = [
                i
                for i, s in enumerate(body)
                if isinstance(s, ast.Import) and {a.name for a in s.names} & {"math", "functools", "operator"}
            ]
            roots = [
                s
                for s in body[max(imports, default=-1) + 1 :]
                if not isinstance(s, (*_FUNCTIONS, ast.ClassDef))
                and not any(id(n) in self.mod.device for n in ast.walk(s))
            ]
            self.owner, self.ints = {}, set()
        elif is_plain(self.mod, function):
            roots = list(function.body)
            self.owner = owners(function)
            self.ints = _int_locals(self.mod, function, self.owner)
        else:
            return
        self.function = function
        for root in roots:
            self.visit(root)  # statements stay; only expressions inside them are replaced

    def visit_FunctionDef(self, node):  # a nested host function is respelled as a function of its own
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_BinOp(self, node):
        factors = _factors(node)
        if len(factors) < 2 or _opaque(node):
            return self.generic_visit(node)
        if not all(_is_int(self.mod, f, self.function, self.owner, self.ints) for f in factors):
            return self.generic_visit(node)
        return self._prod(ast.Tuple(elts=[self.visit(f) for f in factors], ctx=ast.Load()))

    def visit_Call(self, node):
        head = self.mod.canonical(node.func)
        simple = not node.keywords and not _opaque(node)
        if (
            head == "math.prod"
            and len(node.args) == 1
            and simple
            and {"functools", "operator"} <= self.importable
        ):
            self.used |= {"functools", "operator"}
            self.count += 1
            reduce = ast.parse("functools.reduce", mode="eval").body
            mul = ast.parse("operator.mul", mode="eval").body
            return ast.Call(
                func=reduce, args=[mul, self.visit(node.args[0]), ast.Constant(value=1)], keywords=[]
            )
        if head == "functools.reduce" and simple and _is_mul_from_one(self.mod, node):
            return self._prod(self.visit(node.args[1]))
        if isinstance(node.func, ast.Attribute) and node.func.attr == "numel" and not node.args and simple:
            return self._prod(ast.Attribute(value=self.visit(node.func.value), attr="shape", ctx=ast.Load()))
        return self.generic_visit(node)

    def _prod(self, iterable: ast.expr) -> ast.Call:
        self.used.add("math")
        self.count += 1
        return ast.Call(func=ast.parse("math.prod", mode="eval").body, args=[iterable], keywords=[])


def _is_mul_from_one(mod: Module, call: ast.Call) -> bool:
    """``reduce(operator.mul, s, 1)``: a product from 1, as ``math.prod(s)`` computes it."""
    if len(call.args) != 3:
        return False
    op, _, start = call.args
    return (
        mod.canonical(op) == "operator.mul"
        and isinstance(start, ast.Constant)
        and type(start.value) is int
        and start.value == 1
    )


def _factors(node: ast.BinOp) -> list[ast.expr]:
    """``a * b * c`` as ``[a, b, c]`` (left to right, as Python multiplies them)."""
    if not isinstance(node.op, ast.Mult):
        return []
    left = _factors(node.left) if isinstance(node.left, ast.BinOp) else []
    return [*(left or [node.left]), node.right]


def _is_int(mod: Module, node: ast.AST, function: ast.AST | None, owner: dict, known: set[str]) -> bool:
    """An expression whose value is a Python int: int constants, ``known`` locals of ``function``,
    :func:`_is_int_read` reads, and ``+ - * // %`` of those."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Name):
        return function is not None and owner.get(id(node)) is function and node.id in known
    if isinstance(node, ast.BinOp):
        return (
            isinstance(node.op, _INT_OPS)
            and _is_int(mod, node.left, function, owner, known)
            and _is_int(mod, node.right, function, owner, known)
        )
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and _is_int(
            mod, node.operand, function, owner, known
        )
    return _is_int_read(mod, node)


def _is_int_read(mod: Module, node: ast.AST) -> bool:
    """A read whose value is a Python int: ``x.shape[i]``, ``x.size(i)``, ``x.stride(i)``,
    ``x.numel()``, ``x.dim()``, ``len(s)``, ``math.ceil(v)``, ``int(v)``."""
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            index = index.operand
        return (
            _is_shape(node.value)
            and is_pure(mod, node.value)
            and isinstance(index, ast.Constant)
            and type(index.value) is int
        )
    if not isinstance(node, ast.Call) or node.keywords or not is_pure(mod, node):
        return False
    if mod.canonical(node.func) in _INT_CALLS:
        return len(node.args) == 1
    if isinstance(node.func, ast.Attribute):
        if node.func.attr in _INT_METHODS:
            return not node.args
        if node.func.attr in ("size", "stride"):
            return len(node.args) == 1
    return False


def _int_locals(mod: Module, function: ast.AST, owner: dict[int, ast.AST | None]) -> set[str]:
    """The function's locals that only ever hold Python ints: each binding an assignment of an int
    expression (:func:`_is_int`) or an unpacking of ``x.shape``, or an int ``+= -= *= //= %=``."""
    values: dict[str, list[ast.AST | None]] = {}  # name -> the values bound to it (None: not an int)
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
                elif isinstance(target, ast.Tuple) and _is_shape(node.value):
                    for t in target.elts:
                        if isinstance(t, ast.Name):
                            values.setdefault(t.id, []).append(ast.Constant(value=0))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            ok = isinstance(node.op, _INT_OPS)
            values.setdefault(node.target.id, []).append(
                ast.BinOp(left=node.target, op=node.op, right=node.value) if ok else None
            )
    stores: dict[str, int] = {}  # every binding by a name target (loops, `with ... as`, `del`)
    for node in _own_nodes(function):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
    known = {
        n
        for n, bound in values.items()
        if n not in _params(function) and None not in bound and stores.get(n) == len(bound)
    }
    while True:  # the largest set whose every binding is an int, given the set
        keep = {n for n in known if all(_is_int(mod, v, function, owner, known) for v in values[n])}
        if keep == known:
            return known
        known = keep


def _is_shape(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "shape"


def alias_import(source: str) -> str | None:
    """``import cuda.tile as ct`` re-spelled ``as tile_lang``, every use renamed, kernels included."""
    mod = Module.parse(source)
    found = [
        (stmt, a)
        for stmt in mod.tree.body
        if isinstance(stmt, ast.Import)
        for a in stmt.names
        if a.name == "cuda.tile" and a.asname
    ]
    if len(found) != 1:
        return None
    _, alias = found[0]
    old = alias.asname
    if mod.bindings.get(old) != 1 or "globals" in mod.taken:
        return None
    new = mod.fresh("tile_lang")
    alias.asname = new
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
    for stmt in mod.tree.body:  # the kept kernel text, renamed token by token where that is exact
        if id(stmt) in mod.kept_text:
            text = _renamed_tokens(mod.kept_text[id(stmt)], old, new)
            same = text is not None and ast.dump(ast.parse(text).body[0]) == ast.dump(stmt)
            mod.kept_text[id(stmt)] = text if same else ast.unparse(stmt)
    return mod.render()


def _renamed_tokens(text: str, old: str, new: str) -> str | None:
    """``text`` with each name token ``old`` (not an attribute, not a keyword argument) renamed."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE)]
    places = []
    for k, tok in enumerate(significant):
        if tok.type != tokenize.NAME or tok.string != old:
            continue
        before = significant[k - 1].string if k else ""
        after = significant[k + 1].string if k + 1 < len(significant) else ""
        if before == "." or after == "=" and before in ("(", ","):
            continue
        places.append(tok.start)
    lines = text.split("\n")
    for row, col in sorted(places, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old) :]
    return "\n".join(lines)
