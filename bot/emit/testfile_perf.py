"""Wiring of TileGym's ``test_perf*`` functions: ``"cutile-rs"`` in the backends each is
parametrized over, where that list is the function's own (``bot/emit/testfile_wiring.py`` wires
the rest of a test file)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from bot.emit.testfile_ast import after_header, parametrized_values, read_test_file, with_blocks
from bot.emit.wiring import GUARD, binds

PERF_TEST = "test_perf"
_CUTILE_RS_SPELLINGS = ("cutile-rs", "cutile_rs")


def perf_backends(text: str) -> str:
    """Add ``"cutile-rs"`` to the backends each ``test_perf*`` function is parametrized over, where
    they lack it (stage E's one allowed edit, skill agents/agent_e.md, made by the wiring so the pull
    request carries it): a literal list in the decorator gets the element; a list bound to a name
    (``_perf_backends = ["cutile", "pytorch"]``) gets, after the statement of its scope that binds it
    last, the guarded ``_backends`` block's twin. A list that reaches cutile-rs through other names
    (``_perf_backends = _backends + ["pytorch"]``, ``_backends`` wired) is left as it is, so wiring
    twice changes nothing; any other form is left alone (the perf stage then names the gap)."""
    source = read_test_file(text)
    if source is None:
        return text
    tree, lines, newline = source
    inserts: dict[tuple[int, str], tuple[int, list[str]]] = {}
    elements: set[tuple[int, int]] = set()  # (line, column) after the last element of a literal list
    for scopes, fn in _perf_functions(tree):
        values = _perf_values(fn)
        if isinstance(values, (ast.List, ast.Tuple)) and values.elts:
            if not _strings(values) & set(_CUTILE_RS_SPELLINGS):
                elements.add((values.elts[-1].end_lineno, values.elts[-1].end_col_offset))
        elif isinstance(values, ast.Name):
            found = _binding(values.id, scopes)
            if found is None or _reaches_cutile_rs(values.id, scopes, set()):
                continue
            body, stmt = found
            indent = lines[stmt.lineno - 1][: stmt.col_offset]
            block = [
                f"{indent}{GUARD}{newline}",
                f'{indent}    {values.id} = {values.id} + ["cutile-rs"]{newline}',
            ]
            inserts[(id(body), values.id)] = (stmt.end_lineno, block)
    for line, col in sorted(elements, reverse=True):
        row = lines[line - 1].encode()  # ast offsets count UTF-8 bytes
        lines[line - 1] = (row[:col] + b', "cutile-rs"' + row[col:]).decode()
    if not inserts:
        return "".join(lines) if elements else text
    out = with_blocks("".join(lines), tree, lines, list(inserts.values()), "")
    if not binds(text, "is_backend_available"):
        out = after_header(out, tree, f"from tilegym.backend import is_backend_available{newline}")
    return out


def _perf_functions(tree: ast.Module) -> Iterator[tuple[list[list[ast.stmt]], ast.FunctionDef]]:
    """Each ``test_perf*`` function with the statement lists it can read names from, innermost first
    (its class body, then the module)."""
    for node in tree.body:
        in_class = isinstance(node, ast.ClassDef)
        scopes = [node.body, tree.body] if in_class else [tree.body]
        for fn in node.body if in_class else [node]:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith(PERF_TEST):
                yield scopes, fn


def _perf_values(fn: ast.FunctionDef) -> ast.expr | None:
    """The values of the parametrize that carries the backend: the ``backend`` / ``framework``
    parameter, or one parametrized over a ``*backends`` / ``*frameworks`` name."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    for name, values in parametrized_values(fn):
        named = values.id if isinstance(values, ast.Name) else ""
        if name in params and (
            name in ("backend", "framework") or named.endswith(("backends", "frameworks"))
        ):
            return values
    return None


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _bindings(name: str, body: list[ast.stmt]) -> list[tuple[ast.stmt, ast.expr]]:
    """(the statement of ``body`` holding it, the value) of each assignment to ``name`` in ``body``,
    guarded blocks included, function and class bodies not."""
    out = []
    for stmt in body:
        for node in _walk_statement(stmt):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                isinstance(t, ast.Name) and t.id == name for t in targets
            ):
                out.append((stmt, node.value))
    return out


def _walk_statement(stmt: ast.stmt) -> Iterator[ast.AST]:
    yield stmt
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, ast.stmt):
            yield from _walk_statement(child)


def _binding(name: str, scopes: list[list[ast.stmt]]) -> tuple[list[ast.stmt], ast.stmt] | None:
    """The innermost scope that binds ``name`` and its statement that binds it last."""
    for body in scopes:
        found = _bindings(name, body)
        if found:
            return body, found[-1][0]
    return None


def _reaches_cutile_rs(name: str, scopes: list[list[ast.stmt]], seen: set[str]) -> bool:
    """Whether any value bound to ``name`` (or a name it is built from) holds a cutile-rs literal."""
    if name in seen:
        return False
    seen.add(name)
    for index, body in enumerate(scopes):
        found = _bindings(name, body)
        if not found:
            continue
        for _, value in found:
            if _strings(value) & set(_CUTILE_RS_SPELLINGS):
                return True
            names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id != name}
            # a name read in its own binding (``x = x + [...]``) is the one bound earlier
            if any(_reaches_cutile_rs(n, scopes[index:], seen) for n in names):
                return True
        return False
    return False


# A case the cuTile reference refuses with a check the wrapper carries over (`assert is_causal`),
# and which the test file skips for cuTile, is skipped for cutile-rs too: the wrapper refuses it
# the same way. Skips on anything else are cuTile's own and stay its own.
