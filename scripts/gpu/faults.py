"""The fault corpus: faulty ports built by us from working ones, each with the verdict, the class and
the fix line agent-d must give (tests/fixtures/faults/<case>/case.json, docs/classification.md).

A case names an op of the tilegym 1.5.1 wheel (its checkout is assembled as the demo's: the wheel's
runtime and our own tests) and one change that makes the port faulty:

- ``kernel``: text edits of the wheel's ``kernel.rs`` (``old`` must occur exactly once): a fault of
  the kernel's author;
- ``contract``: the case's ``host_contract.yaml`` put beside the kernel: a porter's wrong launch;
- ``after_port``: text edits of a checkout file after ``agent-d port`` (a test file whose
  parametrization lost cutile-rs);
- ``env`` / ``python``: the environment the verdict is asked in (``python: "without-torch"`` is an
  interpreter that cannot import torch).

One case, the control, changes nothing and expects ALL_PASS: it shows that each fault comes from
its change, and its seconds are the verify path of one kernel on the GPU runner.

``expect`` holds the verdict, the class and a text the fix line must contain. ``decided`` says where
agent-d's verdict comes from: ``pack`` (the port on the packing machine stops before anything runs
on a GPU: a kernel that does not compile) or ``gpu`` (``agent-d verify`` on the GPU machine).
Cases whose sources are the same share one built tree (``tree_key``).

Standard library only: ``run`` and ``table`` use it on the GPU machine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

FAULTS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "faults"
CLASSES = {"FAIL": ("host", "kernel"), "BLOCKED": ("env", "host", "kernel"), "ALL_PASS": ("",)}
DEFAULT_TEST_TIMEOUT = 240
CONTRACT = "host_contract.yaml"
OPS_DIR = "src/tilegym/ops/cutile_rs"


class CaseError(ValueError):
    """A case folder that does not say what it must."""


def load(folder: Path = FAULTS) -> dict[str, dict]:
    """Every case under ``folder``, by name, checked for the keys it must have."""
    cases = {}
    for case_dir in sorted(p for p in Path(folder).iterdir() if (p / "case.json").is_file()):
        case = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
        case["name"], case["dir"] = case_dir.name, str(case_dir)
        _check(case)
        cases[case_dir.name] = case
    return cases


def _check(case: dict) -> None:
    name = case["name"]
    for key in ("op", "fault", "class", "change", "expect", "decided"):
        if key not in case:
            raise CaseError(f"{name}: no {key!r}")
    expect = case["expect"]
    if expect.get("class") not in CLASSES.get(expect.get("verdict"), ()):
        raise CaseError(f"{name}: expect {expect.get('verdict')} {expect.get('class')} is not a verdict")
    control = expect["verdict"] == "ALL_PASS"  # the unchanged port: the corpus's faults are its changes
    if control != (not case["change"]):
        raise CaseError(f"{name}: a case expects ALL_PASS exactly when it changes nothing")
    if not control and not expect.get("fix"):
        raise CaseError(f"{name}: expect.fix: the text the fix line must contain")
    if case["decided"] not in ("pack", "gpu"):
        raise CaseError(f"{name}: decided is 'pack' or 'gpu'")
    unknown = set(case["change"]) - {"kernel", "contract", "after_port", "env", "python"}
    if unknown:
        raise CaseError(f"{name}: change: {sorted(unknown)}")
    if case["change"].get("contract") and not (Path(case["dir"]) / CONTRACT).is_file():
        raise CaseError(f"{name}: change.contract without a {CONTRACT}")


def tree_key(case: dict) -> str:
    """Cases with the same op, kernel edits and contract share one built tree."""
    change = case["change"]
    contract = (Path(case["dir"]) / CONTRACT).read_text(encoding="utf-8") if change.get("contract") else ""
    source = json.dumps([case["op"], change.get("kernel", []), contract], sort_keys=True)
    return case["op"] + "-" + hashlib.sha256(source.encode()).hexdigest()[:10]


def edit_once(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise CaseError(f"{path}: {old[:60]!r} occurs {text.count(old)} times, not once")
    path.write_text(text.replace(old, new), encoding="utf-8")


def apply_sources(tree: Path, case: dict) -> None:
    """The case's kernel edits and contract, into a checkout whose op has its kernel.rs only."""
    kernel_dir = tree / OPS_DIR / f"{case['op']}_kernel"
    for edit in case["change"].get("kernel", []):
        edit_once(kernel_dir / "kernel.rs", edit["old"], edit["new"])
    if case["change"].get("contract"):
        shutil.copy2(Path(case["dir"]) / CONTRACT, kernel_dir / CONTRACT)


def apply_after_port(tree: Path, case: dict) -> None:
    for edit in case["change"].get("after_port", []):
        edit_once(tree / edit["file"], edit["old"], edit["new"])


HIDDEN_TORCH = (
    'raise ModuleNotFoundError("No module named \'torch\' (hidden by the fault corpus)", name="torch")\n'
)


def interpreter(case: dict, python: str, state: Path) -> str:
    """The interpreter the case's verdict is asked with: ``python``, or one that cannot import torch."""
    if case["change"].get("python") != "without-torch":
        return python
    shim = state / "without-torch"
    (shim / "torch").mkdir(parents=True, exist_ok=True)
    (shim / "torch" / "__init__.py").write_text(HIDDEN_TORCH, encoding="utf-8")
    wrapper = state / "python-without-torch"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={shim}${{PYTHONPATH:+:$PYTHONPATH}} exec {python} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def environment(case: dict, base: dict[str, str]) -> dict[str, str]:
    """``base`` with the case's variables over it (an empty value is set empty, not removed)."""
    return {**base, **case["change"].get("env", {})}


def judge(case: dict, got: dict) -> dict:
    """Expected against got: the verdict, the class, and the expected text inside the fix line."""
    expect = case["expect"]
    checks = {
        "verdict": got.get("verdict") == expect["verdict"],
        "class": got.get("class") == expect["class"],
        "fix": expect["fix"] in (got.get("fix") or ""),
    }
    return {"match": all(checks.values()), "wrong": [k for k, ok in checks.items() if not ok]}


def row(case: dict, got: dict) -> dict:
    """One line of the fault table: the case, what it must get, what it got."""
    return {
        "fault": case["fault"],
        "class_of_fault": case["class"],
        "op": case["op"],
        "decided": case["decided"],
        "expected": dict(case["expect"]),
        "got": {k: got.get(k, "") for k in ("verdict", "class", "reason", "fix")},
        **judge(case, got),
    }
