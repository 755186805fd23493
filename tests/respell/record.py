"""A module and its re-spellings run on a CPU with every ``ct.launch`` recorded, in the
interpreter that has torch and cuda.tile (tests/respell_corpus.py); the standard library only at
module level.
"""

from __future__ import annotations

import re
from pathlib import Path

from respell.model import HELD_OUT, REFERENCES

#
# Run in the interpreter with torch and cuda.tile (tests/checkout_support.py's torch_python()),
# not the suite's: only the standard library is imported at module level above.

# Inputs built without knowing the op: every required parameter annotated int, float or bool gets
# a small value of that type, every other one a float32 tensor of one shape, the shapes tried in
# this order until a call launches.
GENERIC_SHAPES = ((64, 64), (4, 64), (2, 64, 64), (1, 2, 64, 64))
_SCALARS = {"int": 2, "float": 0.5, "bool": False}
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def record(jobs_file: str, out_file: str, agent_d_root: str, wheel_root: str) -> None:
    """Each job's sources executed as its module and its registered functions called on generic
    inputs, every ``ct.launch`` recorded (bot/dryrun/plugin.py's CPU shim and recorder)."""
    import json
    import os
    import sys

    os.environ["TILEGYM_DISABLE_AUTOTUNE"] = "1"  # the first config, as the dry run launches
    sys.path[:0] = [agent_d_root, wheel_root]
    import torch

    import bot.dryrun.plugin as plugin  # importing it installs the shim and the recorder

    _zeroed_allocations(torch)
    _bare_packages(Path(wheel_root))
    jobs = json.loads(Path(jobs_file).read_text(encoding="utf-8"))
    results = {}
    for job in jobs:
        results[job["op"]] = {
            label: _run_module(plugin, torch, job, Path(path)) for label, path in job["sources"].items()
        }
    results["held_out_imported"] = sorted(m for m in sys.modules if any(h in m for h in HELD_OUT))
    Path(out_file).write_text(json.dumps(results, indent=1, sort_keys=True, default=repr), encoding="utf-8")


def _zeroed_allocations(torch) -> None:
    """``torch.empty`` and its kin give zeros: the recorded digests of outputs then repeat."""
    for name in ("empty", "empty_like", "empty_strided"):
        allocate = getattr(torch, name)

        def zeroed(*args, _allocate=allocate, **kwargs):
            tensor = _allocate(*args, **kwargs)
            with torch.no_grad():
                return tensor.zero_()

        setattr(torch, name, zeroed)


def _bare_packages(wheel_root: Path) -> None:
    """``tilegym``, ``tilegym.ops`` and the reference packages as bare packages: their
    ``__init__`` would import every reference module, the held-out ones included."""
    import sys
    import types

    for name in ("tilegym", "tilegym.ops", "tilegym.ops.cutile"):
        package = types.ModuleType(name)
        package.__path__ = [str(wheel_root / name.replace(".", "/"))]
        sys.modules[name] = package
    for folder in sorted((wheel_root / REFERENCES).iterdir()):
        if folder.is_dir() and (folder / "__init__.py").is_file():
            name = "tilegym.ops.cutile." + folder.name
            package = types.ModuleType(name)
            package.__path__ = [str(folder)]
            sys.modules[name] = package


def _run_module(plugin, torch, job: dict, path: Path) -> dict:
    """One source run as the job's module: what its registered functions launched, per input tried."""
    import inspect
    import sys
    import types

    name = job["module"]
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__package__ = name.rpartition(".")[0]
    sys.modules[name] = module
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    except Exception as exc:  # the comparison shows it, side by side with the original's
        return {"exec_error": _error(exc)}
    plugin._patch_cuda_tile()
    calls = {}
    for entry in job["entries"]:
        function = module.__dict__.get(entry)
        if function is not None and not _required(inspect, function):
            made = function()  # a getter (`get_swiglu()`): its function is the op
            function = made if inspect.isfunction(made) else None
        calls[entry] = [] if function is None else _calls(plugin, torch, inspect, function)
    return {"calls": calls}


def _required(inspect, function) -> list:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(function).parameters.values()
    return [p for p in params if p.default is inspect.Parameter.empty and p.kind in kinds]


def _calls(plugin, torch, inspect, function) -> list[dict]:
    """The function called with each generic input in turn, up to the first that launches."""
    import random

    attempts = []
    for shape in GENERIC_SHAPES:
        torch.manual_seed(0)
        random.seed(0)
        args = []
        for p in _required(inspect, function):
            note = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
            args.append(_SCALARS[note] if note in _SCALARS else torch.randn(shape, dtype=torch.float32))
        plugin._CURRENT[:] = ["respell"]
        plugin.RECORDS["respell"] = {"launches": []}
        try:
            result, error = function(*args), ""
        except Exception as exc:
            result, error = None, _error(exc)
        launches = [_plain(launch) for launch in plugin.RECORDS["respell"]["launches"]]
        attempts.append(
            {"shape": list(shape), "error": error, "launches": launches, "result": _described(plugin, result)}
        )
        if launches and not error:
            break
    plugin._CURRENT[:] = []
    return attempts


def _described(plugin, value):
    if isinstance(value, (tuple, list)):
        return [_described(plugin, v) for v in value]
    return _plain(plugin.describe(value)) if value is not None else None


def _plain(value):
    """JSON-ready, with object addresses taken out (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return _ADDRESS.sub("0x?", value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return _ADDRESS.sub("0x?", repr(value))


def _error(exc: BaseException) -> str:
    return _ADDRESS.sub("0x?", f"{type(exc).__name__}: {exc}")[:300]
