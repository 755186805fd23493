"""A reference that chooses among launch paths, and the one path kernel.rs ports.

``if use_tma: _launch_tma(x, y) elif ...: else: _launch(x, y)`` (softmax), or one inline launch per
mode and an else that raises (rms_norm): the wrapper follows the branch whose kernels are all
kernel.rs entries and refuses each other branch, in the chain's order, with NotImplementedError
naming the path and its condition (or the reference's own error for a branch that raises). The
refusal's words are read back by the dry run and the classifier (``UNPORTED_PATH``): a test that
takes such a path is the kernel's gap, not the host's.
"""

from __future__ import annotations

import ast

from bot.infer.direct.module import ReferenceModule, is_launch
from bot.infer.direct.statements import if_chain, raised
from bot.infer.naming import entry_key


def not_ported(op: str, through: str, test: ast.expr) -> str:
    """The refusal's message for the path ``through`` taken when ``test`` holds."""
    return (
        f"cutile-rs {op}: the reference's launch through {through} (when {ast.unparse(test)}) is not ported"
    )


def launch_path(
    stmt: ast.If, entries: set[str], module: ReferenceModule, op: str
) -> tuple[list[ast.stmt], list[tuple[ast.expr, str, str]]] | None:
    """(the block of the one branch whose kernels are all ``entries``, each other branch's refusal
    as (test, error, message) in the chain's order); None when a branch neither launches nor
    raises, the chain has no else, or not exactly one branch launches only kernel.rs's kernels."""
    if not entries:
        return None
    branches = if_chain(stmt)
    if len(branches) < 2 or branches[-1][0] is not None:
        return None  # without an else some calls launch nothing here: not a choice of paths
    # per branch: (how it launches, the keys of its kernels); None for a branch that raises
    paths: list[tuple[str, set[str]] | None] = []
    for _, block in branches:
        if raised(block) is not None:
            paths.append(None)
            continue
        launches = block_launches(module, block)
        if launches is None:
            return None
        paths.append(launches)
    ported = [i for i, path in enumerate(paths) if path is not None and path[1] <= entries]
    if len(ported) != 1:
        return None
    chosen = ported[0]
    taken = branches[chosen][0]
    refusals: list[tuple[ast.expr, str, str]] = []
    for i, ((node, block), path) in enumerate(zip(branches, paths, strict=True)):
        if i == chosen:
            continue
        if i < chosen:  # reached only when every earlier test failed
            assert node is not None  # only the last branch is the else
            test: ast.expr = node.test
        else:  # after the chosen branch: only when its test failed
            assert taken is not None
            not_taken = ast.UnaryOp(op=ast.Not(), operand=taken.test)
            test = not_taken if node is None else ast.BoolOp(op=ast.And(), values=[not_taken, node.test])
        if path is None:
            error, message = raised(block)
            refusals.append((test, error, message))
        else:
            refusals.append((test, "NotImplementedError", not_ported(op, path[0], test)))
    return branches[chosen][1], refusals


def block_launches(module: ReferenceModule, block: list[ast.stmt]) -> tuple[str, set[str]] | None:
    """How ``block`` launches (``_launch_tma()``, or the kernel it launches itself) and the keys of
    the kernels it launches; None when it launches nothing."""
    through: list[str] = []
    kernels: set[str] = set()
    for node in (n for s in block for n in ast.walk(s)):
        if is_launch(node):
            kernel = ast.unparse(node.args[2])
            through.append(kernel)
            kernels.add(entry_key(kernel))
        elif isinstance(node, ast.Call) and (target := module.resolve(node)) is not None:
            launched = target[2].launched_kernels(target[0])
            if launched:
                through.append(f"{ast.unparse(node.func)}()")
                kernels |= {entry_key(k) for k in launched}
    return (" and ".join(through), kernels) if through else None
