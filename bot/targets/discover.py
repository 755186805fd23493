"""Stage "discover": where the checkout keeps an op's facts, at any folder depth.

TileGym keeps ops and tests in subpackages (``ops/cutile/activation/gelu.py``,
``tests/ops/experimental/test_mhc.py``) and its dispatch names need not be file names
(``flash_decode.py`` registers ``fmha_decode``). So nothing here is looked up by a path built
from the op's name alone; everything follows TileGym's own registry:

- the cuTile reference: the module under ``ops/cutile/`` that calls
  ``register_impl("<name>", backend="cutile")`` for the op;
- the public function: the ``@dispatch("<name>")`` declaration anywhere under ``src/tilegym/``;
- the tests: every file under ``tests/`` whose code reaches that public function (directly,
  or through one helper of a tilegym module that calls it), with the line of its ``_backends``;
- the keyword names the tests call the op with (``{"input": x}`` handed to ``assertCorrectness``).

Each finding carries the file and line it came from.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from bot.targets.types import Discovery, Found, Source, Target, TestSite

SRC_ROOT = Path("src/tilegym")
REFERENCE_ROOT = SRC_ROOT / "ops" / "cutile"
TESTS_ROOT = Path("tests")
_BACKEND_TREES = ("cutile_rs", "tilecpp", "triton")  # other backends' code is not a public declaration


def discover(target: Target) -> Discovery:
    repo = target.repo
    tried: list[str] = []
    files = _Files()  # each file is read and parsed once, whichever finding needs it
    registry = _registrations(repo, files)
    reference, name, registry_name, name_source = _reference(target.op, registry, tried)
    public = _public(repo, name, tried, files)
    reference_path = _reference_path(registry, reference)
    tests, keywords = _tests(repo, target.op, name, public, reference_path, tried, files)
    return Discovery(
        op=target.op,
        dispatch_name=name,
        dispatch_source=name_source,
        registry_name=registry_name,
        reference=reference,
        public=public,
        tests=tuple(tests),
        call_keywords=tuple(keywords),
        candidates=tuple(sorted({r.name for r in registry if r.rel.stem == target.op})),
        tried=tuple(tried),
    )


# --------------------------------------------------------------------------- parsing helpers


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None


class _Files:
    """The text and syntax tree of each file, read once per discovery."""

    def __init__(self) -> None:
        self._text: dict[Path, str] = {}
        self._tree: dict[Path, ast.Module | None] = {}

    def text(self, path: Path) -> str:
        if path not in self._text:
            try:
                self._text[path] = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                self._text[path] = ""
        return self._text[path]

    def tree(self, path: Path) -> ast.Module | None:
        if path not in self._tree:
            try:
                self._tree[path] = ast.parse(self.text(path), filename=str(path))
            except (SyntaxError, ValueError):
                self._tree[path] = None
        return self._tree[path]


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file()) if root.is_dir() else []


def _string_arg(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def _keyword(call: ast.Call, name: str) -> object:
    for k in call.keywords:
        if k.arg == name and isinstance(k.value, ast.Constant):
            return k.value.value
    return None


def _callee_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


# --------------------------------------------------------------------------- the cuTile reference


@dataclass(frozen=True)
class _Registration:
    name: str
    rel: Path  # the module, relative to the repo
    line: int
    function: str  # the registered function's name


def _registrations(repo: Path, files: _Files) -> list[_Registration]:
    """Every ``register_impl(name, backend="cutile")``, as a decorator or as a call on a function."""
    found: list[_Registration] = []
    for path in _python_files(repo / REFERENCE_ROOT):
        tree = files.tree(path)
        if tree is None:
            continue
        rel = path.relative_to(repo)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in node.decorator_list:
                    reg = cutile_registration(deco)
                    if reg:
                        found.append(_Registration(reg, rel, deco.lineno, node.name))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Call):
                # register_impl("nvfp4_quantize", backend="cutile")(tile_nvfp4_quantize)
                reg = cutile_registration(node.func)
                if reg and node.args:
                    found.append(_Registration(reg, rel, node.lineno, _callee_name(node.args[0])))
    return found


def cutile_module_of(repo: Path, name: str) -> str:
    """The reference module (relative to the repo) that registers ``name`` for the cuTile backend;
    "" when none does."""
    found = [r for r in _registrations(repo, _Files()) if r.name == name]
    return found[0].rel.as_posix() if found else ""


def cutile_registration(node: ast.expr) -> str | None:
    if not (isinstance(node, ast.Call) and _callee_name(node.func) == "register_impl"):
        return None
    name = _string_arg(node)
    return name if name and _keyword(node, "backend") == "cutile" else None


def _reference(op: str, registry: list[_Registration], tried: list[str]):
    """(reference finding, dispatch name, the name the reference registers, why that name) for ``op``."""

    def found(reg: _Registration, why: str):
        where = f"{reg.rel.as_posix()}:{reg.line}"
        finding = Found(
            reg.rel.as_posix(), reg.line, f"register_impl({reg.name!r}, backend='cutile') {reg.function}"
        )
        return finding, reg.name, reg.name, Source("reference", f"{where} {why}")

    for name in (op, f"get_{op}"):
        exact = [r for r in registry if r.name == name]
        if exact:  # a getter is still known by the op's name: ops.py declares get_<op> for it
            finding, _, registered, source = found(exact[0], f"registers {name!r} for the cuTile backend")
            return finding, op, registered, source
    tried.append(f"{REFERENCE_ROOT.as_posix()}/**: no register_impl({op!r}) or get_{op}")
    same_file = [r for r in registry if r.rel.stem == op]
    forward = [r for r in same_file if not r.name.endswith("_backward") and not r.name.startswith("get_")]
    if len(forward) == 1:
        return found(forward[0], f"the only forward op {op}.py registers")
    if same_file:
        names = ", ".join(sorted(r.name for r in same_file))
        tried.append(f"{same_file[0].rel.as_posix()}: registers {names}; which one {op} ports is not said")
    else:
        tried.append(f"{REFERENCE_ROOT.as_posix()}/**/{op}.py: no such module")
    return None, op, op, Source("naming", f"no cuTile registration found: the kernel name {op!r}")


def _reference_path(registry: list[_Registration], reference: Found | None) -> str:
    """``tilegym.ops.cutile.<module>.<function>``: the reference's registered function by its module
    path, as a test names it when it calls each backend's module itself (test_mla_decoding); ''
    when there is no reference."""
    for reg in registry:
        if reference is not None and (reg.rel.as_posix(), reg.line) == (reference.path, reference.line):
            return f"{_module_name(reg.rel)}.{reg.function}"
    return ""


# --------------------------------------------------------------------------- the public function


def _public(repo: Path, name: str, tried: list[str], files: _Files) -> Found | None:
    """The ``@dispatch(name)`` (or ``get_<name>``) declaration, wherever it lives under src/tilegym."""
    hits: list[Found] = []
    for path in _python_files(repo / SRC_ROOT):
        rel = path.relative_to(repo)
        if any(part in _BACKEND_TREES for part in rel.parts) or "dispatch" not in files.text(path):
            continue
        tree = files.tree(path)
        if tree is None:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _callee_name(deco.func) == "dispatch":
                    declared = _string_arg(deco)
                    if declared in (name, f"get_{name}"):
                        kind = "direct" if declared == name else "getter"
                        hits.append(Found(rel.as_posix(), node.lineno, f"@dispatch({declared!r}) {kind}"))
    if not hits:
        tried.append(f"{SRC_ROOT.as_posix()}/**: no @dispatch({name!r}) or get_{name}")
        return None
    # ops.py is the documented home; prefer it, then the direct form, then path order
    hits.sort(key=lambda f: (not f.path.endswith("/ops.py"), "getter" in f.detail, f.path))
    return hits[0]


def public_function(repo: Path, found: Found) -> ast.FunctionDef | None:
    """The declared function a ``Found`` from ``_public`` points at."""
    tree = _parse(repo / found.path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.lineno == found.line:
            return node
    return None


# --------------------------------------------------------------------------- tests


def tilegym_aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "tilegym":
                    out[(a.asname or a.name).split(".")[0]] = a.name if a.asname else "tilegym"
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tilegym":
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def tilegym_path(node: ast.expr, aliases: dict[str, str]) -> str:
    """``tilegym.ops.activation.gelu`` for an attribute chain rooted at a tilegym import, else ''."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return ""
    return ".".join([aliases[node.id], *reversed(parts)])


