"""Where a dry-run test case ends: when the test first reads a tensor a launch was given.

Nothing is launched in the dry run, so an output holds whatever its allocation held. Once the
test's own code (not the op's) touches a tensor passed to a launch, the op call has returned and
its launches are recorded; what follows is the test comparing that garbage with its reference,
which on a CPU, over the test's full-size tensors, was most of the dry run's time (an element-wise
report of every mismatch). The case ends there as passed. The op's own code (``tilegym``
modules, and ``cuda.tile``) may read its tensors freely: a reference that sums partial results
after a launch, or launches a second kernel on the first one's output, is still inside the call.

Loaded by ``plugin.py`` in the checkout's interpreter: standard library, torch and pytest only.
"""

from __future__ import annotations

import sys

_LAUNCHED: set[int] = set()  # storage addresses of the tensors this case's launches were given
_OP_SIDE = ("tilegym", "cuda.tile")  # modules whose frames are the op's, not the test's
_OURS = ("torch", "bot.dryrun")  # frames passed over when looking for who asked


class ResultsRead(BaseException):
    """The test reads what a launch would have written: its launches are all recorded.

    A BaseException, so a test's own ``except Exception`` does not swallow it."""


def launched(tensor) -> None:
    """Note a tensor a launch is given (the recorders call this)."""
    try:
        address = tensor.untyped_storage().data_ptr()
    except (AttributeError, RuntimeError):
        return
    if address:
        _LAUNCHED.add(address)


def new_case() -> None:
    _LAUNCHED.clear()


def _touches_launched(value, depth: int = 0) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        try:
            return value.untyped_storage().data_ptr() in _LAUNCHED
        except RuntimeError:
            return False
    if depth < 3 and isinstance(value, (list, tuple)):
        return any(_touches_launched(v, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return any(_touches_launched(v, depth + 1) for v in value.values())
    return False


def _asked_by_the_test() -> bool:
    """Whether the innermost frame that is neither torch's nor ours belongs to the test."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(_OURS):
            return not name.startswith(_OP_SIDE)
        frame = frame.f_back
    return False


def watch():
    """A torch function mode that raises :class:`ResultsRead` at the test's first read of a
    launched tensor; entered for the test call, left after it."""
    from torch.overrides import TorchFunctionMode

    class _Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _LAUNCHED and (_touches_launched(args) or _touches_launched(kwargs)) and _asked_by_the_test():
                raise ResultsRead(getattr(func, "__name__", str(func)))
            return func(*args, **kwargs)

    return _Watch()
