"""A reference kernel's parameters matched onto kernel.rs by position, where that is stated.

Names come first (``direct.launch._match_params``, ``infer.syntax.generic_twin``). When names leave
a reference parameter without its kernel.rs twin, its position says which one it is only if both
kernels take the same parameters of the same kinds in the same order: the reference kernel's
parameters, and kernel.rs's runtime parameters followed by its const generics (the reference
passes the values of both in one tuple), equal in number, each pair of one kind:

- a tensor (a reference parameter the body loads, stores, gathers or scatters, or reads the shape
  or dtype of, itself or through the module's helpers it hands it to) and a ``&Tensor`` or raw
  pointer;
- a float scalar (``float``, ``ct.Constant[float]``) and an ``f32``/``f64`` scalar;
- an integer or flag (``int``, ``bool``, ``ConstInt``, ``ConstBool``) and an integer or ``bool``
  scalar, or a const generic;

the reference's parameters as written, or else its runtime parameters followed by its compile-time
constants (``ct.Constant[..]``, ``ConstInt``: the one order kernel.rs can keep for them);
a runtime scalar of the reference (``H: int``) never a const generic (a port may make a
compile-time constant a runtime scalar, as dropout's seed, but a value the reference varies per call
is no ``TILE_KPE`` though both are integers);
every pair the names already made at the same position, and the tensors the reference writes
exactly the ones kernel.rs writes. Anything short of that (a parameter of unknown kind, one more on
either side, a name pairing that crosses another position) says nothing: the parameters stay
unmatched and are asked for. One case needs no order: each kernel takes a single tensor, both
write it or both read it (``single_tensor``); then only that tensor is placed.
"""

from __future__ import annotations

import ast

from bot.read.types import Entry

_ARRAY_READS = {"load", "gather", "load_ptr"}
_ARRAY_WRITES = {"store", "scatter", "store_ptr"}
_INTS = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "isize", "usize", "bool"}
_FLOATS = {"f16", "bf16", "f32", "f64"}
HOW = "by position: the reference kernel and kernel.rs take the same parameters of the same kinds in the same order"
SINGLE = "the one tensor each kernel takes, both writing it or both reading it"


def _array_call(node: ast.AST) -> tuple[str, str] | None:
    """(``read``/``write``, the array's name) for ``ct.load(X, ..)``, ``ct.scatter(X, ..)``, ``ct.atomic_add(X, ..)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
        return None
    first = node.args[0]
    if not isinstance(first, ast.Name):
        return None
    attr = node.func.attr
    if attr in _ARRAY_WRITES or attr.startswith("atomic_"):
        return "write", first.id
    if attr in _ARRAY_READS:
        return "read", first.id
    return None


def array_uses(
    fn: ast.FunctionDef, functions: dict[str, ast.FunctionDef] | None = None, depth: int = 0
) -> dict[str, str]:
    """The function's parameters used as arrays: ``write`` (stored into), or ``read`` (loaded,
    gathered, its shape or dtype read), through the module's helpers it hands them to
    (``fmha_kernel_impl(Q, K, ..)``) up to four calls deep."""
    params = [a.arg for a in fn.args.args]
    uses: dict[str, str] = {}

    def note(name: str, use: str) -> None:
        if name in params and uses.get(name) != "write":
            uses[name] = use

    for node in ast.walk(fn):
        found = _array_call(node)
        if found is not None:
            note(found[1], found[0])
        elif isinstance(node, ast.Attribute) and node.attr in ("shape", "dtype"):
            if isinstance(node.value, ast.Name):
                note(node.value.id, "read")
        if (
            depth < 4
            and functions
            and isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and (callee := functions.get(node.func.id)) is not None
            and callee is not fn
        ):
            inner = array_uses(callee, functions, depth + 1)
            callee_params = [a.arg for a in callee.args.args]
            handed = list(zip(callee_params, node.args, strict=False))
            handed += [(k.arg, k.value) for k in node.keywords if k.arg]
            for name, arg in handed:
                if isinstance(arg, ast.Name) and name in inner:
                    note(arg.id, inner[name])
    return uses


def reference_kinds(
    kernel: ast.FunctionDef, functions: dict[str, ast.FunctionDef] | None = None
) -> dict[str, str]:
    """Each parameter's kind: ``tensor``, ``float``, ``int``, or ``""`` when the kernel does not say."""
    arrays = array_uses(kernel, functions)
    kinds: dict[str, str] = {}
    for a in kernel.args.args:
        text = ast.unparse(a.annotation).lower() if a.annotation is not None else ""
        if "float" in text:
            kinds[a.arg] = "float"
        elif "int" in text or "bool" in text:
            kinds[a.arg] = "int"
        elif not text and a.arg in arrays:
            kinds[a.arg] = "tensor"
        else:
            kinds[a.arg] = ""
    return kinds


