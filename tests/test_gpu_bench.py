"""CPU-side tests of scripts/gpu/run/bench.py, the host-time benchmark: its parts that run without a GPU."""

from __future__ import annotations

import os
import sys
import types


def test_bench_pins_autotuned_wrappers_to_their_first_config():
    import types

    from scripts.gpu.run import bench

    module = types.SimpleNamespace(autotune_launch=lambda **kw: None)
    assert bench.pin_first_config(module)
    seen = []
    out = module.autotune_launch(
        kernel_fn=lambda cfg: seen.append(cfg) or "y", configs=["c1", "c2"], key=(1,)
    )
    assert out.output == "y" and seen == ["c1"]
    assert out.best_config == "c1"  # a carried search reads the tuned result's config
    assert not bench.pin_first_config(types.SimpleNamespace())


def test_bench_rotates_the_order_and_reports_the_median_round_ratio():
    from scripts.gpu.run import bench

    order = []
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    calls = {"hand_written": lambda: order.append("h"), "agent_d": lambda: order.append("a")}
    samples = bench.measure(calls, fake_torch, 1, 4)
    assert order == ["h", "a", "a", "h", "h", "a", "a", "h"]  # who goes first alternates
    assert {k: len(v) for k, v in samples.items()} == {"hand_written": 4, "agent_d": 4}
    summary = bench.summarise({"hand_written": [10.0, 20.0, 10.0], "agent_d": [11.0, 40.0, 12.0]}, 100)
    assert summary["round_ratios"] == [1.1, 2.0, 1.2]
    assert summary["ratio"] == 1.2  # the median round, not 12/10 of the medians or the noisy round
    assert summary["agent_d"]["us_per_call"] == 12.0


_LIBC = next(
    p
    for p in (
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib/libc.so.6",
    )
    if os.path.exists(p)
)


def test_bench_loads_each_wrapper_over_the_library_it_is_told(tmp_path, monkeypatch):
    from scripts.gpu.run import bench

    runtime = tmp_path / "a" / "src" / "tilegym"
    (runtime / "backend" / "cutile_rs").mkdir(parents=True)
    for pkg in (runtime, runtime / "backend", runtime / "backend" / "cutile_rs"):
        (pkg / "__init__.py").write_text("")
    (runtime / "backend" / "cutile_rs" / "utils.py").write_text(
        '_TENSORDESC_CDEF = "typedef struct { int x; } TensorDesc;\\n"\n'
        "def bind_kernel_function_cffi(kernel, cdef):\n    raise AssertionError('the default binding must not be used')\n"
    )
    for tree in ("a", "b"):
        wrapper = tmp_path / tree / "src" / "tilegym" / "ops" / "cutile_rs" / "absval.py"
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        wrapper.write_text(
            "from tilegym.backend.cutile_rs.utils import bind_kernel_function_cffi\n"
            f"TREE = {tree!r}\n"
            "def autotune_launch(**kw):\n    raise AssertionError('not pinned')\n"
            "def absval(x):\n    ffi, lib = bind_kernel_function_cffi('absval', 'int abs(int);')\n    return lib.abs(x)\n"
        )
        so = tmp_path / tree / bench.SO_REL
        so.parent.mkdir(parents=True, exist_ok=True)
        so.symlink_to(_LIBC)  # any real library with a C symbol will do
    monkeypatch.syspath_prepend(str(tmp_path / "a" / "src"))
    for name in [m for m in sys.modules if m == "tilegym" or m.startswith("tilegym.")]:
        monkeypatch.delitem(sys.modules, name)
    module_b, pinned, wrapper, so_path = bench.load_wrapper(
        "absval", tmp_path / "b", tmp_path / "a", "agent_d_py+hand_written_so"
    )
    assert module_b.TREE == "b" and pinned and wrapper.endswith("b/src/tilegym/ops/cutile_rs/absval.py")
    assert so_path == str(tmp_path / "a" / bench.SO_REL)
    assert module_b.absval(-7) == 7  # through cffi over the library it was told to open
    module_a = bench.load_wrapper("absval", tmp_path / "a", tmp_path / "a", "hand_written")[0]
    assert module_a.TREE == "a" and module_a is not module_b
    assert module_a.autotune_launch(kernel_fn=lambda cfg: cfg, configs=[3, 4]).output == 3
    for name in [m for m in sys.modules if m == "tilegym" or m.startswith("tilegym.")]:
        del sys.modules[name]  # the fake runtime must not outlive this test
