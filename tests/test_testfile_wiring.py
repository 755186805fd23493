"""Wiring of the op's test files (bot/emit/testfile_wiring.py): cutile-rs in the backends, its
twins of backend branches, the skips it inherits; a second application changes nothing."""

from __future__ import annotations

import ast

import pytest

from bot.emit import testfile_wiring, wiring

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
    out = testfile_wiring.test_backends(CLASS_TEST)
    lines = out.splitlines()
    i = lines.index('    if is_backend_available("cutile-rs"):')
    assert lines[i - 1] == '        _backends = _backends + ["tilecpp"]'
    assert lines[i + 1] == '        _backends = _backends + ["cutile-rs"]'
    assert lines[i + 2].startswith("    _perf")  # before anything derived from _backends
    compile(out, "t", "exec")
    assert testfile_wiring.test_backends(out) == out


def test_module_level_backends_keep_module_indentation():
    out = testfile_wiring.test_backends(MODULE_TEST)
    assert '\nif is_backend_available("cutile-rs"):\n    _backends = _backends + ["cutile-rs"]\n' in out
    compile(out, "t", "exec")


def test_backends_without_tilecpp_block_follow_last_assignment():
    text = 'from tilegym.backend import is_backend_available\n\n_backends = ["cutile"]\n_backends += ["x"]\nY = 1\n'
    out = testfile_wiring.test_backends(text)
    lines = out.splitlines()
    assert lines[lines.index('_backends += ["x"]') + 1] == 'if is_backend_available("cutile-rs"):'


def test_test_file_without_backends_is_refused():
    with pytest.raises(wiring.WiringError, match="_backends"):
        testfile_wiring.test_backends("def test_x():\n    pass\n")


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
    out = testfile_wiring.test_backends(text)
    assert out.startswith("from tilegym.backend import is_backend_available\n")
    compile(out, "test_mhc.py", "exec")
    namespace: dict = {}
    exec(out.replace("from tilegym.backend import is_backend_available\n", "").replace(
        "import tilegym\n", "is_backend_available = lambda name: True\n"), namespace)  # fmt: skip
    assert namespace["Test_MHC"]._backends == ["cutile", "cutile-rs"]
    bound = "from tilegym.backend import is_backend_available\n" + text
    assert not testfile_wiring.test_backends(bound).startswith(
        "from tilegym.backend import is_backend_available\nfrom"
    )


# --------------------------------------------------------------------------- forward-only skips

# Written here in the shape of TileGym's op tests: a class-level `_backends` with the tilecpp block, a
# forward test, backward tests (one with a docstring, one parametrized under another name over a list
# derived from `_backends`), one that already skips cutile-rs in its own words, and a benchmark.
CLASS_BACKWARD = '''import pytest
import torch

from tilegym.backend import is_backend_available


class Test_Blend:
    _backends = ["cutile"]
    if is_backend_available("tilecpp"):
        _backends = _backends + ["tilecpp"]
    _perf_backends = _backends + ["pytorch"]

    @pytest.mark.parametrize("backend", _backends)
    def test_op(self, backend):
        self.setUp()
        torch.testing.assert_close(blend(x), ref(x))

    @pytest.mark.parametrize("dtype", [torch.float32])
    @pytest.mark.parametrize("backend", _backends)
    def test_op_backward(self, dtype, backend):
        """Gradient of blend."""
        # inputs with grad
        self.setUp()
        out = blend(x)
        out.backward(g)
        torch.testing.assert_close(x.grad, ref_grad(x))

    @pytest.mark.parametrize("framework", _perf_backends)
    def test_backward_timing(self, framework):
        assert bench(framework) > 0

    @pytest.mark.parametrize("backend", _backends)
    def test_op_backward_odd(self, backend):
        if backend == "cutile-rs":
            pytest.skip(f"{backend} has no gradient here")
        assert odd(backend)

    def test_perf(self, backend):
        assert bench(backend) > 0
'''

# Module-level `_backends`, test functions outside any class, and no `import pytest` of its own (the
# backend comes from a fixture).
MODULE_BACKWARD = '''"""Blend tests."""

from __future__ import annotations

from tilegym.backend import is_backend_available

_backends = ["cutile"]


def test_op(backend):
    assert blend(x, backend) is not None


def test_op_backward(backend):
    grad = blend_grad(x, backend)
    assert grad is not None
'''

