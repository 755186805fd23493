"""Discovery on a TileGym-shaped tree written here: ops and tests in subpackages, dispatch names that
are not file names, public functions outside ops.py, tests that call with keyword names or reach
the op through helpers."""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

from bot.infer import ops_py
from bot.infer.facts import Facts
from bot.infer.reference import op as reference
from bot.targets.discover import discover
from bot.targets.types import Target


def _write(repo: Path, rel: str, text: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _tree(repo: Path) -> Path:
    _write(
        repo,
        "src/tilegym/ops/activation.py",
        """\
        import torch
        from tilegym.backend import dispatch


        @dispatch("squash")
        def squash(x: torch.Tensor, slope: float = 0.5) -> torch.Tensor:
            raise NotImplementedError
        """,
    )
    _write(
        repo,
        "src/tilegym/ops/cutile/activation/squash.py",
        """\
        import torch
        from tilegym.backend import register_impl


        @register_impl("squash", backend="cutile")
        def squash(input: torch.Tensor, slope=0.5):
            return torch.empty_like(input)
        """,
    )
    _write(
        repo,
        "src/tilegym/ops/ops.py",
        """\
        import torch
        from tilegym.backend import dispatch


        @dispatch("blend_decode")
        def blend_decode(q: torch.Tensor, k: torch.Tensor, scale: float):
            raise NotImplementedError
        """,
    )
    _write(
        repo,
        "src/tilegym/ops/cutile/blend.py",
        """\
        from tilegym.backend import register_impl


        @register_impl("blend_decode", backend="cutile")
        def blend_decode(q, k, scale):
            return q


        @register_impl("blend_decode_backward", backend="cutile")
        def blend_decode_backward(q, k, scale):
            return q
        """,
    )
    _write(
        repo,
        "src/tilegym/ops/iface.py",
        """\
        from torch.nn.functional import softmax
        from tilegym.ops.ops import blend_decode


        def _inner(q, k):
            return blend_decode(q, k, 1.0)


        def blend_interface(q, k):
            return _inner(q, k)


        def unrelated(x):
            return softmax(x)
        """,
    )
    _write(
        repo,
        "src/tilegym/suites/other/ops.py",
        """\
        from tilegym.backend import dispatch


        @dispatch("other.squash")
        def squash(x):
            raise NotImplementedError
        """,
    )
    _write(
        repo,
        "tests/ops/activation/test_squash.py",
        """\
        import tilegym
        from ... import common


        class Test_Squash(common.PyTestCase):
            _backends = ["cutile"]

            def test_op(self, backend):
                args = {"input": x, "slope": 0.1}
                self.assertCorrectness(tilegym.ops.activation.squash, self.reference, args)

            def test_perf(self, backend):
                tilegym.ops.activation.squash(x, unused_perf_flag=True)

            def test_op_backward(self, backend):
                tilegym.ops.activation.squash(x).sum().backward()
        """,
    )
    _write(
        repo,
        "tests/suites/other/test_squash.py",
        """\
        import tilegym


        class Test_Other:
            _backends = ["cutile"]

            def test_op(self):
                tilegym.suites.other.ops.squash(x)
        """,
    )
    _write(
        repo,
        "tests/ops/test_blend.py",
        """\
        from tilegym.ops import iface

        _backends = ["cutile"]


        def test_op(backend):
            iface.blend_interface(q, k)
        """,
    )
    _write(
        repo,
        "tests/ops/experimental/test_blend_backward.py",
        """\
        import tilegym


        class Test_B:
            _backends = ["cutile"]

            def test_op(self):
                tilegym.ops.blend_decode(q, k, scale=2.0)
        """,
    )
    return repo


def test_subpackage_reference_public_outside_ops_py_and_keyword_names(tmp_path):
    found = discover(Target(_tree(tmp_path), "squash"))
    assert found.dispatch_name == "squash"
    assert found.reference.path == "src/tilegym/ops/cutile/activation/squash.py"
    assert found.reference.line == 5
    assert found.public.path == "src/tilegym/ops/activation.py" and found.public.line == 6
    # the other suite's `squash` is another op: its test is not ours, nor is it named after us
    assert [t.path for t in found.tests] == ["tests/ops/activation/test_squash.py"]
    site = found.tests[0]
    assert (site.backends_line, site.scope, site.functional) == (6, "class", ("test_op",))
    assert site.backward == ("test_op_backward",)  # wiring makes its cutile-rs case skip, cited
    assert "tilegym.ops.activation.squash" in site.how
    # keywords of the correctness test, through its local dict; the benchmark's are not taken
    assert found.call_keywords == ("input", "slope")


def test_tests_keyword_names_pick_the_signature_the_tests_were_written_against(tmp_path):
    repo = _tree(tmp_path)
    target = Target(repo, "squash")
    found = discover(target)
    facts = Facts()
    ops_py.gather(target, found, facts)
    reference.gather(target, facts, reference.load(target, found))
    assert facts.get("python.register.name") == "squash"
    assert (
        facts.source("python.register.name").detail == "src/tilegym/ops/activation.py:6 @dispatch('squash')"
    )
    # activation.py declares `x`, the tests pass `input=`: the cuTile reference's signature wins
    assert facts.get("python.signature") == "input, slope=0.5"
    assert facts.source("python.signature").kind == "reference"
    assert facts.get("python.tensor_params") == ["input"]
    assert any("tests pass input=" in t for t in facts.tried["python.signature"])


def test_a_declaration_naming_no_parameter_leaves_the_signature_to_the_reference(tmp_path):
    """``@dispatch`` over ``def f(*args, **kwargs)`` (invoke_fused_moe_kernel) forwards whatever it
    gets: the reference's parameters are the signature, and a tensor it types ``Optional`` (may be
    None) is no tensor the wrapper's prologue can check."""
    repo = _tree(tmp_path)
    _write(
        repo,
        "src/tilegym/ops/activation.py",
        """\
        from tilegym.backend import dispatch


        @dispatch("squash")
        def squash(*args, **kwargs):
            raise NotImplementedError
        """,
    )
    _write(
        repo,
        "src/tilegym/ops/cutile/activation/squash.py",
        """\
        from typing import Optional

        import torch
        from tilegym.backend import register_impl


        @register_impl("squash", backend="cutile")
        def squash(input: torch.Tensor, scale: Optional[torch.Tensor], bias: torch.Tensor | None, slope=0.5):
            return torch.empty_like(input)
        """,
    )
    target = Target(repo, "squash")
    found = dataclasses.replace(discover(target), call_keywords=())  # tests passing no keyword
    facts = Facts()
    ops_py.gather(target, found, facts)
    assert not facts.has("python.signature")  # *args, **kwargs: nothing offered
    assert any("squash() names no parameter" in t for t in facts.tried["python.signature"])
    reference.gather(target, facts, reference.load(target, found))
    assert facts.get("python.signature") == "input, scale, bias, slope=0.5"
    assert facts.source("python.signature").kind == "reference"
    assert facts.get("python.tensor_params") == ["input"]
    # a getter that takes nothing (`def get_swiglu():`) names nothing because that is its signature
    takes = {
        src: ast.parse(f"def f({src}): pass").body[0].args for src in ("", "*args, **kwargs", "**kw", "x")
    }
    assert {src: ops_py._names_nothing(a) for src, a in takes.items()} == {
        "": False,
        "*args, **kwargs": True,
        "**kw": True,
        "x": False,
    }


def test_registry_name_differs_from_the_file_and_helpers_reach_it(tmp_path):
    found = discover(Target(_tree(tmp_path), "blend"))
    # blend.py registers a forward op and its backward: the forward one is the port's
    assert found.dispatch_name == "blend_decode"
    assert found.reference.path == "src/tilegym/ops/cutile/blend.py"
    assert "the only forward op blend.py registers" in found.dispatch_source.detail
    assert found.public.path == "src/tilegym/ops/ops.py"
    by_path = {t.path: t for t in found.tests}
    # the backward-only file calls the op directly but is not the correctness surface
    assert by_path["tests/ops/experimental/test_blend_backward.py"].functional == ()
    # ... and every test in it is a backward test, whatever its name
    assert by_path["tests/ops/experimental/test_blend_backward.py"].backward == ("test_op",)
    # the direct caller keeps the helper-only file out
    assert "tests/ops/test_blend.py" not in by_path
    assert [t.path for t in found.test_sites] == ["tests/ops/experimental/test_blend_backward.py"]


def test_a_helper_chain_counts_when_no_test_calls_the_op_itself(tmp_path):
    repo = _tree(tmp_path)
    (repo / "tests/ops/experimental/test_blend_backward.py").unlink()
    found = discover(Target(repo, "blend"))
    assert [t.path for t in found.test_sites] == ["tests/ops/test_blend.py"]
    site = found.test_sites[0]
    assert not site.direct and site.functional == ("test_op",)
    assert "blend_interface -> _inner -> blend_decode" in site.how
    assert site.scope == "module"


def test_a_functional_test_that_runs_the_op_through_a_helper_method_counts(tmp_path):
    repo = _tree(tmp_path)
    path = repo / "tests/ops/activation/test_squash.py"
    path.write_text(
        path.read_text()
        + textwrap.indent(
            textwrap.dedent(
                """
                def _run_case(self, x, backend):
                    def run(x):
                        return tilegym.ops.activation.squash(x, slope=0.1)

                    self.assertCorrectness(run, self.reference, {"x": x})

                def _small(self, backend):
                    self._run_case(x, backend)

                def test_op_small(self, backend):
                    self._small(backend)

                def test_perf_small(self, backend):
                    self._run_case(x, backend)
                """
            ),
            "    ",
        )
    )
    site = discover(Target(repo, "squash")).tests[0]
    # through a helper of a helper; the benchmark and the backward test are not the correctness surface
    assert site.functional == ("test_op", "test_op_small")


def test_unclear_names_are_reported_with_what_was_tried(tmp_path):
    repo = _tree(tmp_path)
    _write(
        repo,
        "src/tilegym/ops/cutile/mix.py",
        """\
        from tilegym.backend import register_impl


        @register_impl("mix_a", backend="cutile")
        def a(x):
            return x


        register_impl("mix_b", backend="cutile")(a)
        """,
    )
    found = discover(Target(repo, "mix"))
    assert found.reference is None and found.public is None and found.tests == ()
    assert found.candidates == ("mix_a", "mix_b")  # the call form of register_impl counts too
    assert any("registers mix_a, mix_b" in t for t in found.tried)
    assert any("none reaches 'mix'" in t for t in found.tried)
    facts = Facts()
    ops_py.gather(Target(repo, "mix"), found, facts)
    assert not facts.has("python.register.name")
    assert any("registers mix_a, mix_b" in t for t in facts.tried["python.register.name"])


def test_a_test_named_after_the_op_is_the_last_resort(tmp_path):
    repo = _tree(tmp_path)
    _write(repo, "tests/ops/test_lonely.py", "_backends = ['cutile']\n")
    found = discover(Target(repo, "lonely"))
    assert [(t.path, t.direct, t.scope) for t in found.tests] == [
        ("tests/ops/test_lonely.py", False, "module")
    ]


def test_the_reference_readers_find_a_function_registered_by_the_call_form():
    """``register_impl("x", backend="cutile")(tile_x)`` (TileGym's nvfp4_quantize) counts for the
    readers of the reference as it does for discovery."""
    import ast

    tree = ast.parse(
        "from tilegym.backend import register_impl\n\n\ndef tile_x(a):\n    return a\n\n\n"
        "register_impl('x', backend='cutile')(tile_x)\nregister_impl('x', backend='triton')(print)\n"
    )
    assert reference.registered_function(tree, "x").name == "tile_x"
    assert reference.registered_function(tree, "y") is None


def test_a_getter_is_dispatched_by_the_op_name_and_registered_as_get_op(tmp_path, monkeypatch):
    """TileGym main's swiglu: the cuTile reference registers ``get_swiglu`` (a getter) and ops.py
    declares ``get_swiglu``. The registration check must ask the dispatcher for ``get_swiglu``: asking
    for ``swiglu`` finds nothing and wrongly failed the port on the H200 (agent-d f8f82b4)."""
    from bot.testing import stage_tests, testrun

    _write(tmp_path, "src/tilegym/ops/ops.py", """\
        from tilegym.backend import dispatch


        @dispatch("get_gate")
        def get_gate():
            raise NotImplementedError
        """)  # fmt: skip
    _write(tmp_path, "src/tilegym/ops/cutile/gate.py", """\
        from tilegym.backend import register_impl


        def gate(a, b):
            return a


        @register_impl("get_gate", backend="cutile")
        def get_gate():
            return gate
        """)  # fmt: skip
    target = Target(tmp_path, "gate")
    found = discover(target)
    assert (found.dispatch_name, found.registry_name) == ("gate", "get_gate")
    asked: list[str] = []

    def backends(python, repo, name, timeout=180):
        asked.append(name)
        return ["cutile", "cutile-rs"] if name == "get_gate" else []

    monkeypatch.setattr(testrun, "registered_backends", backends)
    assert stage_tests.registered(target, found, "python3") == ["cutile", "cutile-rs"]
    assert asked == ["get_gate"]


def test_a_test_that_calls_the_reference_by_its_module_path_is_a_direct_site(tmp_path):
    """TileGym's test_mla_decoding picks each backend's module itself
    (``tilegym.ops.cutile.mla_decoding.mla_decoding``): that file calls the op, its ``test_op`` is the
    correctness test, and the site names the path so wiring can route the cutile-rs case."""
    repo = _tree(tmp_path)
    _write(
        repo,
        "tests/ops/test_blend_by_module.py",
        """\
        import tilegym

        _backends = ["cutile"]


        def test_op(backend):
            if backend == "cutile":
                out = tilegym.ops.cutile.blend.blend_decode(1, 2, 3.0)
            else:
                out = None


        def test_perf(backend):
            from tilegym.ops.cutile.blend import blend_decode_backward

            blend_decode_backward(1, 2, 3.0)
        """,
    )
    found = discover(Target(repo, "blend"))
    site = next(t for t in found.tests if t.path == "tests/ops/test_blend_by_module.py")
    assert site.direct and site.functional == ("test_op",)
    assert site.reference_calls == ("tilegym.ops.cutile.blend.blend_decode",)
    # a file that reaches the op through the public function names no reference path
    assert all(not t.reference_calls for t in found.tests if t is not site)
