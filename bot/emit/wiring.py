"""Idempotent wiring edits of the crate and the packages (``lib.rs``, ``__init__.py``, the backend
selector): each function takes a file's text and returns the wired text. The test files' edits
are ``bot/emit/testfile_wiring.py``'s.

Applying an edit to its own output changes nothing, so a re-run is a no-op. An edit that
cannot find its anchor raises ``WiringError`` naming the file and what was expected.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path


class WiringError(ValueError):
    pass


GUARD = 'if is_backend_available("cutile-rs"):'


def lib_rs(text: str, op: str) -> str:
    if re.search(rf"^\s*mod\s+{re.escape(op)}\s*\{{", text, re.M):
        return text
    if "mod ffi_util" not in text:
        raise WiringError("cutile_kernels/src/lib.rs has no `mod ffi_util;` line to follow")
    block = (
        f"mod {op} {{\n"
        f'    include!("../../{op}_kernel/kernel.rs");\n'
        f'    include!("../../{op}_kernel/ffi.rs");\n'
        "}\n"
    )
    return text.rstrip("\n") + "\n\n" + block


def own_wiring(crate_dir: Path, ops_dir: Path) -> list[tuple[Path, Callable[[str, str], str]]]:
    """The shared files that carry one op's wiring, each with the edit that takes it out again."""
    return [(crate_dir / "src" / "lib.rs", lib_rs_without), (ops_dir / "__init__.py", package_init_without)]


def lib_rs_kernel_only(text: str, op: str) -> str:
    """``lib.rs`` whose ``mod <op>`` block includes the kernel alone (no launcher): what compiles
    ``kernel.rs`` before its launcher can be generated (facts are missing)."""
    block = f'mod {op} {{\n    include!("../../{op}_kernel/kernel.rs");\n}}\n'
    return lib_rs_without(text, op).rstrip("\n") + "\n\n" + block


def lib_rs_without(text: str, op: str) -> str:
    """``lib.rs`` with ``op``'s ``mod <op> { ... }`` block taken out (a kernel left out of one build);
    unchanged when there is none."""
    block = re.compile(rf"\n*^mod\s+{re.escape(op)}\s*\{{.*?^\}}[ \t]*\n?", re.M | re.S)
    return block.sub("\n", text, count=1).rstrip("\n") + "\n"


def package_init_without(text: str, op: str) -> str:
    """``ops/cutile_rs/__init__.py`` without ``op``'s import line; a guard left empty gets ``pass``."""
    lines = text.splitlines()
    kept = [x for x in lines if not re.match(rf"\s+from \. import {re.escape(op)}\b", x)]
    if len(kept) == len(lines):
        return text
    at = next((i for i, x in enumerate(kept) if x.strip() == GUARD), None)
    if at is not None and not (at + 1 < len(kept) and kept[at + 1].startswith("    ")):
        kept.insert(at + 1, "    pass")
    return "\n".join(kept) + "\n"


def package_init(text: str | None, op: str) -> str:
    """``ops/cutile_rs/__init__.py``: one sorted ``from . import <op>`` inside the availability guard."""
    line = f"    from . import {op}  # noqa: F401  (register dispatch entry)"
    if text is None or not text.strip():
        return f"from tilegym.backend import is_backend_available\n\n{GUARD}\n{line}\n"
    lines = text.splitlines()
    if any(re.match(rf"\s+from \. import {re.escape(op)}\b", x) for x in lines):
        return text
    try:
        start = next(i for i, x in enumerate(lines) if x.strip() == GUARD)
    except StopIteration:
        prefix = text.rstrip("\n") + "\n"
        if not binds(text, "is_backend_available"):
            prefix += "\nfrom tilegym.backend import is_backend_available\n"
        return prefix + f"\n{GUARD}\n{line}\n"
    end = start + 1
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    block = lines[start + 1 : end]
    imports = [x for x in block if re.match(r"\s+from \. import \w+", x)]
    if imports and len(imports) != len([x for x in block if x.strip()]):
        block.append(line)  # the guard holds more than imports: append, keep the rest as is
    else:
        block = sorted(imports + [line], key=lambda x: x.split()[3])
    return "\n".join(lines[: start + 1] + block + lines[end:]) + "\n"


def ops_init(text: str) -> str:
    """``ops/__init__.py``: a guarded ``from . import cutile_rs`` (one-time)."""
    if re.search(r"from\s+\.\s+import\s+cutile_rs\b", text):
        return text
    block = (
        f"\n# cutile-rs (Rust FFI) backend\n{GUARD}\n"
        "    try:\n"
        "        from . import cutile_rs\n"
        "    except (ImportError, RuntimeError):\n"
        "        import warnings\n\n"
        '        warnings.warn("cutile-rs backend import failed", stacklevel=2)\n'
        "        cutile_rs = None  # type: ignore\n"
        "else:\n"
        "    cutile_rs = None  # type: ignore\n"
    )
    if not binds(text, "is_backend_available"):
        block = "\nfrom tilegym.backend import is_backend_available\n" + block
    return text.rstrip("\n") + "\n" + block


def selector(text: str) -> str:
    """``backend/selector.py``: the ``"cutile-rs"`` availability key (one-time)."""
    if '"cutile-rs"' in text or "'cutile-rs'" in text:
        return text
    m = re.search(r"^(\s+)\"tilecpp\":[^\n]*\n", text, re.M)
    if not m:
        raise WiringError('backend/selector.py: no "tilecpp" entry in the availability dict to follow')
    probe = (
        "\n\ndef is_cutile_rs_available() -> bool:\n"
        '    """cutile-rs needs its crate, and cargo or an already built library."""\n'
        "    import shutil\n"
        "    from pathlib import Path\n\n"
        '    crate = Path(__file__).resolve().parent.parent / "ops" / "cutile_rs" / "cutile_kernels"\n'
        '    if not (crate / "Cargo.toml").is_file():\n'
        "        return False\n"
        '    return shutil.which("cargo") is not None or (crate / "target" / "release" / '
        '"libcutile_kernels.so").is_file()\n'
    )
    entry = f'{m.group(1)}"cutile-rs": is_cutile_rs_available(),\n'
    text = text[: m.end()] + entry + text[m.end() :]
    anchor = re.search(r"^def _check_backends_availability", text, re.M)
    if not anchor:
        raise WiringError("backend/selector.py: no _check_backends_availability() to place the probe before")
    return text[: anchor.start()].rstrip("\n") + probe + "\n\n" + text[anchor.start() :]


def binds(text: str, name: str) -> bool:
    """Whether the module binds ``name`` at its top level (an import, a def or an assignment)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return re.search(rf"\bimport\b[^\n]*\b{re.escape(name)}\b", text) is not None
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return name in bound
