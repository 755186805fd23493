"""Wiring edits: right place, right indentation, and a second application changes nothing."""

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


CLASS_TEST = """from tilegym.backend import is_backend_available


class Test_X:
    _backends = ["cutile"]
    if is_backend_available("tilecpp"):
        _backends = _backends + ["tilecpp"]
    _perf = _backends + ["pytorch"]

    def test_op(self, backend):
        pass
"""

MODULE_TEST = """from tilegym.backend import is_backend_available

_backends = ["cutile"]
if is_backend_available("tilecpp"):
    _backends = _backends + ["tilecpp"]


class Test_Y:
    def test_op(self):
        pass
"""


def test_class_level_backends_follow_tilecpp_block():
    out = wiring.test_backends(CLASS_TEST)
    lines = out.splitlines()
    i = lines.index('    if is_backend_available("cutile-rs"):')
    assert lines[i - 1] == '        _backends = _backends + ["tilecpp"]'
    assert lines[i + 1] == '        _backends = _backends + ["cutile-rs"]'
    assert lines[i + 2].startswith("    _perf")  # before anything derived from _backends
    compile(out, "t", "exec")
    assert wiring.test_backends(out) == out


def test_module_level_backends_keep_module_indentation():
    out = wiring.test_backends(MODULE_TEST)
    assert '\nif is_backend_available("cutile-rs"):\n    _backends = _backends + ["cutile-rs"]\n' in out
    compile(out, "t", "exec")


def test_backends_without_tilecpp_block_follow_last_assignment():
    text = 'from tilegym.backend import is_backend_available\n\n_backends = ["cutile"]\n_backends += ["x"]\nY = 1\n'
    out = wiring.test_backends(text)
    lines = out.splitlines()
    assert lines[lines.index('_backends += ["x"]') + 1] == 'if is_backend_available("cutile-rs"):'


def test_test_file_without_backends_is_refused():
    with pytest.raises(wiring.WiringError, match="_backends"):
        wiring.test_backends("def test_x():\n    pass\n")


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


def test_a_qualified_call_in_a_test_body_does_not_count_as_the_guard_s_import():
    """test_mhc.py calls `tilegym.is_backend_available(backend)` inside its tests; the class-level
    guard needs the bare name imported, or the file no longer collects (NameError)."""
    text = (
        "import tilegym\n\n\nclass Test_MHC:\n"
        '    _backends = ["cutile"]\n\n'
        "    def test_op(self, backend):\n"
        "        if tilegym.is_backend_available(backend):\n"
        "            pass\n"
    )
    out = wiring.test_backends(text)
    assert out.startswith("from tilegym.backend import is_backend_available\n")
    compile(out, "test_mhc.py", "exec")
    namespace: dict = {}
    exec(out.replace("from tilegym.backend import is_backend_available\n", "").replace(
        "import tilegym\n", "is_backend_available = lambda name: True\n"), namespace)  # fmt: skip
    assert namespace["Test_MHC"]._backends == ["cutile", "cutile-rs"]
    bound = "from tilegym.backend import is_backend_available\n" + text
    assert not wiring.test_backends(bound).startswith(
        "from tilegym.backend import is_backend_available\nfrom"
    )
