"""A carried autograd Function's ``apply`` becomes ``_rs_forward``: its forward called directly
when nothing asks a gradient (the wrapper is forward only; apply's bookkeeping cost the carried
wrappers host time), through apply otherwise. Which ``apply`` is rewritten is the semantic model's
answer (what the name is bound to in its scope), not a spelling."""

from __future__ import annotations

import ast
import json
import subprocess

from checkout_support import torch_python

from bot.emit import carried_autograd
from bot.infer.model.semantic import ModuleModel

SOURCE = """
import torch
from torch.autograd import Function as AutogradFunction


class WithCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2


class Imported(AutogradFunction):
    @staticmethod
    def forward(ctx, x, y):
        return x + y


class SetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass


class NotAFunction:
    @staticmethod
    def apply(x):
        return x


def run(x, y):
    return WithCtx.apply(x), Imported.apply(x, y), SetupContext.apply(x), NotAFunction.apply(x)


def shadowed(WithCtx, x):
    return WithCtx.apply(x)
"""


def _rewritten(name: str) -> tuple[str, set[str]]:
    model = ModuleModel.build(SOURCE, "m")
    stmt = model.binding(name).stmt
    used: set[str] = set()
    carried_autograd.forward_directly(model, stmt, used)
    return ast.unparse(stmt).splitlines()[-1].strip(), used


def test_apply_of_an_autograd_function_whose_forward_takes_ctx_is_called_through_rs_forward():
    line, used = _rewritten("run")
    assert line == (
        "return (_rs_forward(WithCtx, x), _rs_forward(Imported, x, y), "
        "SetupContext.apply(x), NotAFunction.apply(x))"
    )
    assert used == {carried_autograd.FORWARD}


def test_a_parameter_that_shadows_the_class_is_left_as_written():
    line, used = _rewritten("shadowed")
    assert line == "return WithCtx.apply(x)"
    assert used == set()


_RUN = (
    "import json, torch\n"
    + carried_autograd.PIECE
    + """
class Double(torch.autograd.Function):
    seen = []

    @staticmethod
    def forward(ctx, x, scale):
        Double.seen.append(type(ctx).__name__)
        ctx.save_for_backward(x)
        ctx.scale = scale
        ctx.mark_non_differentiable()
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None

plain = torch.arange(4.0)
asks = torch.arange(4.0, requires_grad=True)
out = {}
direct = _rs_forward(Double, plain, 3.0)
out["direct"] = [direct.tolist(), Double.seen[-1], direct.requires_grad]
through = _rs_forward(Double, asks, 3.0)
through.sum().backward()
out["apply"] = [through.tolist(), Double.seen[-1], asks.grad.tolist()]
with torch.no_grad():
    off = _rs_forward(Double, asks, 3.0)
out["no_grad"] = [off.tolist(), Double.seen[-1], off.requires_grad]
print(json.dumps(out))
"""
)


def test_rs_forward_gives_apply_s_values_and_keeps_apply_where_a_gradient_is_asked():
    done = subprocess.run([torch_python(), "-c", _RUN], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["direct"] == [[0.0, 3.0, 6.0, 9.0], "_RsForwardContext", False]
    # an input that asks a gradient goes through apply: the backward runs as the reference wrote it
    assert out["apply"][0] == [0.0, 3.0, 6.0, 9.0] and out["apply"][1] != "_RsForwardContext"
    assert out["apply"][2] == [3.0, 3.0, 3.0, 3.0]
    assert out["no_grad"] == [[0.0, 3.0, 6.0, 9.0], "_RsForwardContext", False]
