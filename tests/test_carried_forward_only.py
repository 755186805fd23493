"""A carried wrapper is forward only: the registered function detaches its tensor inputs before the
reference's host code runs, so a reference's autograd path (its backward launches kernels kernel.rs
need not port) is never taken and the output carries no gradient, as a hand-written port's does.
TileGym's test harness asks a gradient only of an output that requires one (a GPU run at TileGym
main found the carried silu_and_mul failing its test_op in the backward it never ported)."""

from __future__ import annotations

import ast
from pathlib import Path

from checkout_support import checkout_with_kernels

from bot.emit import generate
from bot.pipeline import make_plan
from bot.targets.types import Target

KERNELS = Path(__file__).parent / "fixtures" / "tilegym_ops"


def _registered(source: str) -> ast.FunctionDef:
    tree = ast.parse(source)
    return next(
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any("register_impl" in ast.unparse(d) for d in n.decorator_list)
    )


def test_the_registered_function_detaches_each_input_before_the_references_code(tmp_path, tilegym_wheel):
    repo = checkout_with_kernels(tmp_path / "tg", tilegym_wheel, KERNELS, ["dropout"])
    target = Target(repo, "dropout")
    plan, _facts, co = make_plan(target, tmp_path / "out")
    assert plan.carry is not None  # the reference's host code, its autograd Function included
    files = generate.generate(target, plan, co)
    source = next(f.content for f in files.files if f.path.endswith("cutile_rs/dropout.py"))
    assert "torch.autograd.Function" in source  # carried as the reference has it ...
    fn = _registered(source)
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    assert params
    detached = [ast.unparse(s) for s in body[: len(params)]]
    # ... but never entered: each input is detached first
    assert detached == [
        f"{n} = {n}.detach() if isinstance({n}, torch.Tensor) and {n}.requires_grad else {n}" for n in params
    ]
