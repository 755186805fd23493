"""An op's tests: every file under ``tests/`` whose code reaches the op's public function (directly,
or through a helper of a tilegym module that calls it), with the line of its ``_backends``, its
functional and backward tests, and the keyword names it calls the op with."""

from __future__ import annotations

import ast
from pathlib import Path

from bot.targets.pyread import PythonFiles, python_files, tilegym_aliases, tilegym_path
from bot.targets.reach import helpers_of, reachers, reaches
from bot.targets.types import Found, TestSite

TESTS_ROOT = Path("tests")


def test_sites(
    repo: Path,
    op: str,
    name: str,
    public: Found | None,
    reference_path: str,
    tried: list[str],
    files: PythonFiles,
):
    """(test sites, keyword names the tests pass the op), every file that reaches the op: through
    the public function, or through the cuTile reference's own function named by its module path
    (such a file picks each backend's module itself; the site's ``reference_calls`` says so, and
    wiring gives it a cutile-rs branch)."""
    reach = reachers(repo, public, files) if public else {}
    if reference_path:
        reach[reference_path] = reference_path.rsplit(".", 1)[1]
    plain_names = {d.rsplit(".", 1)[1] for d in reach}
    sites: list[TestSite] = []
    named: list[TestSite] = []
    keywords: list[str] = []
    for path in python_files(repo / TESTS_ROOT):
        if not path.name.startswith("test_"):
            continue
        text = files.text(path)
        by_name = path.name == f"test_{op}.py"
        if not by_name and not any(n in text for n in plain_names):
            continue
        tree = files.tree(path)
        if tree is None:
            continue
        aliases = tilegym_aliases(tree)
        refs = _op_references(tree, aliases, reach)
        if not refs:
            if by_name:
                named.append(_named_site(repo, path, text, tree, op))
            continue
        site = _calling_site(repo, path, text, tree, aliases, refs, reach, reference_path)
        sites.append(site)
        if site.functional:  # keywords of the correctness tests, not of benchmarks
            for kw in _call_keywords(tree, refs, site.functional):
                if kw not in keywords:
                    keywords.append(kw)
    sites = _preferred_sites(sites, named, op)
    if not sites:
        tried.append(f"{TESTS_ROOT.as_posix()}/**/test_*.py: none reaches {name!r}")
    return sites, keywords


def _named_site(repo: Path, path: Path, text: str, tree: ast.Module, op: str) -> TestSite:
    """A test file named after the op whose code never reaches it: the last resort."""
    line, scope = _backends_line(text)
    backward = _backward_tests(tree, path.name)
    rel = path.relative_to(repo).as_posix()
    return TestSite(rel, line, scope, f"named test_{op}.py", direct=False, backward=backward)


def _calling_site(
    repo: Path,
    path: Path,
    text: str,
    tree: ast.Module,
    aliases: dict[str, str],
    refs: list[tuple[ast.expr, str]],
    reach: dict[str, str],
    reference_path: str,
) -> TestSite:
    """A test file that reaches the op: directly or through a helper, and which of its tests
    check correctness (those a port must pass) rather than benchmark."""
    line, scope = _backends_line(text)
    # a backward-only test file exercises the op's gradient, which a forward port does not have
    functional = () if "backward" in path.name else _functional_tests(tree, refs)
    reference_calls = tuple(
        sorted({p for p in (tilegym_path(n, aliases) for n, _ in refs) if p == reference_path})
    )
    return TestSite(
        path.relative_to(repo).as_posix(),
        line,
        scope,
        refs[0][1],
        direct=not all("->" in how for _, how in refs),
        functional=functional,
        backward=_backward_tests(tree, path.name),
        reference_calls=reference_calls,
        helpers=helpers_of(repo, reach, [how for _, how in refs]),
    )


def _preferred_sites(sites: list[TestSite], named: list[TestSite], op: str) -> list[TestSite]:
    """Which sites the port tests through, best first."""
    # tests of a larger op that uses this one inside (moe calls silu_and_mul) only when no test
    # calls the op itself; a file named after the op only when nothing reaches it at all
    chosen = [s for s in sites if s.direct] or sites or named
    # files whose correctness tests call the op come first; among them, the one named after the op
    chosen.sort(key=lambda s: (not s.functional, Path(s.path).name != f"test_{op}.py", s.path))
    return chosen