_MAX_HOPS = 4


def _module_name(rel: Path) -> str:
    """``src/tilegym/ops/x.py`` -> ``tilegym.ops.x`` (a package's ``__init__`` is the package)."""
    parts = rel.with_suffix("").parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _reachers(repo: Path, public: Found, files: _Files) -> dict[str, str]:
    """Dotted paths of the public function and of every tilegym function that calls it through up
    to ``_MAX_HOPS`` helpers (``fused_moe`` -> ``fused_experts_impl`` -> the op), each with its chain.

    A helper calls a name by its plain name; a module that imports that name from outside tilegym
    (``from torch.nn.functional import softmax``) means something else by it."""
    decl_module = _module_name(Path(public.path))
    name = public.detail.split("'")[1]
    reach = {f"{decl_module}.{name}": name}
    functions: list[tuple[str, str, set[str]]] = []  # (dotted, plain name, names its body loads)
    unread = [
        p
        for p in _python_files(repo / SRC_ROOT)
        if not any(x in _BACKEND_TREES for x in p.relative_to(repo).parts)
    ]
    for _ in range(_MAX_HOPS):
        names = {dotted.rsplit(".", 1)[1]: dotted for dotted in reach}
        # parse only the modules whose text names a function reached so far (cheap to test)
        now = [p for p in unread if any(n in files.text(p) for n in names)]
        unread = [p for p in unread if p not in now]
        for path in now:
            functions += _module_functions(path, path.relative_to(repo), files)
        grown = False
        for dotted, plain, loads in functions:
            if dotted in reach:
                continue
            called = sorted(loads & names.keys())
            if called:
                reach[dotted] = f"{plain} -> {reach[names[called[0]]]}"
                grown = True
        if not grown:
            break
    return reach


