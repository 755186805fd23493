"""A kernel.rs scalar the cuTile kernel does not take, valued over the tensors the launch passes
(``bot/plan/carry_shapes.py``): what it follows and where it refuses."""

from __future__ import annotations

import textwrap

from bot.infer.model.semantic import ModuleModel
from bot.plan.carry import launch_sites
from bot.plan.carry_shapes import launched_scalars

HEAD = """
import torch
import cuda.tile as ct
from cuda.tile.tune import exhaustive_search

@ct.kernel
def _k(Q, K, TILE: ct.Constant[int]):
    pass
"""


def _launched(body: str, names: list[str], functions: tuple[str, ...] = ("forward",)) -> dict:
    model = ModuleModel.build(HEAD + textwrap.dedent(body), "tilegym.ops.cutile.demo")
    sites = launch_sites(model, list(functions))
    return launched_scalars(lambda _site: model, sites, "_k", ["Q", "K", "TILE"], names)


def _exprs(got: dict) -> dict[str, str]:
    return {name: expr for name, (expr, _line) in got.items()}


def test_a_local_unpacked_from_a_launched_tensor_s_shape_is_that_shape_over_the_kernel_parameter():
    got = _launched(
        """
        def forward(q, k):
            q = q.contiguous()
            batch, heads, seq, head_dim = q.shape
            rows = batch * seq
            ct.launch(torch.cuda.current_stream(), (rows, 1, 1), _k, (q, k, 64))
        """,
        ["head_dim", "rows", "heads"],
    )
    assert got["head_dim"][0] == "Q.shape[3]"
    assert got["rows"][0] == "Q.shape[0] * Q.shape[2]"
    assert got["heads"][0] == "Q.shape[1]"


def test_sizes_and_strides_of_the_second_tensor_map_to_its_own_parameter():
    got = _launched(
        """
        def forward(q, k):
            n = k.size(0)
            s = k.stride(1) // 2
            ct.launch(torch.cuda.current_stream(), (n,), _k, (q, k, 64))
        """,
        ["n", "s"],
    )
    assert _exprs(got) == {"n": "K.size(0)", "s": "K.stride(1) // 2"}


def test_a_tensor_rebound_after_the_local_or_one_not_launched_leaves_it_asked():
    got = _launched(
        """
        def forward(query, k):
            bs, n = query.shape
            q = query.view(bs * n)
            width = q.shape[0]
            q = q.contiguous()
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))
        """,
        ["bs", "width"],
    )
    assert got == {}  # bs: `query` is not launched; width: `q` is rebound after it


def test_a_local_bound_twice_or_after_the_launch_is_not_followed():
    got = _launched(
        """
        def forward(q, k):
            n = q.shape[0]
            if k is not None:
                n = k.shape[0]
            m = 1
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))
            m = q.shape[1]
        """,
        ["n", "m"],
    )
    assert got == {}


def test_launch_sites_that_disagree_leave_it_asked_and_a_search_without_the_local_counts_for_none():
    body = """
        def forward(q, k):
            n = q.shape[0]
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))

        def other(q, k):
            n = k.shape[0]
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))

        def tuned(q, k):
            return exhaustive_search([1], torch.cuda.current_stream(), lambda c: (1,), _k, lambda c: (q, k, c))
        """
    assert _launched(body, ["n"], ("forward", "other")) == {}
    assert _launched(body, ["n"], ("forward", "tuned"))["n"][0] == "Q.shape[0]"


# a launching function and a caller that holds `heads` over the tensor it hands it ({call}: the
# arguments after the stream)
_CALLER = """
        def launch(stream, q, kv):
            ct.launch(stream, (1,), _k, (q, kv, 64))

        def forward(q, k):
            heads = k.shape[1]
            launch(torch.cuda.current_stream(), {call})
        """


def test_a_caller_s_local_over_a_tensor_it_hands_the_launching_function_unchanged():
    body = (
        _CALLER.format(call="q, kv=k")
        + """
        def rebinding(q, k):
            heads = k.shape[1]
            launch_copy(torch.cuda.current_stream(), q, k)

        def launch_copy(stream, q, k):
            k = k.contiguous()
            ct.launch(stream, (1,), _k, (q, k, 64))
        """
    )
    assert _launched(body, ["heads"], ("launch", "forward"))["heads"][0] == "K.shape[1]"
    # launch_copy rebinds the tensor it launches: the caller's `k` is not known to be it
    assert _launched(body, ["heads"], ("launch_copy", "rebinding")) == {}


def test_a_name_bound_otherwise_than_by_assignment_is_not_followed():
    got = _launched(
        """
        def forward(q, k):
            n = q.shape[0]
            try:
                pass
            except ValueError as n:
                pass
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))
        """,
        ["n"],
    )
    assert got == {}


def test_a_call_that_unpacks_its_arguments_or_a_method_s_namesake_gives_no_caller_local():
    unpacked = _CALLER.format(call="*(q, k)")
    assert _launched(unpacked, ["heads"], ("launch", "forward")) == {}
    method = """
        class Op:
            def launch(self, q, kv):
                ct.launch(torch.cuda.current_stream(), (1,), _k, (q, kv, 64))

        def launch(q, kv):
            pass

        def other(q, k):
            heads = k.shape[1]
            launch(q, k)
        """
    # other() calls the module's `launch`, not Op.launch: it says nothing of Op.launch's tensors
    assert _launched(method, ["heads"], ("Op", "other")) == {}


