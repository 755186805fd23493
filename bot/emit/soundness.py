"""Stage "check": nothing agent-d generates leaves it unchecked.

Before anything is rendered, the plan must be closed: every name a wrapper value reads is bound
(``bot/plan/closure.py``). Before anything is applied, each generated Python file must pass
ruff's pyflakes rules (F: undefined names, unused locals and imports, redefinitions), run with
agent-d's own settings rather than the checkout's; an existing file agent-d only wires is held to
the findings its edit adds. The launcher and the crate wiring are checked by the build (a cargo
error in a generated file, ``bot/build/build.py``).

Each finding is ``OwnBug``: BLOCKED (host) naming agent-d's bug, the file and the line, and the
kernel's generated files are withheld. Then ``check_contents`` holds each file agent-d writes whole
to what its kind may contain (``bot/emit/contents.py``).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bot.emit import contents
from bot.emit.types import GeneratedFiles
from bot.errors import Blocked, OwnBug
from bot.plan import closure
from bot.plan.types import LaunchPlan
from bot.ruff import ruff_command

RUFF_RULES = "F"
MAX_SHOWN = 3


@dataclass(frozen=True)
class Finding:
    path: str  # relative to the checkout
    line: int
    code: str  # ruff's rule code ("F821")
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message}"


def check_plan(plan: LaunchPlan, contract_name: str = "host_contract.yaml") -> None:
    """Raise ``OwnBug`` when a wrapper value reads a name nothing binds before it. (A carried
    wrapper's names are the reference's own code: the generated file's check finds an unbound one.)"""
    if plan.carry is not None:
        return
    open_names = closure.unbound(plan)
    if not open_names:
        return
    first = open_names[0]
    shown = "; ".join(
        f"{u.key} = `{u.value}` reads `{u.name}`" + (f" ({u.source})" if u.source else "")
        for u in open_names[:MAX_SHOWN]
    )
    more = f" (+{len(open_names) - MAX_SHOWN} more)" if len(open_names) > MAX_SHOWN else ""
    raise OwnBug(
        f"the planned wrapper reads names it never binds: {shown}{more}; nothing was generated",
        host_fix=f"until agent-d is fixed, give {first.key} in {contract_name} a value over the op's "
        f"parameters; report the bug to agent-d's maintainers",
    )


def check_files(files: GeneratedFiles, repo: Path) -> None:
    """Raise ``OwnBug`` when a generated or wired Python file gets a pyflakes finding from agent-d."""
    found: list[Finding] = []
    for f in files.files:
        if not f.path.endswith(".py"):
            continue
        after = lint_python(f.content, f.path)
        if f.kind == "edit":
            path = repo / f.path
            before = lint_python(path.read_text(encoding="utf-8"), f.path) if path.is_file() else []
            after = _added(before, after)
        found += after
    if found:
        shown = "; ".join(str(x) for x in found[:MAX_SHOWN])
        more = f" (+{len(found) - MAX_SHOWN} more)" if len(found) > MAX_SHOWN else ""
        raise OwnBug(
            f"ruff check --select {RUFF_RULES} faults generated code: {shown}{more}; nothing was applied"
        )


def check_contents(files: GeneratedFiles, plan: LaunchPlan) -> None:
    """Raise ``Blocked`` (host) when a file agent-d writes whole holds what its kind may not
    (``bot/emit/contents.py``); wiring edits of existing files are the checkout's own text."""
    whole = [(f.path, f.content) for f in files.files if f.kind == "new"]
    contents.check(whole, {plan.ffi.module} if plan.ffi.module else set())


def lint_python(text: str, rel_path: str) -> list[Finding]:
    """ruff's pyflakes findings for ``text`` as if it were ``rel_path`` (agent-d's settings, not the checkout's)."""
    proc = subprocess.run(
        [
            *ruff_command(),
            "check",
            "--isolated",
            "--select",
            RUFF_RULES,
            "--output-format",
            "json",
            "--stdin-filename",
            rel_path,
            "-",
        ],
        input=text,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):
        raise Blocked(
            "env" if "No module named" in proc.stderr else "host",
            f"ruff check could not run on {rel_path}: {(proc.stderr.strip().splitlines() or ['(no message)'])[0]}",
        )
    try:
        items = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        raise Blocked("host", f"ruff check gave unreadable output on {rel_path}") from None
    out = []
    for item in items:
        code = item.get("code") or ""
        if code == "F401" and Path(rel_path).name == "__init__.py":
            continue  # a package's imports are its exports
        out.append(
            Finding(rel_path, int(item.get("location", {}).get("row", 0)), code, item.get("message", ""))
        )
    return out


def _added(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """The findings of ``after`` that ``before`` had none of, compared without line numbers. A
    finding the file already had (TileGym's test_mla_decoding faults its own ``q``: a lambda over a
    name the test later ``del``s) is the file's, also where agent-d's twin of a branch copies it."""
    known = {(f.code, f.message) for f in before}
    return [f for f in after if (f.code, f.message) not in known]
