"""pytest plugin (tests only): TileGym's own ``test_perf`` run to its ``record_property`` on a CPU.

It makes no timing worth reading; it makes the record TileGym's code writes. The launch dry run's
shim (``bot/dryrun/plugin.py``) answers ``torch.cuda`` as one device and makes "cuda" tensors on
the CPU; cuTile's ``launch`` and the cutile-rs wrapper's C call are recorders. On top of that this
plugin gives ``torch.cuda`` what TileGym's ``benchmark_fn`` and ``benchmark_fn_cudagraph``
(``tests/common.py``) call: CUDA events that read the wall clock, memory statistics, and a
CUDA graph whose capture runs its body once and whose replay does nothing
(``AGENT_D_PERF_CPU_GRAPHS=0`` leaves graphs out: a case timed through one then fails, as on a
machine without them). Run with ``CUPTI=0`` (the CUPTI path needs a GPU's profiler) and small
``REP``/``WARMUP``. ``AGENT_D_PERF_CPU_ONLY``: only the cases whose id contains it are kept.
"""

from __future__ import annotations

import contextlib
import os
import time

import torch

import bot.dryrun.plugin as dry


class Event:
    def __init__(self, *args, **kwargs) -> None:
        self.at = 0.0

    def record(self, *args, **kwargs) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: Event) -> float:
        return (other.at - self.at) * 1000.0


class CUDAGraph:
    def replay(self) -> None:
        pass


SHIMS = {
    "Event": Event,
    "memory_stats": lambda *a, **k: {"allocated_bytes.all.peak": 0},
    "reset_peak_memory_stats": lambda *a, **k: None,
    "_sleep": lambda *a, **k: None,
}
if os.environ.get("AGENT_D_PERF_CPU_GRAPHS", "1") == "1":
    SHIMS.update({"CUDAGraph": CUDAGraph, "graph": lambda *a, **k: contextlib.nullcontext()})
for _name, _value in SHIMS.items():
    setattr(torch.cuda, _name, _value)
torch._C._cuda_clearCublasWorkspaces = lambda: None


def pytest_collection_modifyitems(session, config, items):
    only = os.environ.get("AGENT_D_PERF_CPU_ONLY", "")
    if not only:
        return
    dropped = [i for i in items if only not in i.nodeid]
    items[:] = [i for i in items if only in i.nodeid]
    config.hook.pytest_deselected(items=dropped)


def pytest_runtest_setup(item):
    dry._patch_cuda_tile()
    dry._patch_wrappers()
