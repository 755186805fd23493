"""The ``use`` lines of ffi.rs, and the names its body spells as full paths.

kernel.rs and ffi.rs share one ``mod <op>``: a name kernel.rs already imports is not imported
again, and where kernel.rs imports it from another path ffi.rs writes its own in full.
"""

from __future__ import annotations

import re

from bot import dtypes
from bot.plan.types import FfiPlan

_TRAITS = {"TileKernel"}  # needed in scope for their methods only: `as _` keeps them out of the way


def imports(ffi: FfiPlan, has_rc_module: bool) -> tuple[list[str], dict[str, str]]:
    """The ``use`` lines, and the names the body must spell as full paths.

    kernel.rs and ffi.rs share one ``mod <op>``, so a name kernel.rs already imports explicitly at
    its top level is not imported again (E0252): from the same path it is simply in scope; from
    another path the body writes ours as its full path (a trait comes in ``as _``).
    """
    groups = _import_groups(ffi, has_rc_module)
    theirs = {u.name: u.path.lstrip(":") for u in ffi.file_uses if not u.glob and u.name != "_"}
    return _use_lines(groups, theirs)


def _import_groups(ffi: FfiPlan, has_rc_module: bool) -> list[tuple[str, list[str]] | None]:
    """Every (path, names) ffi.rs needs, in the file's order; None is the blank line between
    the outside crates and ours."""
    uses_ptr = any(t.kind == "ptr" for t in ffi.tensors)
    fixed = not ffi.dtype_generic  # no element generic: no dtype dispatch
    half = ["bf16", "f16"]
    if fixed:
        half = [h for h in half if any(t.elem == h for t in ffi.tensors)]
    groups: list[tuple[str, list[str]] | None] = [("core::ffi", ["c_void"])]
    if uses_ptr:
        groups.append(("cuda_async::device_buffer", ["DevicePointer"]))
    groups += [
        # the byte element types a fixed-type tensor may have live beside Device in cuda_core
        # (a fixed-type tensor's, or one the element generic is dispatched over: f8e5m2)
        (
            "cuda_core",
            [
                "Device",
                "Stream",
                *sorted({t for t in [e.elem for e in ffi.tensors] + ffi.dtypes if t in dtypes.BYTE_TYPES}),
            ],
        ),
        ("cutile::half", half),
        ("cutile::prelude", ["*"]),
        ("cutile::tile_kernel", ["CompileOptions", "TileKernel"]),
        None,
        ("crate::ffi_util", sorted(_ffi_util_names(ffi, has_rc_module), key=str.lower)),
        (ffi.module, sorted({v.entry for v in ffi.variants})),
    ]
    return groups


def _ffi_util_names(ffi: FfiPlan, has_rc_module: bool) -> list[str]:
    """The helpers of crate::ffi_util this ffi.rs calls."""
    uses_tensor = any(t.kind == "tensor" for t in ffi.tensors)
    uses_tf32 = any("cast_tf32(" in e for v in ffi.variants for e in v.generics) or any(
        "cast_tf32(" in d.expr for d in ffi.derived
    )
    fixed = not ffi.dtype_generic
    util = ["TensorDesc"]
    if ffi.style == "macros" or has_rc_module:
        util.append("rc")
    if ffi.style == "explicit" and not fixed:
        util.append("dtype_str")
    if uses_tensor:
        util.append("borrow_tensor")
    if uses_tf32:
        util.append("cast_tf32")
    return util


def _use_lines(
    groups: list[tuple[str, list[str]] | None], theirs: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The ``use`` lines less what kernel.rs already imports, and the names to spell in full."""
    spelled: dict[str, str] = {}
    lines: list[str] = []
    for group in groups:
        if group is None:
            lines.append("")
            continue
        prefix, names = group
        kept = []
        for name in names:
            path = f"{prefix}::{name}"
            if name not in theirs:
                kept.append(name)
            elif theirs[name] != path:
                if name in _TRAITS:
                    kept.append(f"{name} as _")
                else:
                    spelled[name] = path
            # else: kernel.rs imports the very same path; it is in scope already
        if not kept:
            continue
        braced = len(kept) > 1 or prefix == "crate::ffi_util"
        lines.append(f"use {prefix}::" + ("{" + ", ".join(kept) + "}" if braced else kept[0]) + ";")
    return lines, spelled


_STRING = r'"(?:[^"\\]|\\.)*"'


def spell_out(lines: list[str], spelled: dict[str, str]) -> list[str]:
    """Write each name in ``spelled`` as its full path where it starts a path in code (not in a
    string or a comment, not after ``::`` or ``.``)."""
    if not spelled:
        return lines
    names = "|".join(re.escape(n) for n in sorted(spelled, key=len, reverse=True))
    pattern = re.compile(rf"{_STRING}|(?<![\w:.$])(?:{names})\b")

    def sub(m: re.Match) -> str:
        text = m.group(0)
        return text if text.startswith('"') else spelled[text]

    return [line if line.lstrip().startswith("//") else pattern.sub(sub, line) for line in lines]
