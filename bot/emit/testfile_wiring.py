"""Idempotent wiring edits of TileGym's test files: cutile-rs in their backend lists (``test_perf``'s
too), the cuTile skips cutile-rs inherits, forward-only skips, and cutile-rs twins of the branches
that pick a backend's module. Each function takes a file's text and returns the wired text;
applying one to its own output changes nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator

from bot.emit.testfile_ast import parametrized_values, read_test_file, with_blocks
from bot.emit.testfile_perf import PERF_TEST as PERF_TEST  # the perf stage reads it here
from bot.emit.testfile_perf import perf_backends
from bot.emit.wiring import GUARD, WiringError, binds
from bot.infer.syntax import is_call, plain_assign
from bot.targets.pyread import tilegym_aliases, tilegym_path


def test_backends(
    text: str,
    backward: Iterable[str] = (),
    routes: dict[str, str] | None = None,
    checked: Iterable[str] = (),
    dtypes: Iterable[str] = (),
) -> str:
    """Add ``"cutile-rs"`` to ``_backends`` right after the tilecpp block, at ``_backends``' indentation;
    give each cuTile skip on a value the wrapper checks, or on a dtype outside ``dtypes`` (the
    wrapper's), a cutile-rs twin (:func:`inherited_skips`),
    make each test named in ``backward`` skip its cutile-rs case (:func:`forward_only_skips`) and
    give each backend branch that calls a reference function in ``routes`` its cutile-rs twin
    (:func:`route_backend_calls`)."""
    text = forward_only_skips(inherited_skips(_add_backend(text), checked, dtypes), backward)
    return perf_backends(route_backend_calls(text, routes or {}))


INHERITED_SKIP = "cutile-rs carries the check of the cuTile reference, so it inherits this cuTile skip: "
# A case skipped for cuTile on a dtype the wrapper does not dispatch (`dtype == torch.float8_e4m3fn`
# with no f8 kernel) would only meet the wrapper's dtype check: it is skipped for cutile-rs too.
INHERITED_DTYPE_SKIP = "cutile-rs dispatches no kernel for this dtype, so it inherits this cuTile skip: "


def inherited_skips(text: str, checked: Iterable[str], dtypes: Iterable[str] = ()) -> str:
    """After each ``if <backend> == "cutile" [and <cond>]:`` block that only skips (``pytest.skip``,
    possibly under further ``if``s) and reads a name in ``checked`` (the names the wrapper's
    checks read), the same block for ``"cutile-rs"``, its skip messages prefixed with
    :data:`INHERITED_SKIP`; so too for a block that tests ``<x> == torch.<X>`` (or ``in`` a tuple
    of them) for no X in ``dtypes`` (the torch dtypes the wrapper accepts; none given: no such
    rule), prefixed with :data:`INHERITED_DTYPE_SKIP`. A block that already has its twin is left
    alone (wiring twice changes nothing); a block that does anything but skip is not copied."""
    checked, dtypes = set(checked), set(dtypes)
    if not checked and not dtypes:
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    inserts: list[tuple[int, list[str]]] = []
    for fn, arg in _backend_functions(tree):
        for node in ast.walk(fn):
            literal = _cutile_compare(node, arg)
            if literal is None or not _only_skips(node.body) or node.orelse:
                continue
            read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - {arg, "pytest"}
            if read & checked:
                prefix = INHERITED_SKIP
            elif dtypes and _tests_refused_dtype(node, dtypes):
                prefix = INHERITED_DTYPE_SKIP
            else:
                continue
            twin = _twin(lines, node, literal, prefix)
            following = "".join(lines[node.end_lineno : node.end_lineno + len(twin)])
            if following != "".join(twin):
                inserts.append((node.end_lineno, twin))
    return with_blocks(text, tree, lines, inserts, "")


def _cutile_compare(node: ast.AST, arg: str) -> ast.Constant | None:
    """The ``"cutile"`` literal of ``if <arg> == "cutile"`` or ``if <arg> == "cutile" and ...``."""
    if not isinstance(node, ast.If):
        return None
    test = node.test
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        test = test.values[0]
    if not _tests_backend(test, arg, "cutile"):
        return None
    literal = next(x for x in (test.left, test.comparators[0]) if isinstance(x, ast.Constant))
    return literal if literal.lineno == node.lineno else None


def _only_skips(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.If):
            if not (_only_skips(stmt.body) and _only_skips(stmt.orelse)):
                return False
        elif not (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == "pytest.skip"
        ):
            return False
    return True


def _tests_refused_dtype(node: ast.If, dtypes: set[str]) -> bool:
    """Whether an ``if`` of ``node`` (itself or one nested) tests ``<x> == torch.<X>`` or
    ``<x> in (torch.<X>, ...)`` for dtypes none of which is in ``dtypes``."""
    for test in (n.test for n in ast.walk(node) if isinstance(n, ast.If)):
        for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare) and len(n.ops) == 1):
            sides = [cmp.left, cmp.comparators[0]]
            if isinstance(cmp.ops[0], ast.Eq):
                named = [_torch_dtype(x) for x in sides]
            elif isinstance(cmp.ops[0], ast.In) and isinstance(sides[1], (ast.Tuple, ast.List, ast.Set)):
                named = [_torch_dtype(x) for x in sides[1].elts]
                if None in named:
                    continue
            else:
                continue
            named = [x for x in named if x]
            if named and not set(named) & dtypes:
                return True
    return False


def _torch_dtype(node: ast.expr) -> str | None:
    """``float8_e4m3fn`` for ``torch.float8_e4m3fn``; None for anything else."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr
    return None


def _twin(lines: list[str], node: ast.If, literal: ast.Constant, prefix: str = INHERITED_SKIP) -> list[str]:
    """The lines of ``node`` for cutile-rs: its literal replaced, its string skip messages prefixed."""
    block = lines[node.lineno - 1 : node.end_lineno]
    first = block[0]
    quote = first[literal.col_offset]
    block[0] = f"{first[: literal.col_offset]}{quote}cutile-rs{quote}{first[literal.end_col_offset :]}"
    out = []
    for line in block:
        m = re.match(r"^(\s*pytest\.skip\()(f?)([\"'])(.*)$", line)
        out.append(f"{m.group(1)}{m.group(2)}{m.group(3)}{prefix}{m.group(4)}\n" if m else line)
    return [x if x.endswith("\n") else x + "\n" for x in out]


def _add_backend(text: str) -> str:
    if re.search(r"""_backends\s*(=|\+=).*["']cutile-rs["']""", text):
        return text
    lines = text.splitlines()
    first = next((i for i, x in enumerate(lines) if re.match(r"^\s*_backends\s*=", x)), None)
    if first is None:
        raise WiringError("test file has no `_backends = [...]` list to extend")
    indent = re.match(r"^(\s*)", lines[first]).group(1)
    insert_at = first + 1
    for i in range(first, len(lines)):
        if lines[i].startswith(indent + "if is_backend_available(") and "tilecpp" in lines[i]:
            j = i + 1
            while j < len(lines) and lines[j].startswith(indent + "    "):
                j += 1
            insert_at = j
            break
    else:
        # No tilecpp block: follow the last statement that extends _backends.
        for i in range(first, len(lines)):
            if re.match(rf"^{indent}_backends\s*(=|\+=)", lines[i]):
                insert_at = i + 1
    block = [f"{indent}{GUARD}", f'{indent}    _backends = _backends + ["cutile-rs"]']
    out = lines[:insert_at] + block + lines[insert_at:]
    new = "\n".join(out) + "\n"
    if not binds(text, "is_backend_available"):
        # `tilegym.is_backend_available(...)` in a test body does not bind the bare name the guard uses
        new = "from tilegym.backend import is_backend_available\n" + new
    return new


# The cited skip of a backward test's cutile-rs case: the port is forward-only (TileGym's coding rules,
# "forward-only port"); the verdict and the reports cite it by one rule (bot/classify/citation.py).
FORWARD_ONLY_SKIP = "cutile-rs is forward-only: backward is not ported (coding-rules: forward-only port)"


def forward_only_skips(text: str, backward: Iterable[str]) -> str:
    """Make each test function named in ``backward`` skip when it runs with the cutile-rs backend.

    The body (after a docstring, before any comment that opens it) starts with
    ``if <backend> == "cutile-rs": pytest.skip(FORWARD_ONLY_SKIP)``, where ``<backend>`` is the
    parameter parametrized over a ``*backends`` list (else one named ``backend``). Nothing else in the
    file changes. A test that already skips its cutile-rs case (any message, TileGym's own included),
    or has no backend parameter, is left as it is, so wiring twice changes nothing.
    """
    names = set(backward)
    if not names:
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text  # discovery found no test in a file it cannot parse
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    inserts: list[tuple[int, list[str]]] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name not in names:
            continue
        arg = _backend_param(fn)
        if arg is None or _skips_cutile_rs(fn, arg):
            continue
        body = fn.body
        docstring = ast.get_docstring(fn, clean=False) is not None
        anchor = body[1] if docstring and len(body) > 1 else body[0]
        if anchor.lineno == fn.lineno:
            continue  # a one-line def: no line of its own to put the skip on
        def_indent = lines[fn.lineno - 1][: fn.col_offset]
        if docstring and anchor is body[0]:  # the body is only a docstring: the skip follows it
            at, indent = body[0].end_lineno, lines[body[0].lineno - 1][: body[0].col_offset]
        else:
            at = min([anchor.lineno] + [d.lineno for d in getattr(anchor, "decorator_list", [])]) - 1
            indent = lines[anchor.lineno - 1][: anchor.col_offset]
            # above the comments and blank lines that open the body, so each comment keeps its statement
            floor = body[0].end_lineno if docstring else fn.lineno
            while at > floor and (not lines[at - 1].strip() or lines[at - 1].lstrip().startswith("#")):
                at -= 1
        step = indent[len(def_indent) :] or "    "
        inserts.append(
            (
                at,
                [
                    f'{indent}if {arg} == "cutile-rs":{newline}',
                    f'{indent}{step}pytest.skip("{FORWARD_ONLY_SKIP}"){newline}',
                ],
            )
        )
    return with_blocks(text, tree, lines, inserts, "pytest")


def route_backend_calls(text: str, routes: dict[str, str]) -> str:
    """Give each ``if <backend> == "cutile":`` branch that calls a function of ``routes`` (the cuTile
    reference's function by its module path, ``tilegym.ops.cutile.m.f``) a twin
    ``elif <backend> == "cutile-rs":`` right after it: the same statements, each such call naming the
    cutile-rs wrapper's function (``routes[path]``) instead.

    Such a test picks each backend's module itself and skips a backend it does not know in its
    ``else``; without the twin the cutile-rs case would never reach the port. A chain that already
    tests for ``"cutile-rs"`` is left as it is, so wiring twice changes nothing.
    """
    if not routes:
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    aliases = tilegym_aliases(tree)
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    inserts: list[tuple[int, list[str]]] = []
    for fn, arg in _backend_functions(tree):
        for branch in ast.walk(fn):
            if not (isinstance(branch, ast.If) and _tests_backend(branch.test, arg, "cutile")):
                continue
            if any(_tests_backend(b.test, arg, "cutile-rs") for b in _chain(fn, branch)):
                continue
            calls = [
                n
                for stmt in branch.body
                for n in ast.walk(stmt)
                if isinstance(n, (ast.Attribute, ast.Name)) and tilegym_path(n, aliases) in routes
            ]
            one_line = all(n.lineno == n.end_lineno for n in calls)
            if not calls or not one_line or branch.body[0].lineno == branch.lineno:
                continue  # nothing to route, or no line of its own to copy
            # from the line after the header, so blank lines and comments opening the body come too
            first, last = branch.test.end_lineno + 1, branch.body[-1].end_lineno
            body = lines[first - 1 : last]
            for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset), reverse=True):
                row = body[node.lineno - first].encode()  # ast offsets count UTF-8 bytes
                routed = routes[tilegym_path(node, aliases)].encode()
                body[node.lineno - first] = (
                    row[: node.col_offset] + routed + row[node.end_col_offset :]
                ).decode()
            inserts.append((last, _cutile_rs_branch(lines[branch.lineno - 1], arg, body, newline)))
    return with_blocks(text, tree, lines, inserts, "tilegym")


