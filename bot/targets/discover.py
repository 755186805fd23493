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

from bot.targets.pyread import PythonFiles, callee_name, keyword_value, parse_python, python_files, string_arg
from bot.targets.reach import BACKEND_TREES, SRC_ROOT, module_name
from bot.targets.test_sites import test_sites
from bot.targets.types import Discovery, Found, Source, Target

REFERENCE_ROOT = SRC_ROOT / "ops" / "cutile"


def discover(target: Target) -> Discovery:
    repo = target.repo
    tried: list[str] = []
    files = PythonFiles()  # each file is read and parsed once, whichever finding needs it
    registry = _registrations(repo, files)
    reference, name, registry_name, name_source = _reference(target.op, registry, tried)
    public = _public(repo, name, tried, files)
    reference_path = _reference_path(registry, reference)
    tests, keywords = test_sites(repo, target.op, name, public, reference_path, tried, files)
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


# --------------------------------------------------------------------------- the cuTile reference


@dataclass(frozen=True)
class _Registration:
    name: str
    rel: Path  # the module, relative to the repo
    line: int
    function: str  # the registered function's name


def _registrations(repo: Path, files: PythonFiles) -> list[_Registration]:
    """Every ``register_impl(name, backend="cutile")``, as a decorator or as a call on a function."""
    found: list[_Registration] = []
    for path in python_files(repo / REFERENCE_ROOT):
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
                    found.append(_Registration(reg, rel, node.lineno, callee_name(node.args[0])))
    return found


def cutile_module_of(repo: Path, name: str) -> str:
    """The reference module (relative to the repo) that registers ``name`` for the cuTile backend;
    "" when none does."""
    found = [r for r in _registrations(repo, PythonFiles()) if r.name == name]
    return found[0].rel.as_posix() if found else ""


def cutile_registration(node: ast.expr) -> str | None:
    if not (isinstance(node, ast.Call) and callee_name(node.func) == "register_impl"):
        return None
    name = string_arg(node)
    return name if name and keyword_value(node, "backend") == "cutile" else None


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
            return f"{module_name(reg.rel)}.{reg.function}"
    return ""


# --------------------------------------------------------------------------- the public function


def _public(repo: Path, name: str, tried: list[str], files: PythonFiles) -> Found | None:
    """The ``@dispatch(name)`` (or ``get_<name>``) declaration, wherever it lives under src/tilegym."""
    hits: list[Found] = []
    for path in python_files(repo / SRC_ROOT):
        rel = path.relative_to(repo)
        if any(part in BACKEND_TREES for part in rel.parts) or "dispatch" not in files.text(path):
            continue
        tree = files.tree(path)
        if tree is None:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and callee_name(deco.func) == "dispatch":
                    declared = string_arg(deco)
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
    tree = parse_python(repo / found.path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.lineno == found.line:
            return node
    return None