def _helpers(repo: Path, reach: dict[str, str], hows: list[str]) -> tuple[str, ...]:
    """``<module path>::<function>`` of each tilegym helper in the chains ``hows`` name
    (``fused_moe -> fused_experts_impl -> invoke_fused_moe_kernel``): every hop but the op itself."""
    by_name = {dotted.rsplit(".", 1)[1]: dotted for dotted in reach}
    out: list[str] = []
    for how in hows:
        chain = how[how.find("(") + 1 : how.rfind(")")] if "(" in how else ""
        for plain in chain.split(" -> ")[:-1]:
            dotted = by_name.get(plain.strip())
            if dotted is None:
                continue
            module = Path(*dotted.split(".")[:-1])
            for rel in (Path("src") / module.with_suffix(".py"), Path("src") / module / "__init__.py"):
                if (repo / rel).is_file() and f"{rel.as_posix()}::{plain.strip()}" not in out:
                    out.append(f"{rel.as_posix()}::{plain.strip()}")
                    break
    return tuple(sorted(out))


def _module_functions(path: Path, rel: Path, files: _Files) -> list[tuple[str, str, set[str]]]:
    """(dotted name, plain name, names its body loads) of each module-level function."""
    tree = files.tree(path)
    if tree is None:
        return []
    foreign = {
        a.asname or a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] not in ("tilegym", "")
        for a in n.names
    }
    module = _module_name(rel)
    return [
        (
            f"{module}.{node.name}",
            node.name,
            {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in foreign},
        )
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    ]


def _reaches(path: str, reach: dict[str, str]) -> str:
    """The chain when ``path`` names a function in ``reach`` directly or through a package that
    re-exports it (``tilegym.ops.fmha`` for ``tilegym.ops.ops.fmha``); '' otherwise."""
    module, _, plain = path.rpartition(".")
    for dotted, chain in reach.items():
        decl, _, name = dotted.rpartition(".")
        if name == plain and (decl == module or decl.startswith(module + ".")):
            return chain
    return ""


def _tests(
    repo: Path,
    op: str,
    name: str,
    public: Found | None,
    reference_path: str,
    tried: list[str],
    files: _Files,
):
    """(test sites, keyword names the tests pass the op), every file that reaches the op: through
    the public function, or through the cuTile reference's own function named by its module path
    (such a file picks each backend's module itself; the site's ``reference_calls`` says so, and
    wiring gives it a cutile-rs branch)."""
    reach = _reachers(repo, public, files) if public else {}
    if reference_path:
        reach[reference_path] = reference_path.rsplit(".", 1)[1]
    plain_names = {d.rsplit(".", 1)[1] for d in reach}
    sites: list[TestSite] = []
    named: list[TestSite] = []
    keywords: list[str] = []
    for path in _python_files(repo / TESTS_ROOT):
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
        helpers=_helpers(repo, reach, [how for _, how in refs]),
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
    """The correctness surface (domain.md section 7): ``test_op*`` / ``test_autotune_op*``, forward only."""
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
        chain = _reaches(path, reach) if path.startswith("tilegym.") else ""
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
