"""Host time per call of the two trees' cutile-rs wrappers, measured in one process, interleaved.

Both wrapper modules (hand-written and agent-d's) are loaded side by side from their files, each
bound to its own tree's ``libcutile_kernels.so`` (cffi ``dlopen``s the two libraries separately),
over one TileGym runtime. Each is called directly, on the same fixed small inputs. After a
warm-up (which also JIT-compiles the kernel in each library), ``--repeats`` rounds each time
``--calls`` calls of every variant, the order rotating from round to round, without
synchronizing inside a timed loop: the figure is the host time to validate, pack descriptors
and launch one kernel (the launchers synchronize, so it includes the tiny kernel). Reported:
the median per variant and the median of the per-round ratios agent-d / hand-written. Timing
the trees in one process, round by round, removes the process-to-process swings (tens of
percent on the lent machine) that separate runs showed.

Both trees must run the same kernel for the ratio to mean anything: matmul is called with an
explicit ``static_persistent=False`` (wrappers differ in what an omitted flag means), and autotuned
wrappers are pinned to their first config (``pin_first_config``), which is the same in both trees.

``--cross`` also times each wrapper over the other tree's library (for ops whose C signatures
agree), to tell a gap in the Python wrapper from one in ``ffi.rs``.

Usage: python3 bench.py --hand-written A --agent-d B --ops silu_and_mul swiglu --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

SO_REL = "src/tilegym/ops/cutile_rs/cutile_kernels/target/release/libcutile_kernels.so"


def make_call(op: str, torch, impl):
    """A zero-argument callable running ``op`` on fixed small inputs; ``impl(name)`` is the wrapper's
    registered function of that name."""
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    if op == "silu_and_mul":
        x = torch.randn(4, 64, 2 * 256, dtype=torch.float16, device=dev, generator=g)
        fn = impl("silu_and_mul")
        return lambda: fn(x)
    if op == "swiglu":
        a = torch.randn(2, 64, 256, device=dev, generator=g)
        b = torch.randn(2, 64, 256, device=dev, generator=g)
        fn = impl("get_swiglu")()
        return lambda: fn(a, b)
    if op == "matmul":
        a = torch.randn(256, 256, dtype=torch.float16, device=dev, generator=g)
        b = torch.randn(256, 256, dtype=torch.float16, device=dev, generator=g)
        fn = impl("matmul")
        return lambda: fn(a, b, static_persistent=False)
    if op == "bmm":
        a = torch.randn(4, 128, 128, dtype=torch.float16, device=dev, generator=g)
        b = torch.randn(4, 128, 128, dtype=torch.float16, device=dev, generator=g)
        fn = impl("bmm")
        return lambda: fn(a, b, static_persistent=True)
    if op == "attention_sink":
        bf = torch.bfloat16
        q = torch.randn(1, 32, 8, 8, 64, dtype=bf, device=dev, generator=g)
        k = torch.randn(1, 128, 8, 64, dtype=bf, device=dev, generator=g)
        v = torch.randn(1, 128, 8, 64, dtype=bf, device=dev, generator=g)
        sinks = torch.randn(64, dtype=bf, device=dev, generator=g)
        start_q = torch.tensor([0], dtype=torch.int32, device=dev)
        fn = impl("attention_sink")
        return lambda: fn(q, k, v, sinks, 0.125, None, start_q)
    raise KeyError(op)


class _Pinned:
    """TileGym's tuned result, as much of it as the wrappers read: the output and the config."""

    def __init__(self, output, best_config):
        self.output = output
        self.best_config = best_config


def pin_first_config(module) -> bool:
    """Make ``module``'s ``autotune_launch`` run its first config every call; False if it has none."""
    if not hasattr(module, "autotune_launch"):
        return False

    def first_config(kernel_fn, configs, key=None, kernel_name="", **_):
        first = list(configs)[0]
        return _Pinned(kernel_fn(first), first)

    module.autotune_launch = first_config
    return True


