"""TileGym's naming conventions, as rules that turn kernel names into host facts.

Each rule says where its answer came from, so the plan can show "naming: <rule>".
"""

from __future__ import annotations

import re

from bot.read.types import Param
from bot.targets.types import Source

CONFIGS_CALL = "_autotune_configs"  # the wrapper's configs for this device (bot/emit/wrapper_py.py)
DEVICE_CALL = "_device_capability"  # the wrapper's capability query (bot/emit/wrapper_py.py)


def entry_key(name: str) -> str:
    """A kernel's name as kernel.rs entries and reference kernels are matched (``_x_kernel`` ~ ``x_kernel``)."""
    return name.lstrip("_").lower()


RUST_KEYWORDS = {
    "as",
    "break",
    "const",
    "continue",
    "crate",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "async",
    "await",
    "dyn",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "macro",
    "override",
    "priv",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "try",
    "gen",
}
# C names that cffi's parser or C would reject.
C_KEYWORDS = {
    "int",
    "char",
    "float",
    "double",
    "long",
    "short",
    "signed",
    "unsigned",
    "void",
    "struct",
    "union",
    "enum",
    "const",
    "volatile",
    "register",
    "auto",
    "extern",
    "static",
    "sizeof",
    "typedef",
    "goto",
    "default",
    "case",
    "switch",
    "do",
    "while",
    "for",
    "if",
    "else",
    "return",
    "break",
    "continue",
    "inline",
    "restrict",
}
RESERVED_C_NAMES = {"device_id", "raw_stream", "num_cta_in_cga", "occupancy"}

_SHAPE = re.compile(r"^(?P<t>[a-z][a-z0-9]*)_shape(?P<i>\d)$")
_STRIDE = re.compile(r"^(?P<t>[a-z][a-z0-9]*)_stride(?P<i>\d)$")
_ROW_STRIDE = re.compile(r"^(?P<t>[a-z][a-z0-9]*)_row_stride$")


def tensor_base(param: Param) -> str:
    """``out_ptr`` -> ``out``, for a raw pointer and a ``&Tensor`` alike (a porter who turns a
    reference's ``a_ptr`` into a tensor may keep its name); any other name is kept."""
    if param.kind in ("ptr", "tensor") and param.name.endswith("_ptr") and len(param.name) > 4:
        return param.name[:-4]
    return param.name


def c_tensor_name(param: Param) -> tuple[str, str, Source]:
    """(C parameter name, Rust descriptor local, source) for a tensor or pointer parameter."""
    base = tensor_base(param)
    rule = f"{param.name} -> {base}" if base != param.name else f"{param.name} kept"
    name = base
    if base in RUST_KEYWORDS or base in C_KEYWORDS:
        name = base + "p" if base == "in" else base + "_"
        rule += f" -> {name} ({base!r} is a keyword)"
    return name, f"{base}_d", Source("naming", f"pointer/tensor parameter name: {rule}")


def descriptor_scalar(name: str, tensor_names: dict[str, str]) -> tuple[str, Source] | None:
    """A kernel scalar that names a descriptor field: ``<t>_shape<i>``, ``<t>_stride<i>``, ``<t>_row_stride``.

    ``tensor_names`` maps the tensor base used in kernel names (``in``) to its C name (``inp``).
    """
    for pattern, fmt in (
        (_SHAPE, "dim({c},{i})"),
        (_STRIDE, "stride({c},{i})"),
        (_ROW_STRIDE, "stride({c},0)"),
    ):
        m = pattern.match(name)
        if m and m.group("t") in tensor_names:
            c = tensor_names[m.group("t")]
            expr = fmt.format(c=c, i=m.groupdict().get("i", "0"))
            return expr, Source("naming", f"{name} is a descriptor field of {c}: {expr}")
    return None


def generic_arg_name(generic: str) -> tuple[str, Source]:
    """The C argument feeding a const generic: its lowercase name (``TRANSPOSE_A`` -> ``trans_a``)."""
    m = re.fullmatch(r"TRANSPOSE_([A-Z])", generic)
    if m:
        return f"trans_{m.group(1).lower()}", Source("naming", f"{generic} -> trans_{m.group(1).lower()}")
    name = generic.lower()
    if name in RESERVED_C_NAMES or name in C_KEYWORDS or name in RUST_KEYWORDS:
        name += "_value"
    return name, Source("naming", f"const generic {generic} -> C argument {name} (lowercase)")


