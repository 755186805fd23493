"""Facts about the TileGym checkout itself: is the cutile-rs runtime there, which FFI style it speaks.

Read once per run; the plan and the emitters take the answer as data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bot.errors import Blocked
from bot.targets.types import Discovery, Source, Target, TestSite

FFI_MACROS = ("deref_descs", "resolve_dtype", "setup_device_stream", "dispatch_by_dtype", "compile_options")


@dataclass(frozen=True)
class Checkout:
    ffi_util: Path
    style: str  # "macros" | "explicit"
    style_source: Source
    has_rc_module: bool
    has_cast_tf32: bool
    lib_rs: Path
    test_sites: tuple[TestSite, ...]  # the test files to wire and run (discovery), primary first


def inspect(target: Target, discovery: Discovery) -> Checkout:
    """Fails with BLOCKED (host) when the checkout lacks the cutile-rs runtime the host side needs."""
    ffi_util = target.ops_dir / "ffi_util.rs"
    crate = target.crate_dir
    missing = [
        str(p.relative_to(target.repo))
        for p in (ffi_util, crate / "Cargo.toml", crate / "src" / "lib.rs")
        if not p.is_file()
    ]
    if missing:
        raise Blocked(
            "host",
            "checkout lacks the cutile-rs runtime: missing " + ", ".join(missing),
            host_fix="add the cutile-rs runtime (ffi_util.rs and the cutile_kernels crate) to the checkout first",
        )
    text = ffi_util.read_text(encoding="utf-8", errors="replace")
    present = [m for m in FFI_MACROS if re.search(rf"macro_rules!\s*{m}\b", text)]
    rel = ffi_util.relative_to(target.repo)
    if len(present) == len(FFI_MACROS):
        style, why = "macros", f"{rel} defines all FFI helper macros"
    else:
        absent = sorted(set(FFI_MACROS) - set(present))
        style, why = "explicit", f"{rel} lacks macro(s) {', '.join(absent)}"
    return Checkout(
        ffi_util=ffi_util,
        style=style,
        style_source=Source("checkout", why),
        has_rc_module=bool(re.search(r"pub\s+mod\s+rc\b", text)),
        has_cast_tf32=bool(re.search(r"fn\s+cast_tf32\b", text)),
        lib_rs=crate / "src" / "lib.rs",
        test_sites=discovery.test_sites,
    )
