"""The corpus: every kind by name, the re-spellings of a module, and the references they are
made from, read from the wheel at test time (tests/respell_corpus.py).
"""

from __future__ import annotations

import ast
import copy
import functools
import re
from collections.abc import Callable
from pathlib import Path

from respell.launch_kinds import (
    args_tuple,
    conditional_expr,
    conditional_stmt,
    early_return,
    grid_helper,
    grid_list,
    hoisted,
    inlined_locals,
    method_launch,
    nested_launch,
    renamed_locals,
    tuple_assign,
)
from respell.model import _FUNCTIONS, HELD_OUT, REFERENCES, Module, _is_kernel_decorator, dotted
from respell.spelling_kinds import alias_import, prod_spelling

KINDS: tuple[str, ...] = (
    "grid_helper",
    "grid_list",
    "conditional_expr",
    "conditional_stmt",
    "renamed_locals",
    "inlined_locals",
    "hoisted",
    "args_tuple",
    "nested_launch",
    "method_launch",
    "tuple_assign",
    "early_return",
    "prod_spelling",
    "alias_import",
)
REWRITES: dict[str, Callable[[str], str | None]] = {
    "grid_helper": grid_helper,
    "grid_list": grid_list,
    "conditional_expr": conditional_expr,
    "conditional_stmt": conditional_stmt,
    "renamed_locals": renamed_locals,
    "inlined_locals": inlined_locals,
    "hoisted": hoisted,
    "args_tuple": args_tuple,
    "nested_launch": nested_launch,
    "method_launch": method_launch,
    "tuple_assign": tuple_assign,
    "early_return": early_return,
    "prod_spelling": prod_spelling,
    "alias_import": alias_import,
}
ALL = "all"


def every_kind(source: str) -> str | None:
    """Every kind that applies, one after the other, in the order of :data:`KINDS` (but
    ``conditional_stmt``)."""
    current, applied = source, False
    for kind in KINDS:
        if kind == "conditional_stmt":  # it would undo conditional_expr
            continue
        new = REWRITES[kind](current)  # a kind returns None unless it rewrote a site
        if new is not None:
            current, applied = new, True
    return current if applied else None


def respellings(module_source: str) -> dict[str, str]:
    """Each kind (and ``all``) that applied to the module and changed it -> the new source."""
    return dict(_respellings(module_source))


@functools.lru_cache(maxsize=32)  # the table and the tests ask for the same modules
def _respellings(module_source: str) -> tuple[tuple[str, str], ...]:
    original = ast.dump(ast.parse(module_source))
    found = []
    for kind, rewrite in [*REWRITES.items(), (ALL, every_kind)]:
        new = rewrite(module_source)
        if new is not None and ast.dump(ast.parse(new)) != original:
            found.append((kind, new))
    return tuple(found)


def kernel_dumps(source: str, alias_as: str = "") -> list[str]:
    """``ast.dump`` of every function decorated ``@ct.kernel``, in order; with ``alias_as``, the
    cuda.tile alias of the module spelled that way first (to compare across ``alias_import``)."""
    mod = Module.parse(source)
    alias = next((a.asname for a in _cuda_tile_aliases(mod.tree)), None)
    dumps = []
    for node in ast.walk(mod.tree):
        if isinstance(node, _FUNCTIONS) and any(_is_kernel_decorator(mod, d) for d in node.decorator_list):
            node = copy.deepcopy(node)
            if alias_as and alias:
                for n in ast.walk(node):
                    if isinstance(n, ast.Name) and n.id == alias:
                        n.id = alias_as
            dumps.append(ast.dump(node))
    return dumps


def _cuda_tile_aliases(tree: ast.Module) -> list[ast.alias]:
    return [
        a
        for s in tree.body
        if isinstance(s, ast.Import)
        for a in s.names
        if a.name == "cuda.tile" and a.asname
    ]


def reference_files(wheel_root: Path) -> list[Path]:
    """The wheel's cuTile reference modules, the held-out three left out by file name unread."""
    root = wheel_root / REFERENCES
    return sorted(
        p
        for p in root.rglob("*.py")
        if p.name != "__init__.py" and not any(held in p.stem for held in HELD_OUT)
    )


def find_reference(wheel_root: Path, op: str) -> Path | None:
    """The op's reference: the module named ``<op>.py``, else the one holding ``register_impl("<op>"``."""
    if any(held in op for held in HELD_OUT):
        return None
    files = reference_files(wheel_root)
    named = [p for p in files if p.stem == op]
    if named:
        return named[0]
    mark = re.compile(r"register_impl\(\s*[\"']" + re.escape(op) + r"[\"']")
    return next((p for p in files if mark.search(p.read_text(encoding="utf-8"))), None)


def table(wheel_root: Path, ops: list[str] | None = None) -> list[tuple[str, str]]:
    """``(op, kind)`` for each kind that re-spelled the op's reference (``ops``: by default the
    fixture ops and the five cutile-rs ops of the wheel)."""
    rows = []
    for op in ops if ops is not None else corpus_ops():
        path = find_reference(wheel_root, op)
        if path is None:
            continue
        applied = respellings(path.read_text(encoding="utf-8"))
        rows += [(op, kind) for kind in (*KINDS, ALL) if kind in applied]
    return rows


FIXTURE_KERNELS = Path(__file__).resolve().parent.parent / "fixtures" / "tilegym_ops"
WHEEL_OPS = ("silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink")


def corpus_ops() -> list[str]:
    """The ops whose references the corpus re-spells: ``tests/fixtures/tilegym_ops/<op>_kernel``
    and the wheel's five cutile-rs ops."""
    fixture = sorted(
        d.name.removesuffix("_kernel") for d in FIXTURE_KERNELS.iterdir() if d.name.endswith("_kernel")
    )
    ops = fixture + [op for op in WHEEL_OPS if op not in fixture]
    return [op for op in ops if not any(held in op for held in HELD_OUT)]


def registered_functions(source: str, op: str) -> list[str]:
    """The module's functions decorated ``register_impl("<op>", backend="cutile")``; where none is
    registered under the op's own name, every function it registers for cutile."""
    found: list[tuple[str, str]] = []
    for node in ast.parse(source).body:
        if not isinstance(node, _FUNCTIONS):
            continue
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and dotted(d.func) == "register_impl" and d.args:
                name = d.args[0].value if isinstance(d.args[0], ast.Constant) else None
                backend = next((k.value.value for k in d.keywords if k.arg == "backend"), None)
                if isinstance(name, str) and backend == "cutile":
                    found.append((name, node.name))
    own = [fn for name, fn in found if name == op]
    return own or [fn for _, fn in found]