def helper_backend_twins(text: str, functions: Iterable[str]) -> str:
    """Give each ``if <b> == "cutile":`` branch of the helper ``functions`` (module level) a twin
    ``elif <b> == "cutile-rs":`` right after it, the same statements: ``<b>`` a name the function
    binds to ``get_current_backend()``.

    Such a helper (``fused_experts_impl``) sets what the cuTile backend's implementation reads
    (``config``, ``block_size``) only for the backends it names; the cutile-rs wrapper takes the
    reference's parameters, so it reads the same values. A chain that already tests for
    ``"cutile-rs"`` is left as it is, so wiring twice changes nothing.
    """
    names = set(functions)
    if not names:
        return text
    source = read_test_file(text)
    if source is None:
        return text
    tree, lines, newline = source
    inserts: list[tuple[int, list[str]]] = []
    for fn in tree.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name not in names:
            continue
        for arg in _current_backend_names(fn):
            for branch in ast.walk(fn):
                if not (isinstance(branch, ast.If) and _tests_backend(branch.test, arg, "cutile")):
                    continue
                if any(_tests_backend(b.test, arg, "cutile-rs") for b in _chain(fn, branch)):
                    continue
                if branch.body[0].lineno == branch.lineno:
                    continue  # a one-line branch: no lines of its own to copy
                first, last = branch.test.end_lineno + 1, branch.body[-1].end_lineno
                body = lines[first - 1 : last]
                inserts.append((last, _cutile_rs_branch(lines[branch.lineno - 1], arg, body, newline)))
    return with_blocks(text, tree, lines, inserts, "")


