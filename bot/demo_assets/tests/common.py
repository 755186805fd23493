"""Helpers shared by the demo op tests: seeding and output/gradient comparison."""

import gc
import os
import random

import torch

SEED = int(os.environ.get("DEMO_TEST_SEED", "0"))


def _tensors(value):
    """A single tensor or a tuple/list of tensors, as a list."""
    if isinstance(value, torch.Tensor):
        return [value]
    return list(value)


def _compare(name, got, want, rtol, atol, check_stride):
    """Return a failure message for one pair of tensors, or None when they agree."""
    if not isinstance(got, torch.Tensor):
        return f"{name}: expected a tensor, got {type(got).__name__}"
    if tuple(got.shape) != tuple(want.shape):
        return f"{name}: shape {tuple(got.shape)} != reference {tuple(want.shape)}"
    if check_stride and got.stride() != want.stride():
        return f"{name}: stride {got.stride()} != reference {want.stride()}"
    try:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, check_stride=False)
    except AssertionError as exc:
        return f"{name} (rtol={rtol}, atol={atol}): {exc}"
    return None


class PyTestCase:
    """Base class of the op test classes (pytest style, no unittest machinery)."""

    def setUp(self):
        """Release cached GPU memory and seed every RNG the tests use."""
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.manual_seed_all(SEED)
        torch.manual_seed(SEED)
        random.seed(SEED)

    def assertCorrectness(
        self,
        test_fn,
        ref_fn,
        kwargs,
        extra_test_kwargs=None,
        extra_ref_kwargs=None,
        gradient=None,
        rtol=1e-5,
        atol=1e-8,
        check_stride=True,
    ):
        """Run ``test_fn`` and ``ref_fn`` on the same inputs and compare the results.

        ``kwargs`` go to both functions (the reference gets clones of the tensors,
        so an in-place op cannot change its inputs); ``extra_test_kwargs`` and
        ``extra_ref_kwargs`` go to one side only.  Outputs are compared with
        ``torch.testing.assert_close``; strides too when ``check_stride``.  When
        the tested output carries autograd history, both sides are back-propagated
        with ``gradient`` (a tensor, a callable applied to the output, or ones)
        and the input gradients are compared as well.
        """
        extra_test_kwargs = extra_test_kwargs or {}
        extra_ref_kwargs = extra_ref_kwargs or {}
        ref_kwargs = {
            k: v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v
            for k, v in kwargs.items()
        }

        test_out = test_fn(**kwargs, **extra_test_kwargs)
        ref_out = ref_fn(**ref_kwargs, **extra_ref_kwargs)

        got_list, want_list = _tensors(test_out), _tensors(ref_out)
        assert len(got_list) == len(want_list), f"{len(got_list)} outputs, reference has {len(want_list)}"
        failures = []
        for i, (got, want) in enumerate(zip(got_list, want_list)):
            msg = _compare(f"output {i}", got, want.detach(), rtol, atol, check_stride)
            if msg:
                failures.append(msg)

        first = got_list[0]
        if not failures and first.requires_grad and want_list[0].requires_grad:
            failures += _grad_failures(
                first, want_list[0], gradient, kwargs, ref_kwargs, rtol, atol, check_stride
            )
        assert not failures, "\n".join(failures)


def _grad_failures(got, want, gradient, kwargs, ref_kwargs, rtol, atol, check_stride):
    """Back-propagate both outputs with ``gradient`` (a tensor, a callable of the output, or ones)
    and compare the input gradients; one message per mismatch."""
    if gradient is None:
        grad = torch.ones_like(got)
    elif callable(gradient):
        grad = gradient(got)
    else:
        grad = gradient
    got.backward(grad)
    want.backward(grad)
    failures = []
    for name, arg in kwargs.items():
        if isinstance(arg, torch.Tensor) and arg.requires_grad:
            got_grad, want_grad = arg.grad, ref_kwargs[name].grad
            if got_grad is None or want_grad is None:
                failures.append(f"grad of {name}: missing on one side")
                continue
            msg = _compare(f"grad of {name}", got_grad, want_grad, rtol, atol, check_stride)
            if msg:
                failures.append(msg)
            arg.grad = None
    return failures
