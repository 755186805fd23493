"""pytest plugin of the launch dry run: the op's own test cases run on a CPU, every launch recorded.

Loaded with ``-p bot.dryrun.plugin`` into the checkout's pytest, in a Python that has torch (a CPU
build does) and, for the cuTile side, ``cuda.tile`` (it imports and defines kernels without a GPU).
Nothing is launched: ``cuda.tile.launch`` and the cutile-rs wrapper's cffi call are replaced by
recorders that write down what the kernel would have received (the grid; each argument's shape,
strides and dtype, or its value). A test case ends as soon as the test reads a tensor a launch was
given (``case_end.py``): its outputs were never computed, and only the launches count.

The plugin keeps the first ``AGENT_D_DRYRUN_CASES`` test cases that exist for both backends
(``cutile`` and ``cutile-rs``, the same other parameters), then, up to ``AGENT_D_DRYRUN_MAX_CASES``
(default 8), each case naming a parameter value none kept names (``covering_cases``), and
deselects the rest. It writes
``AGENT_D_DRYRUN_OUT`` (JSON) at the end of the session. Standard library and torch only: it
runs in the checkout's interpreter, not agent-d's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import types

import pytest

from bot.dryrun import case_end, cpu_cuda

RECORDS: dict[str, dict] = {}  # nodeid -> {"backend", "case", "launches", "error"}
_SEARCH: list = []  # the dry run's exhaustive search (first config, nothing launched), for both sides
_TUNED: dict[str, dict[str, list]] = {}  # the test's reference kernel -> the values its search ranges over
_CURRENT: list[str] = []
_CUTILE_RS = re.compile(r"^cutile[-_]rs$")
_CALL_PREFIX = "cutile_"


# --------------------------------------------------------------------------------- the recorders


def describe(value) -> dict:
    """What a kernel receives for one argument."""
    import torch

    if isinstance(value, torch.Tensor):
        return {
            "kind": "tensor",
            "shape": list(value.shape),
            "strides": list(value.stride()),
            "dtype": str(value.dtype).replace("torch.", ""),
            "numel": value.numel(),
            "storage_offset": value.storage_offset(),
            "digest": _digest(value),
        }
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        # a list of tensors (group_gemm's `As`): each element as the kernel sees a tensor
        return {"kind": "list", "items": [describe(v) for v in value]}
    if isinstance(value, bool):
        return {"kind": "scalar", "value": int(value)}
    if isinstance(value, (int, float)):
        return {"kind": "scalar", "value": value}
    if hasattr(value, "item") and callable(value.item):
        try:
            return {"kind": "scalar", "value": value.item()}
        except (RuntimeError, ValueError):
            pass
    return {"kind": "other", "value": repr(value)[:80]}


def _digest(tensor) -> str:
    """The tensor's bytes in element order (views of one input agree): matches an input across runs."""
    import torch

    try:
        flat = tensor.detach().contiguous().reshape(-1)
        if flat.numel() > 1 << 20:  # a sample is enough to tell inputs apart
            flat = torch.cat([flat[: 1 << 16], flat[-(1 << 16) :]])
        data = flat.view(torch.uint8)
        return hashlib.sha1(bytes(data.numpy())).hexdigest()[:16] + f":{tensor.numel()}"
    except (RuntimeError, TypeError, ValueError):
        return ""


def _record(launch: dict) -> None:
    if _CURRENT:
        RECORDS[_CURRENT[-1]]["launches"].append(launch)


def _calling_modules() -> list[str]:
    """The tilegym modules whose code is on the stack of a launch: a reference that launches a
    helper module's kernel (flash_decode's split-k reduce) is on the stack of that launch."""
    frame, seen = sys._getframe(2), []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("tilegym.") and name not in seen:
            seen.append(name)
        frame = frame.f_back
    return seen


