"""Wiring of the crate and the packages (bot/emit/wiring.py): right place, right indentation,
and a second application changes nothing."""

from __future__ import annotations

import pytest

from bot.emit import wiring

LIB_RS = '#[path = "../../ffi_util.rs"]\nmod ffi_util;\n\nmod matmul {\n    include!("../../matmul_kernel/kernel.rs");\n}\n'


def test_lib_rs_appends_block_once():
    once = wiring.lib_rs(LIB_RS, "silu_and_mul")
    assert 'include!("../../silu_and_mul_kernel/kernel.rs");' in once
    assert 'include!("../../silu_and_mul_kernel/ffi.rs");' in once
    assert once.index("mod matmul") < once.index("mod silu_and_mul")
    assert wiring.lib_rs(once, "silu_and_mul") == once


def test_lib_rs_without_ffi_util_is_refused():
    with pytest.raises(wiring.WiringError, match="mod ffi_util"):
        wiring.lib_rs("mod other {}\n", "x")


def test_package_init_sorted_inside_guard_and_idempotent():
    text = (
        "from tilegym.backend import is_backend_available\n\n"
        'if is_backend_available("cutile-rs"):\n'
        "    from . import bmm  # noqa: F401  (register dispatch entry)\n"
        "    from . import swiglu  # noqa: F401  (register dispatch entry)\n"
    )
    out = wiring.package_init(text, "matmul")
    lines = [x.split()[3] for x in out.splitlines() if x.startswith("    from . import")]
    assert lines == ["bmm", "matmul", "swiglu"]
    assert wiring.package_init(out, "matmul") == out


def test_package_init_created_when_missing():
    out = wiring.package_init(None, "silu_and_mul")
    assert out.startswith("from tilegym.backend import is_backend_available")
    assert '\nif is_backend_available("cutile-rs"):\n    from . import silu_and_mul' in out
    compile(out, "init", "exec")


SELECTOR = """import os


def is_cutile_available():
    return True


def _check_backends_availability():
    availability = {
        "cutile": is_cutile_available(),
        "tilecpp": False,
    }
    return availability
"""


def test_selector_gets_probe_and_key_once():
    out = wiring.selector(SELECTOR)
    assert '"cutile-rs": is_cutile_rs_available(),' in out
    assert out.index("def is_cutile_rs_available") < out.index("def _check_backends_availability")
    compile(out, "selector", "exec")
    assert wiring.selector(out) == out


def test_ops_init_guarded_import_once():
    out = wiring.ops_init("from tilegym.backend import is_backend_available\n\nX = 1\n")
    assert "from . import cutile_rs" in out and 'if is_backend_available("cutile-rs"):' in out
    compile(out, "ops", "exec")
    assert wiring.ops_init(out) == out