def kernel_rs_places(entry: Entry) -> list[tuple[str, str, bool]]:
    """(name, kind, is a const generic) of kernel.rs's runtime parameters, then its const generics."""
    places: list[tuple[str, str, bool]] = []
    for p in entry.params:
        if p.kind in ("tensor", "ptr"):
            kind = "tensor"
        elif p.kind == "scalar" and p.ty in _FLOATS:
            kind = "float"
        elif p.kind == "scalar" and p.ty in _INTS:
            kind = "int"
        else:
            kind = ""
        places.append((p.name, kind, False))
    for g in entry.generics:
        if g.kind == "const":
            places.append((g.name, "int" if g.ty in _INTS else "", True))
    return places


def align(
    kernel: ast.FunctionDef,
    entry: Entry,
    named: dict[str, str],
    functions: dict[str, ast.FunctionDef] | None = None,
) -> dict[str, str] | None:
    """Reference parameter -> kernel.rs parameter or const generic, for every reference parameter,
    when exactly one pairing keeps the reference's order and agrees with the kinds, with
    ``named`` (the pairs names already made) and with which tensors are written; None otherwise.

    kernel.rs lists its runtime parameters, then its const generics; the reference passes both in
    one tuple. Its parameters split into those two runs, each in the reference's order: as written
    when kernel.rs keeps that order, or with some of its constants made runtime scalars (dropout's
    seed). When two splits fit (softmax's ``N_ROWS, TILE_SIZE, DIM_COLS`` against kernel.rs's
    runtime ``n_rows, dim_cols`` and generic ``TILE_SIZE``, names gone) position says nothing."""
    refs = [a.arg for a in kernel.args.args]
    consts = {a.arg for a in kernel.args.args if _is_constant(a.annotation)}
    places = kernel_rs_places(entry)
    runtime = [p for p in places if not p[2]]
    generics = [p for p in places if p[2]]
    if len(refs) != len(places):
        return None
    kinds = reference_kinds(kernel, functions)
    writes = {ref for ref, use in array_uses(kernel, functions).items() if use == "write"}
    taken = set(named.values())

    def fits(ref: str, place: tuple[str, str, bool]) -> bool:
        name, kind, generic = place
        if not kind or kinds[ref] != kind or (generic and ref not in consts):
            return False
        if kind == "tensor" and (ref in writes) != (name in entry.outputs):
            return False
        return named[ref] == name if ref in named else name not in taken

    # ways[i][j]: pairings of refs[i:] when j runtime places are used (capped at 2: enough to
    # tell one from many)
    n, r = len(refs), len(runtime)
    ways = [[0] * (r + 1) for _ in range(n + 1)]
    ways[n][r] = 1
    for i in range(n - 1, -1, -1):
        for j in range(min(i, r), -1, -1):
            g = i - j
            if g > len(generics):
                continue
            total = 0
            if j < r and fits(refs[i], runtime[j]):
                total += ways[i + 1][j + 1]
            if g < len(generics) and fits(refs[i], generics[g]):
                total += ways[i + 1][j]
            ways[i][j] = min(total, 2)
    if ways[0][0] != 1:
        return None
    pairs: dict[str, str] = {}
    j = 0
    for i, ref in enumerate(refs):
        if j < r and fits(ref, runtime[j]) and ways[i + 1][j + 1]:
            pairs[ref] = runtime[j][0]
            j += 1
        else:
            pairs[ref] = generics[i - j][0]
    return pairs


def _is_constant(annotation: ast.expr | None) -> bool:
    """``ct.Constant[int]``, or an alias of it named so (``ConstInt``, ``ConstBool``)."""
    return annotation is not None and "const" in ast.unparse(annotation).lower()


def single_tensor(
    kernel: ast.FunctionDef, entry: Entry, functions: dict[str, ast.FunctionDef] | None = None
) -> tuple[str, str] | None:
    """(reference parameter, kernel.rs parameter) when each kernel takes exactly one tensor, and
    both write it or both only read it: no order to guess, whatever else the two take."""
    kinds = reference_kinds(kernel, functions)
    refs = [ref for ref, kind in kinds.items() if kind == "tensor"]
    rs = [p.name for p in entry.params if p.kind in ("tensor", "ptr")]
    if "" in kinds.values() or len(refs) != 1 or len(rs) != 1:
        return None
    writes = array_uses(kernel, functions).get(refs[0]) == "write"
    return (refs[0], rs[0]) if writes == (rs[0] in entry.outputs) else None