BACKWARD = ("test_op_backward", "test_backward_timing", "test_op_backward_odd")
SKIP = f'pytest.skip("{testfile_wiring.FORWARD_ONLY_SKIP}")'


def _without_skips(text: str) -> str:
    """The wired text with our two-line skips taken out (and the cutile-rs block and imports it needs)."""
    lines = text.splitlines()
    kept = []
    for i, line in enumerate(lines):
        if SKIP in line or (i + 1 < len(lines) and SKIP in lines[i + 1]):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


class _Out:
    grad = 1

    def backward(self, g):
        pass


class _Torch:
    float32 = 0

    class testing:
        @staticmethod
        def assert_close(*args):
            pass


def _run(text: str, cls: str | None, test: str, **kwargs):
    """Call one test of the wired ``text`` with stand-ins for tilegym, torch and what the tests use;
    the ``Skipped`` it raises, or None when it ran to the end."""
    text = text.replace("import torch\n", "").replace(
        "from tilegym.backend import is_backend_available\n", ""
    )
    namespace: dict = {
        "torch": _Torch,
        "is_backend_available": lambda name: name == "cutile-rs",
        "x": _Out(),
        "g": 1,
        "blend": lambda *a: _Out(),
        "ref": lambda *a: _Out(),
        "ref_grad": lambda *a: 1,
        "blend_grad": lambda *a: 1,
        "bench": lambda *a: 1,
        "odd": lambda *a: 1,
    }
    exec(compile(text, "test_blend.py", "exec"), namespace)
    fn = getattr(namespace[cls](), test) if cls else namespace[test]
    if cls:
        fn.__self__.setUp = lambda: None
    try:
        fn(**kwargs)
    except pytest.skip.Exception as skipped:
        return skipped
    return None


def test_backward_tests_skip_their_cutile_rs_case_with_the_citation_class_level():
    out = testfile_wiring.test_backends(CLASS_BACKWARD, BACKWARD)
    assert testfile_wiring.test_backends(out, BACKWARD) == out  # idempotent
    assert out.count(SKIP) == 2  # test_op_backward, test_backward_timing; _odd skips in its own words
    i = out.index('        """Gradient of blend."""\n')
    assert out[i:].startswith(
        '        """Gradient of blend."""\n        if backend == "cutile-rs":\n            ' + SKIP + "\n"
    )  # after the docstring, above the comment that opens the body
    assert '        if framework == "cutile-rs":\n            ' + SKIP + "\n" in out
    # nothing else changed: no assertion, no other test; only the cutile-rs backend block is added
    assert _without_skips(out) == testfile_wiring.test_backends(CLASS_BACKWARD)
    assert testfile_wiring.test_backends(CLASS_BACKWARD, ()) == testfile_wiring.test_backends(CLASS_BACKWARD)

    assert _run(out, "Test_Blend", "test_op_backward", dtype=0, backend="cutile") is None  # others run on
    skipped = _run(out, "Test_Blend", "test_op_backward", dtype=0, backend="cutile-rs")
    assert skipped is not None and skipped.msg == testfile_wiring.FORWARD_ONLY_SKIP
    timing = _run(out, "Test_Blend", "test_backward_timing", framework="cutile-rs")
    assert timing is not None and timing.msg == testfile_wiring.FORWARD_ONLY_SKIP
    assert _run(out, "Test_Blend", "test_op", backend="cutile-rs") is None  # forward tests are not touched
    assert (
        _run(out, "Test_Blend", "test_op_backward_odd", backend="cutile-rs").msg
        == "cutile-rs has no gradient here"
    )


def test_backward_tests_skip_their_cutile_rs_case_module_level():
    out = testfile_wiring.test_backends(MODULE_BACKWARD, ("test_op_backward",))
    assert testfile_wiring.test_backends(out, ("test_op_backward",)) == out
    assert '\ndef test_op_backward(backend):\n    if backend == "cutile-rs":\n        ' + SKIP + "\n" in out
    # pytest is imported for the skip, below the docstring and the __future__ import
    assert out.startswith('"""Blend tests."""\n\nfrom __future__ import annotations\nimport pytest\n')
    assert _without_skips(out).replace("import pytest\n", "") == testfile_wiring.test_backends(
        MODULE_BACKWARD
    )
    assert _run(out, None, "test_op_backward", backend="cutile-rs").msg == testfile_wiring.FORWARD_ONLY_SKIP
    assert _run(out, None, "test_op_backward", backend="cutile") is None
    assert _run(out, None, "test_op", backend="cutile-rs") is None