def _patch_cuda_tile() -> None:
    """``ct.launch`` records the reference kernel's name, parameters, grid and arguments."""
    try:
        import cuda.tile as ct
    except ImportError:
        return

    def launch(stream, grid, kernel, args, *rest, **kwargs):
        for arg in args:
            for tensor in arg if isinstance(arg, (list, tuple)) else (arg,):
                case_end.launched(tensor)
        fn = getattr(kernel, "_pyfunc", kernel)
        code = getattr(fn, "__code__", None)
        params = list(code.co_varnames[: code.co_argcount]) if code else []
        _record(
            {
                "side": "cutile",
                "kernel": getattr(fn, "__name__", repr(kernel)),
                "module": getattr(fn, "__module__", ""),
                "callers": _calling_modules(),
                "params": params,
                "grid": [int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,))],
                "args": [describe(a) for a in args],
                "tuned": _TUNED.get(getattr(fn, "__name__", ""), {}),
            }
        )

    def exhaustive_search(search_space, stream, grid_fn, kernel, args_fn, hints_fn=None, **_):
        """Autotuning chooses nothing here: the first config, as with autotuning switched off. The
        values the search ranges over are kept with the kernel's launch: any of them is the
        reference's as much as the first (a GPU picks whichever runs fastest)."""
        configs = list(search_space)
        if not configs:
            raise ValueError("the dry run was given an empty search space")
        fn = getattr(kernel, "_pyfunc", kernel)
        _TUNED[getattr(fn, "__name__", "")] = _search_values(configs)
        best = types.SimpleNamespace(config=configs[0], time_us=1.0)
        return types.SimpleNamespace(best=best, results=[best])

    ct.launch = launch
    _SEARCH[:] = [exhaustive_search]
    try:
        import cuda.tile.tune as tune

        tune.exhaustive_search = exhaustive_search
    except ImportError:
        pass
    for name, module in list(sys.modules.items()):
        if not name.startswith("tilegym."):
            continue
        if getattr(module, "launch", None) is not None and hasattr(module, "ct"):
            module.launch = launch  # `from cuda.tile import launch`
        if callable(getattr(module, "exhaustive_search", None)):
            module.exhaustive_search = exhaustive_search  # `from cuda.tile.tune import exhaustive_search`


def _search_values(configs: list) -> dict[str, list]:
    """Each numeric field of the configs -> the values it takes across them."""
    values: dict[str, set] = {}
    for config in configs:
        fields = getattr(config, "__dict__", None) or (config if isinstance(config, dict) else {})
        for name, value in fields.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.setdefault(str(name), set()).add(value)
    return {name: sorted(v) for name, v in values.items()}


class _RecordingLib:
    """The cffi library of the dry run: each ``cutile_<op>`` call is recorded and returns 0."""

    def __getattr__(self, symbol: str):
        if not symbol.startswith(_CALL_PREFIX):
            raise AttributeError(symbol)

        def call(*args):
            _record({"side": "cutile-rs", "symbol": symbol, "args": [a for a in args]})
            return 0

        return call


def _patch_wrappers() -> None:
    """Every imported cutile-rs wrapper calls the recorder instead of its library."""
    lib = _RecordingLib()
    ffi = types.SimpleNamespace(NULL=None)  # a descriptor a launch does not pass

    def bind(_kernel, _cdef):
        return ffi, lib

    def make_tensor_desc(_ffi, tensor):
        case_end.launched(tensor)
        return describe(tensor)

    def autotune_launch(kernel_fn, configs, key=None, kernel_name="", **_):
        first = configs[0]
        return types.SimpleNamespace(output=kernel_fn(first), config=first, best_config=first)

    for name, module in list(sys.modules.items()):
        if name.startswith("tilegym.ops.cutile_rs.") and hasattr(module, "_FFI_CDEF"):
            module.bind_kernel_function_cffi = bind
            module.make_tensor_desc = make_tensor_desc
            module.check_rc = lambda rc, name: None
            if hasattr(module, "autotune_launch"):
                module.autotune_launch = autotune_launch
            if _SEARCH and hasattr(module, "_rs_exhaustive_search"):
                # a carried wrapper's search, as the reference's: the first config, no tuning launch
                module._rs_exhaustive_search = _SEARCH[0]


# --------------------------------------------------------------------------------- pytest hooks


def _backend(item) -> str:
    params = getattr(getattr(item, "callspec", None), "params", {})
    backend = params.get("backend")
    if isinstance(backend, str):
        return "cutile-rs" if _CUTILE_RS.match(backend) else backend
    return ""


MAX_CASES = 8  # the most cases the cover may take (each runs both backends' host code on the CPU)


def _values(item) -> set[tuple[str, str]]:
    """The (parameter, value) pairs of a test case, its backend aside."""
    params = dict(getattr(getattr(item, "callspec", None), "params", {}))
    params.pop("backend", None)
    return {(k, repr(v)) for k, v in params.items()}


def covering_cases(cases: list[set[tuple[str, str]]], wanted: int, most: int) -> list[int]:
    """Indices of the cases to compare, in the test file's order: the first ``wanted``, then, up to
    ``most``, a case naming a parameter value none taken names, the one naming most first. A value
    (a dtype, a flag, a size) is what chooses a reference's kernel or launch path, so every value is
    seen when ``most`` allows, as the perf stage's cover does."""
    taken = list(range(min(wanted, len(cases))))
    seen = set().union(*(cases[i] for i in taken)) if taken else set()
    while len(taken) < min(most, len(cases)):
        gain, first = max((len(cases[i] - seen), -i) for i in range(len(cases)) if i not in taken)
        if gain == 0:
            break
        taken.append(-first)
        seen |= cases[-first]
    return sorted(taken)


