"""Print the Python host time per call of agent-d's carried wrapper against the hand-written one,
on the CPU: a proxy for the GPU bench (``scripts/gpu/run/bench.py``), which times the real thing.

Per op, agent-d generates the wrapper from the checkout's cuTile reference and the op's kernel.rs;
both wrappers are loaded in one torch process over the wheel's TileGym runtime, torch.cuda answered
by the dry run's CPU stand-in, and the launcher in libcutile_kernels.so replaced by a function that
returns 0: what is timed is the Python between the call and the C call (descriptors included), not
the kernel. Figures, not assertions: the median over rounds of 500 calls, the order rotating.

    python benchmarks/carried_host_time.py [--tilegym CHECKOUT] [--ops silu_and_mul swiglu]
        [--python TORCH_PYTHON]

Without --tilegym the references are the tilegym 1.5.1 wheel's (a demo checkout is assembled).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bot.apply import apply
from bot.demo import assemble_checkout
from bot.emit import generate, stage_generate
from bot.targets.types import Target
from bot.wheel import tilegym_wheel

ROOT = Path(__file__).resolve().parent.parent

_TIMER = r"""
import importlib.util, json, statistics, sys, time
settings = json.loads(sys.argv[1])
sys.path[:0] = [settings["root"], settings["wheel"]]
from bot.dryrun import cpu_cuda
cpu_cuda.install()
import cffi, torch
import tilegym.backend as backend
from tilegym.backend.cutile_rs import utils
from scripts.gpu.run.bench import pin_first_config

class ReturnsZero:
    def __getattr__(self, name):
        return lambda *args: 0

def load(path, name, op):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    registered = backend.register_impl
    backend.register_impl = lambda *a, **k: (lambda fn: fn)  # both register the same name
    try:
        spec.loader.exec_module(module)
    finally:
        backend.register_impl = registered
    pin_first_config(module)  # one config every call, as the GPU bench pins it
    ffi = cffi.FFI()
    ffi.cdef(utils._TENSORDESC_CDEF + module._FFI_CDEF)
    utils._cffi_kernel_libs[op] = (ffi, ReturnsZero())
    return getattr(module, op)

out = {}
for op, generated, hand in settings["cases"]:
    args = tuple(torch.randn(*shape, device="cuda") for shape in settings["shapes"][op])
    calls = {"agent-d": load(generated, "generated_" + op, op), "hand-written": load(hand, "hand_" + op, op)}
    for fn in calls.values():
        for _ in range(300):
            fn(*args)
    times = {name: [] for name in calls}
    for round_ in range(settings["rounds"]):
        order = list(calls) if round_ % 2 else list(reversed(calls))
        for name in order:
            start = time.perf_counter()
            for _ in range(500):
                calls[name](*args)
            times[name].append((time.perf_counter() - start) / 500 * 1e6)
    ours, theirs = statistics.median(times["agent-d"]), statistics.median(times["hand-written"])
    out[op] = {"agent_d_us": ours, "hand_written_us": theirs, "ratio": ours / theirs}
print(json.dumps(out))
"""

# the bench's inputs: each op's own arguments, small (the host time does not grow with them)
SHAPES = {"silu_and_mul": [(4, 1024)], "swiglu": [(4, 512), (4, 512)]}


def generated_wrapper(checkout: Path, op: str, dest: Path) -> Path:
    target = Target(checkout, op)
    plan, _facts, co = stage_generate.make_plan(target, dest / "work")
    files = apply.formatted(generate.generate(target, plan, co), checkout)
    wrapper = next(f for f in files.files if f.path.endswith(f"cutile_rs/{op}.py"))
    path = dest / f"{op}.py"
    path.write_text(wrapper.content)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tilegym", type=Path, help="a checkout whose references and kernel.rs are read")
    parser.add_argument("--ops", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--python", default=sys.executable, help="an interpreter with torch and cffi")
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    wheel = tilegym_wheel()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        checkout = args.tilegym or assemble_checkout(work / "tilegym", wheel, args.ops, args.ops).repo
        cases = []
        for op in args.ops:
            (work / op).mkdir()
            generated = generated_wrapper(checkout, op, work / op)
            cases.append((op, str(generated), str(wheel / "tilegym" / "ops" / "cutile_rs" / f"{op}.py")))
        settings = {"root": str(ROOT), "wheel": str(wheel), "cases": cases, "shapes": SHAPES}
        settings["rounds"] = args.rounds
        done = subprocess.run(
            [args.python, "-c", _TIMER, json.dumps(settings)], capture_output=True, text=True
        )
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    where = args.tilegym or f"the {wheel.name} wheel"
    print(f"carried wrapper host time on the CPU (references of {where}; launcher returns 0)")
    for op, row in figures.items():
        print(
            f"  {op:14} agent-d {row['agent_d_us']:6.2f} us  hand-written {row['hand_written_us']:6.2f} us"
            f"  ratio {row['ratio']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