# --------------------------------------------------------------------------- backend branches routed

# In the shape of TileGym's test_mla_decoding: each backend's module is called by its path, a backend
# the chain does not know is skipped, and a cutile-only guard calls nothing.
BY_MODULE = """import pytest

import tilegym
from tilegym.backend import is_backend_available


class Test_Blend:
    _backends = ["cutile"]
    if is_backend_available("tilecpp"):
        _backends = _backends + ["tilecpp"]

    @pytest.mark.parametrize("backend", _backends)
    def test_op(self, backend, flag=True):
        if backend == "cutile":
            if not flag:
                pytest.skip("cutile needs flag")
        if backend == "cutile":

            def fn():
                return ("é", tilegym.ops.cutile.blend.blend(1))[1]  # a wide character before the call

        elif backend == "tilecpp":

            def fn():
                return tilegym.ops.tilecpp.blend.blend(1)

        else:
            pytest.skip(f"Backend {backend} not supported")
        return fn()
"""
ROUTES = {"tilegym.ops.cutile.blend.blend": "tilegym.ops.cutile_rs.blend.blend"}


def _run_by_module(text: str, backend: str):
    """What the wired test_op returns for ``backend`` (the module that answered), or its skip."""
    from types import SimpleNamespace as NS

    def module(name):
        return NS(blend=lambda *a: name)

    tilegym = NS(ops=NS(cutile=NS(blend=module("cutile")), cutile_rs=NS(blend=module("cutile_rs"))))
    text = text.replace("import tilegym\n", "").replace(
        "from tilegym.backend import is_backend_available\n", ""
    )
    namespace = {"tilegym": tilegym, "is_backend_available": lambda name: name == "cutile-rs"}
    exec(compile(text, "test_blend.py", "exec"), namespace)
    try:
        return namespace["Test_Blend"]().test_op(backend)
    except pytest.skip.Exception as skipped:
        return skipped.msg


def test_a_backend_branch_calling_the_reference_by_module_gets_a_cutile_rs_twin():
    assert "Backend cutile-rs not supported" in _run_by_module(
        testfile_wiring.test_backends(BY_MODULE), "cutile-rs"
    )
    out = testfile_wiring.test_backends(BY_MODULE, (), ROUTES)
    assert testfile_wiring.test_backends(out, (), ROUTES) == out  # idempotent
    assert _run_by_module(out, "cutile-rs") == "cutile_rs"  # reaches the wrapper's function
    assert _run_by_module(out, "cutile") == "cutile"  # the other backends keep their own calls
    assert "not supported" in _run_by_module(out, "other")
    # only the calling branch is twinned, right after it, with the comment and wide character kept
    assert out.count('backend == "cutile-rs"') == 1
    assert (
        '        elif backend == "cutile-rs":\n\n            def fn():\n'
        '                return ("é", tilegym.ops.cutile_rs.blend.blend(1))[1]  # a wide character before the call\n'
        '\n        elif backend == "tilecpp":\n'
    ) in out


def test_a_routed_call_through_an_import_alias_and_no_tilegym_import():
    text = BY_MODULE.replace(
        "import tilegym\n", "from tilegym.ops.cutile import blend as ct_blend\n"
    ).replace("tilegym.ops.cutile.blend.blend(1)", "ct_blend.blend(1)")
    out = testfile_wiring.test_backends(text, (), ROUTES)
    assert 'return ("é", tilegym.ops.cutile_rs.blend.blend(1))[1]' in out
    assert out.startswith("import tilegym\n")  # the twin's path needs the package bound
    assert 'return ("é", ct_blend.blend(1))[1]' in out  # the cutile branch is unchanged


PERF_BY_MODULE = """import pytest
import tilegym
from tilegym.backend import is_backend_available


class Test_Blend:
    _backends = ["cutile"]
    _perf_frameworks = _backends + ["pytorch"]

    @pytest.mark.parametrize("framework", _perf_frameworks)
    def test_perf(self, framework, record_property=None):
        if framework == "pytorch":
            framework_fn = lambda: "pytorch"  # noqa: E731
        elif is_backend_available(framework):
            if framework == "cutile":
                framework_fn = lambda: tilegym.ops.cutile.blend.blend(1)  # noqa: E731
            else:
                pytest.skip(f"Framework {framework} not supported")
        return framework_fn()
"""


