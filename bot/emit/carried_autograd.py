"""A carried ``torch.autograd.Function``'s ``apply``, as the forward-only wrapper calls it.

The wrapper is forward only: the registered function detaches its inputs, so ``X.apply(...)``
records nothing, yet apply's bookkeeping costs several microseconds a call (measured on the
hand-written ports' host-time bench: the carried wrappers were 1.08x and 1.29x). ``X.apply(a, b)``
becomes ``_rs_forward(X, a, b)``, which calls ``X.forward`` with a stand-in ctx when no tensor
input asks a gradient (or grad is off), and ``X.apply`` otherwise: the same values either way.
Only a class the model resolves to a subclass of ``torch.autograd.Function`` whose ``forward``
takes ctx (no ``setup_context``) is rewritten; any other ``apply`` is left as written.
"""

from __future__ import annotations

import ast

from bot.infer.model.semantic import ModuleModel

FORWARD = "_rs_forward"
_FUNCTION_BASES = ("torch.autograd.Function", "torch.autograd.function.Function")


def forward_directly(model: ModuleModel, stmt: ast.stmt, used: set[str]) -> None:
    """Each ``X.apply(...)`` in ``stmt`` of a carried autograd Function -> ``_rs_forward(X, ...)``
    (in place); ``used`` gains the runtime piece when one is rewritten."""
    for node, scope in model.walk(stmt):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        if node.func.attr != "apply" or not isinstance(owner, ast.Name):
            continue
        if not model.is_module_name(owner.id, scope) or not _forward_takes_ctx(model, owner.id):
            continue
        node.func = ast.Name(FORWARD, ast.Load())
        node.args = [owner, *node.args]
        used.add(FORWARD)


def _forward_takes_ctx(model: ModuleModel, name: str) -> bool:
    binding = model.binding(name)
    if binding is None or binding.kind != "class":
        return False
    cls = binding.stmt
    assert isinstance(cls, ast.ClassDef)
    if not any(model.qualified(base, module_scope=True) in _FUNCTION_BASES for base in cls.bases):
        return False
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    forward = methods.get("forward")
    if forward is None or "setup_context" in methods:
        return False
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in forward.decorator_list)
    return static and bool(forward.args.posonlyargs or forward.args.args)


PIECE = f'''
class _RsForwardContext:
    """The ctx a carried autograd Function's forward gets when nothing asks a gradient: what it
    saves for a backward is kept, never read (the port is forward only)."""

    def __init__(self, count):
        self.needs_input_grad = (False,) * count
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_dirty(self, *_tensors):
        pass

    def mark_non_differentiable(self, *_tensors):
        pass

    def set_materialize_grads(self, _value):
        pass


def {FORWARD}(function, *args):
    """``function.apply(*args)``: its forward called directly when no tensor input asks a gradient
    (apply would record nothing), through apply otherwise."""
    if torch.is_grad_enabled():
        for arg in args:
            if isinstance(arg, torch.Tensor) and arg.requires_grad:
                return function.apply(*args)
    return function.forward(_RsForwardContext(len(args)), *args)
'''