def _case(item) -> str:
    """The test case with its backend taken out: a cuTile case and its cutile-rs twin share it."""
    params = dict(getattr(getattr(item, "callspec", None), "params", {}))
    params.pop("backend", None)
    return f"{item.nodeid.split('[', 1)[0]}[{sorted((k, repr(v)) for k, v in params.items())}]"


UNAVAILABLE: list[str] = []  # why nothing can be recorded in this interpreter
SKIPPED: list[str] = []  # test files pytest skipped whole, with the reason


def _install() -> None:
    """At import, before pytest loads the checkout's conftest (which may import tilegym and ask CUDA)."""
    os.environ.setdefault("TILEGYM_DISABLE_AUTOTUNE", "1")
    try:
        cpu_cuda.install()
    except ImportError as exc:
        UNAVAILABLE.append(f"torch is not importable ({exc})")
        return
    try:
        import cuda.tile  # noqa: F401
    except ImportError as exc:
        UNAVAILABLE.append(f"cuda.tile is not importable, so the reference cannot be recorded ({exc})")
    _patch_cuda_tile()


_install()


def pytest_collection_modifyitems(session, config, items):
    if UNAVAILABLE:
        config.hook.pytest_deselected(items=list(items))
        items[:] = []
        return
    wanted = int(os.environ.get("AGENT_D_DRYRUN_CASES", "3"))
    functions = set(os.environ.get("AGENT_D_DRYRUN_TESTS", "").split())  # the tests that call the op
    by_case: dict[str, dict[str, object]] = {}
    for item in items:
        if functions and getattr(item, "originalname", item.name.split("[", 1)[0]) not in functions:
            continue
        backend = _backend(item)
        if backend in ("cutile", "cutile-rs"):
            by_case.setdefault(_case(item), {})[backend] = item
    both = [case for case, sides in by_case.items() if len(sides) == 2]
    most = max(wanted, int(os.environ.get("AGENT_D_DRYRUN_MAX_CASES", str(MAX_CASES))))
    pairs = covering_cases([_values(by_case[c]["cutile"]) for c in both], wanted, most)
    pairs = [both[i] for i in pairs]
    # the cases are chosen alike in both processes; each keeps its own side's (run.py's SIDES)
    sides = (
        [os.environ["AGENT_D_DRYRUN_SIDE"]]
        if os.environ.get("AGENT_D_DRYRUN_SIDE")
        else ["cutile", "cutile-rs"]
    )
    keep = {id(by_case[c][side]) for c in pairs for side in sides}
    deselected = [i for i in items if id(i) not in keep]
    items[:] = [i for i in items if id(i) in keep]
    config.hook.pytest_deselected(items=deselected)
    for item in items:
        RECORDS[item.nodeid] = {"backend": _backend(item), "case": _case(item), "launches": [], "error": ""}


def pytest_runtest_setup(item):
    import torch  # present: pytest_configure installed the shim

    _patch_cuda_tile()
    _patch_wrappers()
    torch.manual_seed(0)  # both backends' runs of a case draw the same inputs
    _CURRENT.append(item.nodeid)
    _TUNED.clear()  # a search of an earlier test names none of this one's values
    case_end.new_case()


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """The test runs until it reads a launched tensor (case_end.py); then the case has passed."""
    watch = case_end.watch()
    watch.__enter__()
    try:
        outcome = yield
    finally:
        watch.__exit__(None, None, None)
    if outcome.excinfo is not None and isinstance(outcome.excinfo[1], case_end.ResultsRead):
        outcome.force_result(True)


def pytest_runtest_teardown(item):
    if _CURRENT:
        _CURRENT.pop()


def pytest_collectreport(report):
    if report.skipped:  # a whole test file skipped (a missing optional package)
        longrepr = report.longrepr
        reason = longrepr[-1] if isinstance(longrepr, tuple) else str(longrepr)
        SKIPPED.append(f"{report.nodeid}: {reason}"[:300])


def pytest_runtest_logreport(report):
    record = RECORDS.get(report.nodeid)
    if record is not None and report.failed and not record["error"]:
        text = str(report.longrepr).strip().splitlines()
        errors = [x for x in text if x.startswith("E ")]
        record["error"] = (errors[0] if errors else (text[-1] if text else "failed"))[:300]
    elif record is not None and report.skipped and not record["error"]:
        # the test file's own skip: why neither side launched, in its words
        longrepr = report.longrepr
        reason = str(longrepr[-1] if isinstance(longrepr, tuple) else longrepr).removeprefix("Skipped: ")
        record["error"] = f"the test skips it: {reason}"[:300]


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("AGENT_D_DRYRUN_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(
                {"cases": RECORDS, "unavailable": UNAVAILABLE, "skipped_files": SKIPPED},
                fh,
                indent=1,
                sort_keys=True,
                default=repr,
            )