def test_a_perf_test_choosing_its_module_by_framework_gets_the_twin_too():
    """TileGym's test_mla_decoding: test_perf is parametrized over ``_perf_frameworks`` and picks
    each backend's module under ``if framework == "cutile":``; without the twin every cutile-rs
    perf case skips (the H200 run of mla_decoding: 0 cutile-rs medians)."""
    out = testfile_wiring.test_backends(PERF_BY_MODULE, (), ROUTES)
    assert testfile_wiring.test_backends(out, (), ROUTES) == out
    assert '            elif framework == "cutile-rs":\n' in out
    assert "lambda: tilegym.ops.cutile_rs.blend.blend(1)" in out


HELPER = """from tilegym.backend import get_current_backend


def experts(x, fp8=False):
    _backend = get_current_backend()
    if _backend == "cutile":
        config = {"TILE_SIZE_M": 128}
        # fp8 wants smaller tiles
        if fp8:
            config["TILE_SIZE_M"] = 64
    elif _backend == "tilecpp":
        config = {"BLOCK_SIZE_M": 128}
    return config


def other(x):
    backend = get_current_backend()
    if backend == "cutile":
        return 1
    return 0
"""


def _config(text: str, backend: str, **kw):
    import types

    module = types.ModuleType("helper")
    exec(text.replace("from tilegym.backend import get_current_backend\n", ""), module.__dict__)
    module.get_current_backend = lambda: backend
    return module.experts(None, **kw)


def test_a_helper_branch_on_the_current_backend_gets_a_cutile_rs_twin_of_the_same_statements():
    with pytest.raises(UnboundLocalError):
        _config(HELPER, "cutile-rs")  # what test_moe's cutile-rs case hit before any launch
    out = testfile_wiring.helper_backend_twins(HELPER, ["experts"])
    assert testfile_wiring.helper_backend_twins(out, ["experts"]) == out  # idempotent
    assert _config(out, "cutile-rs") == {"TILE_SIZE_M": 128}
    assert _config(out, "cutile-rs", fp8=True) == {"TILE_SIZE_M": 64}
    assert _config(out, "tilecpp") == {"BLOCK_SIZE_M": 128}  # the other backends keep theirs
    # right after the "cutile" branch, its comment kept; a function not named is left alone
    assert '            config["TILE_SIZE_M"] = 64\n    elif _backend == "cutile-rs":\n' in out
    assert out.count('== "cutile-rs"') == 1


def test_a_helper_chain_that_already_names_cutile_rs_is_left_as_it_is():
    text = HELPER.replace(
        '    elif _backend == "tilecpp":',
        '    elif _backend == "cutile-rs":\n        config = {}\n    elif _backend == "tilecpp":',
    )
    assert testfile_wiring.helper_backend_twins(text, ["experts", "other"]).count('== "cutile-rs"') == 2


SKIPPING_TEST = """\
import pytest

_backends = ["cutile"]


@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("backend", _backends)
def test_op(backend, is_causal, transpose):
    if backend == "cutile" and is_causal == False:
        pytest.skip('cutile: causal only')
    if backend == "cutile":
        if transpose:
            pytest.skip("cutile: no transpose")
    if backend == "cutile" and is_causal == False:
        print("not only a skip")
        pytest.skip("x")
    run(backend, is_causal, transpose)
"""


def test_a_cutile_skip_on_what_the_wrapper_checks_is_inherited_and_only_that():
    out = testfile_wiring.inherited_skips(SKIPPING_TEST, {"is_causal"})
    added = [line for line in out.splitlines() if line not in SKIPPING_TEST.splitlines()]
    assert added == [
        '    if backend == "cutile-rs" and is_causal == False:',
        f"        pytest.skip('{testfile_wiring.INHERITED_SKIP}cutile: causal only')",
    ]  # `transpose` is not checked by the wrapper; the third block does more than skip
    ast.parse(out)
    assert testfile_wiring.inherited_skips(out, {"is_causal"}) == out  # wiring twice changes nothing
    both = testfile_wiring.inherited_skips(SKIPPING_TEST, {"is_causal", "transpose"})
    assert '    if backend == "cutile-rs":\n        if transpose:\n' in both
    assert testfile_wiring.inherited_skips(SKIPPING_TEST, set()) == SKIPPING_TEST


