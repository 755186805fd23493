"""Host time per call of one tree's cutile-rs wrappers (run once per tree, in its own process).

The call goes through TileGym's public op (dispatch -> the tree's registered cutile-rs wrapper)
on fixed small inputs. After a warm-up (which also JIT-compiles the kernel) the GPU is idle;
then ``--calls`` calls are timed with ``time.perf_counter`` without synchronizing inside the
loop, so the figure is the host time to validate, pack descriptors and enqueue one launch
(the kernels are tiny, so the launch queue never fills). Median of ``--repeats`` loops.

Both trees must run the same kernel for the ratio to mean anything: matmul is called with an
explicit ``static_persistent=False`` (wrappers differ in what an omitted flag means), and autotuned
wrappers are pinned to their first config (``pin_first_config``), which is the same in both trees,
instead of each process picking its own winner.

Usage: python3 bench.py --tree TREE --ops silu_and_mul swiglu --json out.json
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import time
import traceback


def make_call(op: str, torch, tilegym):
    """A zero-argument callable running ``op`` on fixed small inputs, and the registry name."""
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    if op == "silu_and_mul":
        x = torch.randn(4, 64, 2 * 256, dtype=torch.float16, device=dev, generator=g)
        return (lambda: tilegym.ops.silu_and_mul(x)), "silu_and_mul"
    if op == "swiglu":
        from tilegym.ops import get_swiglu

        a = torch.randn(2, 64, 256, device=dev, generator=g)
        b = torch.randn(2, 64, 256, device=dev, generator=g)
        fn = get_swiglu()
        return (lambda: fn(a, b)), "get_swiglu"
    if op == "matmul":
        a = torch.randn(256, 256, dtype=torch.float16, device=dev, generator=g)
        b = torch.randn(256, 256, dtype=torch.float16, device=dev, generator=g)
        return (lambda: tilegym.ops.matmul(a, b, static_persistent=False)), "matmul"
    if op == "bmm":
        a = torch.randn(4, 128, 128, dtype=torch.float16, device=dev, generator=g)
        b = torch.randn(4, 128, 128, dtype=torch.float16, device=dev, generator=g)
        return (lambda: tilegym.ops.bmm(a, b, static_persistent=True)), "bmm"
    if op == "attention_sink":
        bf = torch.bfloat16
        q = torch.randn(1, 32, 8, 8, 64, dtype=bf, device=dev, generator=g)
        k = torch.randn(1, 128, 8, 64, dtype=bf, device=dev, generator=g)
        v = torch.randn(1, 128, 8, 64, dtype=bf, device=dev, generator=g)
        sinks = torch.randn(64, dtype=bf, device=dev, generator=g)
        start_q = torch.tensor([0], dtype=torch.int32, device=dev)
        return (lambda: tilegym.ops.attention_sink(q, k, v, sinks, 0.125, None, start_q)), "attention_sink"
    raise KeyError(op)


class _Pinned:
    def __init__(self, output):
        self.output = output


def pin_first_config(module) -> bool:
    """Make ``module``'s ``autotune_launch`` run its first config every call; False if it has none."""
    if not hasattr(module, "autotune_launch"):
        return False

    def first_config(kernel_fn, configs, key=None, kernel_name="", **_):
        return _Pinned(kernel_fn(list(configs)[0]))

    module.autotune_launch = first_config
    return True


def impl_file(name: str) -> str:
    try:
        from tilegym.backend.dispatcher import _REGISTRY

        fn = _REGISTRY.get(name, {}).get("cutile-rs")
        return inspect.getsourcefile(fn) if fn else "(no cutile-rs implementation registered)"
    except Exception as exc:  # the registry is an implementation detail of TileGym
        return f"(unknown: {exc})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", required=True)
    p.add_argument("--ops", nargs="+", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=10)
    args = p.parse_args(argv)
    sys.path.insert(0, f"{args.tree}/src")
    import tilegym
    import torch

    tilegym.set_backend("cutile-rs")
    results = {}
    for op in args.ops:
        try:
            import importlib

            pinned = pin_first_config(importlib.import_module(f"tilegym.ops.cutile_rs.{op}"))
            call, name = make_call(op, torch, tilegym)
            for _ in range(args.warmup):
                call()
            torch.cuda.synchronize()
            samples = []
            for _ in range(args.repeats):
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(args.calls):
                    call()
                samples.append((time.perf_counter() - start) / args.calls * 1e6)
                torch.cuda.synchronize()
            results[op] = {
                "us_per_call": round(statistics.median(samples), 2),
                "samples_us": [round(s, 2) for s in samples],
                "calls": args.calls,
                "impl": impl_file(name),
                "config": "first config, pinned" if pinned else "no autotuning",
            }
        except Exception as exc:
            results[op] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-2000:],
            }
        print(op, json.dumps(results[op])[:400], flush=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
