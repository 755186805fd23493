"""Which tilegym functions reach an op's public function: directly, or through up to ``MAX_HOPS``
helpers (``fused_moe`` -> ``fused_experts_impl`` -> the op), each with its chain; a test that calls
one of them tests the op."""

from __future__ import annotations

import ast
from pathlib import Path

from bot.targets.pyread import PythonFiles, python_files
from bot.targets.types import Found

SRC_ROOT = Path("src/tilegym")
BACKEND_TREES = ("cutile_rs", "tilecpp", "triton")  # other backends' code is not a public declaration

MAX_HOPS = 4


def module_name(rel: Path) -> str:
    """``src/tilegym/ops/x.py`` -> ``tilegym.ops.x`` (a package's ``__init__`` is the package)."""
    parts = rel.with_suffix("").parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def reachers(repo: Path, public: Found, files: PythonFiles) -> dict[str, str]:
    """Dotted paths of the public function and of every tilegym function that calls it through up
    to ``MAX_HOPS`` helpers (``fused_moe`` -> ``fused_experts_impl`` -> the op), each with its chain.

    A helper calls a name by its plain name; a module that imports that name from outside tilegym
    (``from torch.nn.functional import softmax``) means something else by it."""
    decl_module = module_name(Path(public.path))
    name = public.detail.split("'")[1]
    reach = {f"{decl_module}.{name}": name}
    functions: list[tuple[str, str, set[str]]] = []  # (dotted, plain name, names its body loads)
    unread = [
        p
        for p in python_files(repo / SRC_ROOT)
        if not any(x in BACKEND_TREES for x in p.relative_to(repo).parts)
    ]
    for _ in range(MAX_HOPS):
        names = {dotted.rsplit(".", 1)[1]: dotted for dotted in reach}
        # parse only the modules whose text names a function reached so far (cheap to test)
        now = [p for p in unread if any(n in files.text(p) for n in names)]
        unread = [p for p in unread if p not in now]
        for path in now:
            functions += module_functions(path, path.relative_to(repo), files)
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


def helpers_of(repo: Path, reach: dict[str, str], hows: list[str]) -> tuple[str, ...]:
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


def module_functions(path: Path, rel: Path, files: PythonFiles) -> list[tuple[str, str, set[str]]]:
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
    module = module_name(rel)
    return [
        (
            f"{module}.{node.name}",
            node.name,
            {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in foreign},
        )
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    ]


def reaches(path: str, reach: dict[str, str]) -> str:
    """The chain when ``path`` names a function in ``reach`` directly or through a package that
    re-exports it (``tilegym.ops.fmha`` for ``tilegym.ops.ops.fmha``); '' otherwise."""
    module, _, plain = path.rpartition(".")
    for dotted, chain in reach.items():
        decl, _, name = dotted.rpartition(".")
        if name == plain and (decl == module or decl.startswith(module + ".")):
            return chain
    return ""