DTYPE_SKIPS = """\
import pytest
import torch

_backends = ["cutile"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float16])
@pytest.mark.parametrize("backend", _backends)
def test_op(backend, dtype):
    if backend == "cutile" and dtype == torch.float8_e4m3fn:
        pytest.skip("cutile: no fp8")
    if backend == "cutile":
        if dtype in (torch.float16, torch.float8_e4m3fn):
            pytest.skip("cutile: slow in half")
    if backend == "cutile" and torch.bfloat16 == dtype:
        pytest.skip("cutile: bf16 flaky")
    run(backend, dtype)
"""


def test_a_cutile_skip_on_a_dtype_the_wrapper_does_not_dispatch_is_inherited():
    accepted = ["float16", "bfloat16"]  # the wrapper's _DTYPES: no f8 kernel
    out = testfile_wiring.inherited_skips(DTYPE_SKIPS, set(), accepted)
    added = [line for line in out.splitlines() if line not in DTYPE_SKIPS.splitlines()]
    assert added == [
        '    if backend == "cutile-rs" and dtype == torch.float8_e4m3fn:',
        f'        pytest.skip("{testfile_wiring.INHERITED_DTYPE_SKIP}cutile: no fp8")',
    ]  # f16 is dispatched (the `in` block keeps its cuTile-only skip), and so is bf16
    ast.parse(out)
    assert testfile_wiring.inherited_skips(out, set(), accepted) == out  # wiring twice changes nothing
    # a wrapper that dispatches f8 too inherits none of them; one with bf16 only inherits the `in` too
    assert testfile_wiring.inherited_skips(DTYPE_SKIPS, set(), [*accepted, "float8_e4m3fn"]) == DTYPE_SKIPS
    only_bf16 = testfile_wiring.inherited_skips(DTYPE_SKIPS, set(), ["bfloat16"])
    assert only_bf16.count('== "cutile-rs"') == 2
    assert testfile_wiring.inherited_skips(DTYPE_SKIPS, set(), []) == DTYPE_SKIPS  # no dtypes known: no rule
    # through test_backends, as generate wires a test file
    wired = testfile_wiring.test_backends(DTYPE_SKIPS, dtypes=accepted)
    assert testfile_wiring.INHERITED_DTYPE_SKIP in wired


def test_only_a_dispatch_over_the_element_generic_refuses_a_tests_dtype():
    """moe_align_block's kernel takes int64 topk_ids whatever test_moe's `dtype` is: its fixed
    types refuse no float dtype of the test, so they inherit no dtype skip; moe's generic does."""
    from types import SimpleNamespace

    from bot.emit import wrapper_py

    def plan(generic: str, dtypes: list[str]):
        return SimpleNamespace(
            python=SimpleNamespace(dtypes=dtypes), ffi=SimpleNamespace(dtype_generic=generic)
        )

    assert wrapper_py.refusing_dtypes(plan("T", ["float16", "bfloat16"])) == ["float16", "bfloat16"]
    assert wrapper_py.refusing_dtypes(plan("", ["int64"])) == []
    assert testfile_wiring.test_backends(
        DTYPE_SKIPS, dtypes=wrapper_py.refusing_dtypes(plan("", ["int64"]))
    ) == (testfile_wiring.test_backends(DTYPE_SKIPS))


def test_only_the_checks_carried_over_from_the_reference_name_a_refused_case():
    from types import SimpleNamespace

    from bot.emit.wrapper_py import checked_names
    from bot.plan.types import PyStep
    from bot.targets.types import Source

    steps = [
        PyStep("check", expr="not k.is_cuda", source=Source("policy", "wrapper prologue")),
        PyStep("check", expr="q.dtype not in _DTYPES", source=Source("policy", "wrapper prologue")),
        PyStep("check", expr="not (is_causal)", source=Source("reference", "mla.py: tile_mla():286")),
        PyStep("let", target="k", expr="kwargs.get('k', 4)", source=Source("reference", "mla.py")),
    ]
    plan = SimpleNamespace(python=SimpleNamespace(steps=steps))
    assert checked_names(plan) == {"is_causal"}
    # so a test's `k` (a size, say) inherits no cuTile skip through the prologue's tensor `k`
    assert testfile_wiring.inherited_skips(SKIPPING_TEST.replace("is_causal", "k"), checked_names(plan)) == (
        SKIPPING_TEST.replace("is_causal", "k")
    )