def test_a_local_the_launched_tensor_was_shaped_with_is_that_dimension_after_a_transpose():
    # the shape of attention_sink's host code: the count is read off the caller's tensor, the launch
    # passes a view of it, transposed and copied; the launching function takes the view
    body = """
        def launch(stream, q, kv):
            ct.launch(stream, (1,), _k, (q, kv, 64))

        def forward(query, k):
            bs, n, heads, d = query.shape
            q = query.view(n, bs, heads * d)
            q = q.transpose(0, 1).contiguous()
            launch(torch.cuda.current_stream(), q, k)
        """
    got = _launched(body, ["bs", "n"], ("launch", "forward"))
    assert _exprs(got) == {"bs": "Q.shape[0]", "n": "Q.shape[1]"}


def test_a_reshape_that_may_not_run_or_a_local_rebound_after_it_says_nothing():
    got = _launched(
        """
        def forward(query, k, flag):
            bs, n = query.shape
            q = query.reshape(-1, n)
            if flag:
                q = query.view(bs, n)
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))
        """,
        ["bs", "n"],
    )
    assert got == {}  # the view in the branch may not run; the reshape outside it is not followed past it
    got = _launched(
        """
        def forward(query, k):
            bs, n = query.shape
            q = query.view(bs, n)
            bs = bs * 2
            p = query.view(n, bs)[0]
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, p, 64))
        """,
        ["bs", "n"],
    )
    # bs is bound twice; a row of a view has the shape of neither; n is still q's second dimension
    assert _exprs(got) == {"n": "Q.shape[1]"}


def test_an_unknown_axis_leaves_the_dimensions_unknown():
    got = _launched(
        """
        def forward(query, k, axis):
            bs, n = query.shape
            q = query.view(bs, n).transpose(axis, 1)
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))
        """,
        ["bs"],
    )
    assert got == {}


def test_branches_that_unpack_one_shape_two_ways_agree_on_the_dimension_they_share():
    got = _launched(
        """
        def forward(q, k, transpose):
            if transpose:
                batch, n, m = q.shape
            else:
                batch, m, n = q.shape
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))
        """,
        ["batch", "m"],
    )
    # batch is q.shape[0] on both paths; m is the second dimension on one and the third on the other
    assert _exprs(got) == {"batch": "Q.shape[0]"}


def test_a_reshape_on_the_line_of_an_if_may_not_run():
    got = _launched(
        """
        def forward(query, k, flag):
            bs, n = query.shape
            q = query.reshape(-1)
            if flag: q = query.view(bs, n)
            ct.launch(torch.cuda.current_stream(), (1,), _k, (q, k, 64))
        """,
        ["bs"],
    )
    assert got == {}


# the shape of bmm's persistent path: the launch's arguments are the tuple a function defined in the
# launching function returns ({args}: the site's arguments; {before}: statements before the launch)
_ARGS_FN = '''
        def forward(q, k):
            heads = k.shape[1]
            rows = q.shape[0]

            def args_fn(cfg):
                """The launch's arguments for one config."""
                return (q, k, cfg)

            {before}
            ct.launch(torch.cuda.current_stream(), (1,), _k, {args})
        '''


def test_a_tuple_returned_by_a_function_defined_in_the_launching_function_is_the_launch_s_arguments():
    want = {"heads": "K.shape[1]", "rows": "Q.shape[0]"}
    for before, args in [
        ("best = 64", "args_fn(best)"),
        ("args = args_fn(64)", "args"),  # a name bound once to the call
        ("make = args_fn", "make(64)"),  # the function through a name
        ("args = (q, k, 64)", "args"),  # a name bound once to a tuple
    ]:
        got = _launched(_ARGS_FN.format(before=before, args=args), ["heads", "rows"])
        assert _exprs(got) == want, (before, args)


def test_a_nested_function_that_does_more_than_return_or_a_name_bound_twice_gives_no_arguments():
    more = _ARGS_FN.replace("return (q, k, cfg)", "k = q\n                return (q, k, cfg)")
    assert _launched(more.format(before="pass", args="args_fn(64)"), ["heads", "rows"]) == {}
    twice = _ARGS_FN.format(before="args = (q, k, 64)\n            args = (k, q, 64)", args="args")
    assert _launched(twice, ["heads", "rows"]) == {}
    branch = _ARGS_FN.format(before="if q is None:\n                args_fn = None", args="args_fn(64)")
    assert _launched(branch, ["heads", "rows"]) == {}


def test_an_element_that_is_the_nested_function_s_own_parameter_is_not_the_launching_function_s():
    # args_fn's `q` is what the call hands it (a view), not forward's `q`: rows says nothing of it
    shadowed = _ARGS_FN.replace("def args_fn(cfg):", "def args_fn(q, cfg):")
    got = _launched(shadowed.format(before="pass", args="args_fn(q.view(-1), 64)"), ["heads", "rows"])
    assert _exprs(got) == {"heads": "K.shape[1]"}
