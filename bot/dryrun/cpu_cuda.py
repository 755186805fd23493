"""CUDA on a CPU for the dry run: tensors asked for on "cuda" are made on the CPU, and torch.cuda
answers as one sm_90 device whose streams and events do nothing.

Loaded by ``plugin.py`` in the checkout's interpreter: standard library and torch only.
"""

from __future__ import annotations

import types


def install() -> None:
    """Tensors asked for on "cuda" are made on the CPU; torch.cuda answers as one sm_90 device."""
    import torch

    _factories_on_cpu(torch)
    _tensors_stay_on_cpu(torch)
    _one_cpu_backed_gpu(torch.cuda)


_FACTORIES = (
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "randint_like",
    "randperm",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "tensor",
    "as_tensor",
    "normal",
)


def _on_cpu(device):
    """A "cuda" device (by name or index) becomes the CPU; any other device is left as it is."""
    import torch

    if device is None:
        return None
    if isinstance(device, int):
        return torch.device("cpu")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        return device
    return torch.device("cpu") if parsed.type == "cuda" else parsed


def _factories_on_cpu(torch) -> None:
    """torch.empty(..., device="cuda") and its kin make their tensor on the CPU, unpinned."""

    def factory(fn):
        def wrapped(*args, **kwargs):
            if "device" in kwargs:
                kwargs["device"] = _on_cpu(kwargs["device"])
            kwargs.pop("pin_memory", None)
            return fn(*args, **kwargs)

        wrapped.__wrapped__ = fn
        return wrapped

    for name in _FACTORIES:
        if hasattr(torch, name):
            setattr(torch, name, factory(getattr(torch, name)))


def _tensors_stay_on_cpu(torch) -> None:
    """.to("cuda") and .cuda() keep the tensor on the CPU, and every tensor says it is on CUDA."""
    original_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        args = tuple(_on_cpu(a) if _names_cuda(a) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = _on_cpu(kwargs["device"])
        return original_to(self, *args, **kwargs)

    torch.Tensor.to = to  # type: ignore[method-assign]
    torch.Tensor.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]
    torch.Tensor.is_cuda = property(lambda self: True)  # type: ignore[assignment]


class _Event:
    """A CUDA event that records nothing; every interval is 1 ms."""

    def __init__(self, *a, **k):
        pass

    def record(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 1.0


class _DeviceContext:
    """torch.cuda.device(...) and torch.cuda.stream(...) as contexts that change nothing."""

    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _one_cpu_backed_gpu(cuda) -> None:
    """torch.cuda answers as one H200-like sm_90 device with a stream that never waits."""
    stream = types.SimpleNamespace(cuda_stream=0, synchronize=lambda: None, wait_stream=lambda *_: None)
    props = types.SimpleNamespace(
        name="dry run (CPU)", major=9, minor=0, multi_processor_count=132, total_memory=141 * 2**30
    )
    for name, value in {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda *_: None,
        "get_device_capability": lambda *_: (9, 0),
        "get_device_properties": lambda *_: props,
        "get_device_name": lambda *_: props.name,
        "current_stream": lambda *a, **k: stream,
        "default_stream": lambda *a, **k: stream,
        "synchronize": lambda *a, **k: None,
        "manual_seed": lambda *_: None,
        "manual_seed_all": lambda *_: None,
        "empty_cache": lambda: None,
        "is_bf16_supported": lambda *a, **k: True,
        "Event": _Event,
        "device": _DeviceContext,
        "stream": _DeviceContext,
    }.items():
        setattr(cuda, name, value)


def _names_cuda(value) -> bool:
    import torch

    if isinstance(value, str):
        return value.startswith("cuda")
    return isinstance(value, torch.device) and value.type == "cuda"