def _cutile_rs_branch(head: str, arg: str, body: list[str], newline: str) -> list[str]:
    """``elif <arg> == "cutile-rs":`` at the indent of the ``if`` line ``head``, then ``body``'s
    lines (the last one ended, so the lines after it stay their own)."""
    indent = head[: len(head) - len(head.lstrip())]
    if body and not body[-1].endswith(("\n", "\r")):
        body = [*body[:-1], body[-1] + newline]
    return [f'{indent}elif {arg} == "cutile-rs":{newline}', *body]


def _current_backend_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names ``fn`` binds to ``get_current_backend()`` (``_backend = get_current_backend()``)."""
    out: list[str] = []
    for node in ast.walk(fn):
        if (
            plain_assign(node)
            and is_call(node.value, "get_current_backend")
            and node.targets[0].id not in out
        ):
            out.append(node.targets[0].id)
    return out


def _tests_backend(test: ast.expr, arg: str, backend: str) -> bool:
    """Whether ``test`` is ``<arg> == "<backend>"`` (either side)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == arg for x in sides) and any(
        isinstance(x, ast.Constant) and x.value == backend for x in sides
    )


def _chain(fn: ast.AST, branch: ast.If) -> list[ast.If]:
    """The ``if``/``elif`` chain ``branch`` belongs to, from its head."""
    parent = {id(child): node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    head = branch
    while isinstance(up := parent.get(id(head)), ast.If) and up.orelse == [head]:
        head = up
    chain = [head]
    while len(chain[-1].orelse) == 1 and isinstance(chain[-1].orelse[0], ast.If):
        chain.append(chain[-1].orelse[0])
    return chain


def _backend_functions(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Each test function of ``tree`` with the parameter that carries its backend."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arg = _backend_param(fn)
            if arg is not None:
                yield fn, arg


def _backend_param(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The parameter that carries the backend: the parametrized one the body compares with
    ``"cutile"`` (``if framework == "cutile":``), else one parametrized over a ``*backends`` or
    ``*frameworks`` list, else ``backend``."""
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    parametrized = [(name, values) for name, values in parametrized_values(fn) if name in params]
    compared = {n.test for n in ast.walk(fn) if isinstance(n, ast.If)}
    for name, _values in parametrized:
        if any(_tests_backend(test, name, "cutile") for test in compared):
            return name
    for name, values in parametrized:
        values_name = values.id if isinstance(values, ast.Name) else getattr(values, "attr", "")
        if values_name.endswith(("backends", "frameworks")) and name.isidentifier():
            return name
    return "backend" if "backend" in params else None


def _skips_cutile_rs(fn: ast.FunctionDef | ast.AsyncFunctionDef, arg: str) -> bool:
    """Whether the function already has ``if <arg> == "cutile-rs": ... pytest.skip(...)``."""
    for node in ast.walk(fn):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1):
            continue
        sides = [node.test.left, node.test.comparators[0]]
        names_arg = any(isinstance(x, ast.Name) and x.id == arg for x in sides)
        texts = {
            c.value
            for x in sides
            for c in ([x] if isinstance(x, ast.Constant) else getattr(x, "elts", []))
            if isinstance(c, ast.Constant)
        }
        if not (names_arg and "cutile-rs" in texts and isinstance(node.test.ops[0], (ast.Eq, ast.In))):
            continue
        if any(
            isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "skip"
            for stmt in node.body
            for c in ast.walk(stmt)
        ):
            return True
    return False