def load_wrapper(op: str, wrapper_tree: Path, so_tree: Path, label: str):
    """``wrapper_tree``'s ``ops/cutile_rs/<op>.py`` as a fresh module whose cffi binding opens
    ``so_tree``'s library, autotuning pinned to the first config."""
    from cffi import FFI
    from tilegym.backend.cutile_rs import utils

    path = wrapper_tree / "src" / "tilegym" / "ops" / "cutile_rs" / f"{op}.py"
    spec = importlib.util.spec_from_file_location(f"_bench_{label.replace('+', '_')}_{op}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    so_path = str(so_tree / SO_REL)
    bound: dict[str, tuple] = {}

    def bind(kernel, cdef, *_args, **_kwargs):
        if kernel not in bound:
            ffi = FFI()
            ffi.cdef(utils._TENSORDESC_CDEF + cdef)
            bound[kernel] = (ffi, ffi.dlopen(so_path))
        return bound[kernel]

    module.bind_kernel_function_cffi = bind
    return module, pin_first_config(module), str(path), so_path


def measure(calls: dict[str, object], torch, n: int, repeats: int) -> dict[str, list[float]]:
    """Per variant, ``repeats`` figures of µs per call; the order of the variants rotates each round."""
    labels = list(calls)
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(repeats):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            call = calls[label]
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(n):
                call()
            samples[label].append((time.perf_counter() - start) / n * 1e6)
            torch.cuda.synchronize()
    return samples


def summarise(samples: dict[str, list[float]], n: int) -> dict[str, object]:
    out: dict[str, object] = {
        label: {
            "us_per_call": round(statistics.median(v), 2),
            "samples_us": [round(x, 2) for x in v],
            "calls": n,
        }
        for label, v in samples.items()
    }
    if "agent_d" in samples and "hand_written" in samples:
        rounds = [a / h for a, h in zip(samples["agent_d"], samples["hand_written"], strict=True)]
        out["ratio"] = round(statistics.median(rounds), 3)
        out["round_ratios"] = [round(x, 3) for x in rounds]
    return out


# Host-side building blocks of the row wrappers, timed alone: where a few microseconds go.
SNIPPETS = {
    "shape slice + tuple": "a.shape[:-1] + (256,)",
    "contiguous().view": "a.contiguous().view(-1, 256)",
    "contiguous().reshape": "a.contiguous().reshape(-1, 256)",
    "empty_like": "torch.empty_like(a2)",
    "new_empty": "a2.new_empty((128, 256))",
    "empty(size, device, dtype)": "torch.empty((128, 256), device=a.device, dtype=a.dtype)",
    "view(size)": "c2.view(shape)",
    "view(*size)": "c2.view(*shape)",
    "numel guard": "c2.numel() > 0",
    "current_stream": "torch.cuda.current_stream(device=a.device).cuda_stream",
    "make_tensor_desc": "make_tensor_desc(ffi, a2)",
    "is_cuda x2 + device compare": "not a.is_cuda or not b.is_cuda or a.device != b.device",
}


def snippet_costs(torch, number: int = 5000) -> dict[str, float]:
    """µs per evaluation of each snippet (best of 7), on the bench's swiglu-sized inputs."""
    import timeit

    from cffi import FFI
    from tilegym.backend.cutile_rs.utils import _TENSORDESC_CDEF, make_tensor_desc

    ffi = FFI()
    ffi.cdef(_TENSORDESC_CDEF)
    a = torch.randn(2, 64, 256, device="cuda")
    names = {"torch": torch, "ffi": ffi, "make_tensor_desc": make_tensor_desc, "a": a, "b": a.clone()}
    names |= {"a2": a.view(-1, 256), "c2": torch.empty(128, 256, device="cuda"), "shape": a.shape}
    return {
        label: round(min(timeit.Timer(stmt, globals=names).repeat(7, number)) / number * 1e6, 3)
        for label, stmt in SNIPPETS.items()
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--hand-written", type=Path, required=True, help="tree A")
    p.add_argument("--agent-d", type=Path, required=True, help="tree B")
    p.add_argument("--ops", nargs="*", default=[])
    p.add_argument("--cross", nargs="*", default=[], help="ops to also time over the other tree's library")
    p.add_argument("--json", required=True)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--repeats", type=int, default=31)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--snippets", action="store_true", help="also time the wrappers' building blocks alone")
    args = p.parse_args(argv)
    a, b = args.hand_written.resolve(), args.agent_d.resolve()
    sys.path.insert(0, str(a / "src"))  # one TileGym runtime; only the op wrappers and libraries differ
    import tilegym  # noqa: F401
    import torch

    results = {}
    for op in args.ops:
        variants = {"hand_written": (a, a), "agent_d": (b, b)}
        if op in args.cross:
            variants |= {"hand_written_py+agent_d_so": (a, b), "agent_d_py+hand_written_so": (b, a)}
        try:
            calls, info = {}, {}
            for label, (wrapper_tree, so_tree) in variants.items():
                module, pinned, wrapper, so = load_wrapper(op, wrapper_tree, so_tree, label)
                calls[label] = make_call(op, torch, lambda name, m=module: getattr(m, name))
                info[label] = {
                    "wrapper": wrapper,
                    "library": so,
                    "config": "first config, pinned" if pinned else "no autotuning",
                }
                for _ in range(args.warmup):
                    calls[label]()
            torch.cuda.synchronize()
            summary = summarise(measure(calls, torch, args.calls, args.repeats), args.calls)
            for label in variants:
                summary[label].update(info[label])
            summary["method"] = (
                f"one process, {len(variants)} variants interleaved, {args.repeats} rounds of {args.calls} calls"
            )
            results[op] = summary
        except Exception as exc:
            results[op] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-2000:],
            }
        print(op, json.dumps({k: v for k, v in results[op].items() if k != "round_ratios"})[:600], flush=True)
    if args.snippets:
        try:
            results["_snippets_us"] = snippet_costs(torch)
        except Exception as exc:
            results["_snippets_us"] = {"error": f"{type(exc).__name__}: {exc}"}
        print("snippets", json.dumps(results["_snippets_us"]), flush=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
