"""cutile-rs in test_perf's backends (bot/emit/wiring.py ``perf_backends``): stage E's one allowed edit,
made by the host stage's wiring where the perf parametrization does not reach cutile-rs already."""

from __future__ import annotations

import ast
import textwrap

from bot.emit import testfile_wiring

GUARDED = 'if is_backend_available("cutile-rs"):'


def _backends_of(text: str, function: str = "test_perf") -> list[str]:
    """The backends a test_perf is parametrized over with every guard true: the file run as a module,
    the values read from the parametrize mark pytest put on the function."""
    namespace: dict = {"is_backend_available": lambda backend: True}
    source = text.replace("from tilegym.backend import is_backend_available\n", "")
    exec(compile(source, "t.py", "exec"), namespace)  # the test's own text
    holders = [namespace] + [vars(v) for v in namespace.values() if isinstance(v, type)]
    fn = next(h[function] for h in holders if function in h)
    marks = [
        m for m in fn.pytestmark if m.name == "parametrize" and m.args[0].strip() in ("backend", "framework")
    ]
    return list(marks[0].args[1])


CLASS_LIST = textwrap.dedent(
    '''\
    """Tests."""
    import pytest


    class Test_X:
        _backends = ["cutile"]
        _perf_backends = ["cutile", "pytorch"]

        @pytest.mark.parametrize("backend", _backends)
        def test_op(self, backend):
            pass

        @pytest.mark.parametrize("backend", _perf_backends)
        def test_perf(self, backend):
            pass
    '''
)


def test_a_perf_list_of_its_own_gets_the_guarded_block_after_its_binding():
    out = testfile_wiring.test_backends(CLASS_LIST)
    assert '        _perf_backends = _perf_backends + ["cutile-rs"]\n' in out
    assert out.count(GUARDED) == 2  # _backends' block and the perf list's
    assert out.count("from tilegym.backend import is_backend_available") == 1
    assert _backends_of(out) == ["cutile", "pytorch", "cutile-rs"]
    assert testfile_wiring.test_backends(out) == out  # twice changes nothing
    ast.parse(out)


def test_a_perf_list_built_from_the_wired_backends_is_left_as_it_is():
    text = CLASS_LIST.replace(
        '_perf_backends = ["cutile", "pytorch"]', '_perf_backends = _backends + ["pytorch"]'
    )
    wired = testfile_wiring.test_backends(text)
    assert wired.count(GUARDED) == 1 and "_perf_backends = _perf_backends" not in wired
    assert _backends_of(wired) == ["cutile", "cutile-rs", "pytorch"]


def test_a_literal_list_in_the_decorator_gets_the_element():
    text = textwrap.dedent(
        """\
        import pytest
        from tilegym.backend import is_backend_available

        _backends = ["cutile"]


        @pytest.mark.parametrize("framework", ['cutile', 'pytorch'])
        @pytest.mark.parametrize("n", [1, 2])
        def test_perf(n, framework):
            pass


        @pytest.mark.parametrize("framework", ["cutile", "cutile_rs"])
        def test_perf_llm(framework):
            pass
        """
    )
    out = testfile_wiring.perf_backends(text)
    assert "@pytest.mark.parametrize(\"framework\", ['cutile', 'pytorch', \"cutile-rs\"])" in out
    assert '["cutile", "cutile_rs"]' in out  # it has one spelling already
    assert testfile_wiring.perf_backends(out) == out


def test_a_module_list_with_a_guarded_binding_gets_its_block_after_the_whole_statement():
    text = textwrap.dedent(
        """\
        import pytest
        from tilegym.backend import is_backend_available

        _perf_frameworks = ["cutile"]
        if is_backend_available("tilecpp"):
            _perf_frameworks = _perf_frameworks + ["tilecpp"]
        X = 1


        @pytest.mark.parametrize("framework", _perf_frameworks)
        def test_perf(framework):
            pass
        """
    )
    out = testfile_wiring.perf_backends(text)
    lines = out.splitlines()
    at = lines.index(GUARDED)
    assert (
        lines[at - 1] == '    _perf_frameworks = _perf_frameworks + ["tilecpp"]' and lines[at + 2] == "X = 1"
    )
    assert _backends_of(out) == ["cutile", "tilecpp", "cutile-rs"]


def test_other_shapes_are_left_alone():
    text = textwrap.dedent(
        """\
        import pytest


        def backends():
            return ["cutile"]


        @pytest.mark.parametrize("backend", backends())
        def test_perf(backend):
            pass


        @pytest.mark.parametrize("backend", ["cutile"])
        def test_op(backend):
            pass
        """
    )
    assert testfile_wiring.perf_backends(text) == text
    assert testfile_wiring.perf_backends("def broken(:\n") == "def broken(:\n"