def is_tile_width(generic: str) -> bool:
    """Generics that size a 1-D row tile (BLOCK_SIZE, TILE_SIZE, BLOCK_N, TILE_N, BN)."""
    return generic in {"BLOCK_SIZE", "TILE_SIZE", "BLOCK", "TILE", "BLOCK_N", "TILE_N", "BN", "TILE_WIDTH"}


def gemm_dim(name: str, entry, tensors) -> tuple[str, Source] | None:
    """GEMM letters over the entry's inputs ``a`` and ``b`` (else its first two, in that order) and
    softmax's ``m, n, s_m, s_n`` over a single input.

    ``m, n, k`` for rank-2 A/B; ``rt_q, rt_m, rt_n, rt_k`` (logical, batch ``q``) for rank-3, reading
    the physical dims through ``TRANSPOSE_A/B`` flag generics when the entry has them.
    """
    inputs = [t for t in tensors if t.role == "input" and any(p.name == t.param for p in entry.params)]
    generics = {g.name for g in entry.generics}
    if name in ("m", "n", "s_m", "s_n") and len(inputs) == 1:
        x = inputs[0].name
        expr = {"m": f"dim({x},0)", "n": f"dim({x},1)", "s_m": f"stride({x},0)", "s_n": f"stride({x},1)"}[
            name
        ]
        return expr, Source(
            "naming", f"`{name}` of the single input {x} (rows m, columns n, strides s_m, s_n): {expr}"
        )
    if len(inputs) < 2:
        return None
    named = {t.name.lower(): t for t in inputs}
    # A and B by their names where kernel.rs says them (`b` declared before `a` is still B), else
    # the first two inputs, in TileGym's GEMM order
    first, second = (named["a"], named["b"]) if "a" in named and "b" in named else (inputs[0], inputs[1])
    a, b = first.name, second.name
    # a raw pointer has no declared rank: the letters say it (the FFI then checks the rank they read)
    ranks = {t.rank for t in (first, second) if not (t.kind == "ptr" and t.rank is None)}
    if len(ranks) != 1:
        return None  # not a GEMM pair (layer norm's x [m,n] beside its weight [n]), or two bare pointers
    rank = ranks.pop()
    if rank == 2 and name in ("m", "n", "k"):
        expr = {"m": f"dim({a},0)", "k": f"dim({a},1)", "n": f"dim({b},1)"}[name]
        return expr, Source("naming", f"GEMM letter {name} of A={a} [m,k], B={b} [k,n]: {expr}")
    if rank == 3 and name in ("rt_q", "rt_m", "rt_n", "rt_k"):
        ta = f"{generic_arg_name('TRANSPOSE_A')[0]} != 0" if "TRANSPOSE_A" in generics else ""
        tb = f"{generic_arg_name('TRANSPOSE_B')[0]} != 0" if "TRANSPOSE_B" in generics else ""
        plain = {"rt_q": f"dim({a},0)", "rt_m": f"dim({a},1)", "rt_k": f"dim({a},2)", "rt_n": f"dim({b},2)"}
        flipped = {"rt_m": f"dim({a},2)", "rt_k": f"dim({a},1)", "rt_n": f"dim({b},1)"}
        cond = {"rt_m": ta, "rt_k": ta, "rt_n": tb}.get(name, "")
        expr = f"sel({cond}, {flipped[name]}, {plain[name]})" if cond else plain[name]
        why = f"batched GEMM logical dim {name[3:]} of A={a}, B={b}" + (
            " read through the transpose flag" if cond else ""
        )
        return expr, Source("naming", f"{why}: {expr}")
    return None


def grid_arg_names(entry) -> list[str]:
    """The grid's C arguments: ``num_programs`` for a 1-D block id, else one per block-id axis."""
    if entry.block.axes <= 1:
        return ["num_programs"]
    return ["grid_x", "grid_y", "grid_z"][: entry.block.axes]


def sequence_names(entries: list) -> list[dict[str, str]]:
    """For entries launched one after another, each step's renames of its C argument names: a name
    an earlier step already uses gets the step's number (``head_dim`` -> ``head_dim_2``), since one
    C argument cannot carry the two values two kernels may give it. The reader that values them and
    the planner that declares them both use this one rule."""
    used: set[str] = set()
    renames: list[dict[str, str]] = []
    for step, entry in enumerate(entries, 1):
        names = [generic_arg_name(g.name)[0] for g in entry.generics if g.kind == "const"]
        names += [p.name for p in entry.params if p.kind == "scalar"] + grid_arg_names(entry)
        rename = {n: f"{n}_{step}" for n in names if n in used}
        used |= {rename.get(n, n) for n in names}
        renames.append(rename)
    return renames