def is_functional(name: str) -> bool:
    """The correctness surface (docs/specification.md, "The correctness run"): ``test_op*`` / ``test_autotune_op*``, forward only."""
    return name.startswith(("test_op", "test_autotune_op")) and "backward" not in name


def is_backward(name: str) -> bool:
    """A test of the gradient: its name says ``backward`` (``test_op_backward``, ``test_backward_*``)."""
    return name.startswith("test") and "backward" in name


def _backward_tests(tree: ast.Module, file_name: str) -> tuple[str, ...]:
    """The file's backward test functions, in file order: every test of a file named ``*backward*``
    (its ``test_op`` is a gradient test), else those whose own name says so."""
    tests = [
        fn
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        and fn.name.startswith("test")
        and ("backward" in file_name or is_backward(fn.name))
    ]
    return tuple(dict.fromkeys(fn.name for fn in sorted(tests, key=lambda fn: fn.lineno)))


def _functional_tests(tree: ast.Module, refs) -> tuple[str, ...]:
    """Functional test functions whose body names the op, in file order, or calls a helper of the
    file that does (``self._run_test(...)``, a module function), helpers of helpers included."""
    ref_nodes = {id(node) for node, _ in refs}
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    reaching = {fn.name for fn in functions if any(id(n) in ref_nodes for n in ast.walk(fn))}
    while True:  # a helper calling one that reaches the op reaches it too
        more = {fn.name for fn in functions if fn.name not in reaching and _calls_any(fn, reaching)}
        if not more:
            break
        reaching |= more
    names = [fn.name for fn in functions if is_functional(fn.name) and fn.name in reaching]
    return tuple(dict.fromkeys(names))


def _calls_any(fn: ast.AST, names: set[str]) -> bool:
    """Whether ``fn`` calls one of ``names`` as ``name(..)`` or ``self.name(..)`` / ``cls.name(..)``."""
    for call in ast.walk(fn):
        if not isinstance(call, ast.Call):
            continue
        f = call.func
        if isinstance(f, ast.Name) and f.id in names:
            return True
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
            if f.attr in names:
                return True
    return False


def _op_references(tree: ast.Module, aliases: dict[str, str], reach: dict[str, str]):
    """Nodes that name the op or a helper reaching it, with how (``line 71: tilegym.ops.x``)."""
    refs: list[tuple[ast.expr, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            path = tilegym_path(node, aliases)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            path = aliases.get(node.id, "")
        else:
            continue
        chain = reaches(path, reach) if path.startswith("tilegym.") else ""
        if chain:
            via = "" if "->" not in chain else f" ({chain})"
            refs.append((node, f"line {node.lineno}: {path}{via}"))
    return refs


def _call_keywords(tree: ast.Module, refs, functional: tuple[str, ...]) -> list[str]:
    """Keyword names the tests hand the op: ``op(input=x)``, or a dict literal of keyword arguments
    passed beside the op (``assertCorrectness(op, ref, {"input": x})``), also through a local name."""
    ref_nodes = {id(node) for node, _ in refs}
    out: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name not in functional:
            continue
        dicts = {
            n.targets[0].id: n.value
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Dict)
        }
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            if id(call.func) in ref_nodes:
                out += [k.arg for k in call.keywords if k.arg]
                continue
            if not any(id(a) in ref_nodes for a in call.args):
                continue
            values = list(call.args) + [
                k.value for k in call.keywords if k.arg in ("kwargs", "extra_test_kwargs")
            ]
            for value in values:
                if isinstance(value, ast.Name) and value.id in dicts:
                    value = dicts[value.id]
                if isinstance(value, ast.Dict):
                    out += [
                        k.value
                        for k in value.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    ]
    return list(dict.fromkeys(out))


def _backends_line(text: str) -> tuple[int, str]:
    """The line of the file's first ``_backends =`` and whether it sits in a class or the module."""
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith("_backends") and stripped[len("_backends") :].lstrip().startswith("="):
            return lineno, "class" if line[: len(line) - len(stripped)] else "module"
    return 0, ""
