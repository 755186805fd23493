"""Lists of tensors in a cuTile reference, and the one element kernel.rs takes of each.

A cuTile kernel may take Python lists of tensors (group_gemm's ``As, Bs, Cs``) and walk them in its
body (``for g in range(len(As)): Ai = As[g]``). A cutile-rs entry cannot take a list (a kernel takes
``&Tensor``, ``*mut E`` or scalars), so the natural port takes one element (``a``) and the host
launches it once per element. This module reads the reference's side of that: which kernel
parameters are lists (and the local their element is bound to), which kernel.rs tensor takes the
element, and how the registered function builds a list of outputs (``group_C = []`` then
``for ...: group_C.append(torch.empty(...))``), as one list comprehension.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from bot.infer.syntax import bind, is_allocation, substitute


@dataclass(frozen=True)
class ListArg:
    """A reference kernel parameter that is a list of tensors, and kernel.rs's tensor for one element."""

    tensor: str  # the kernel.rs tensor parameter that takes one element ("a")
    ref_param: str  # the reference kernel's list parameter ("As")
    item: str  # the local the reference body binds an element to ("Ai"): the wrapper's loop variable
    list_expr: str  # the Python list the launch passes, in the caller's names ("group_A")


def list_elements(kernel: ast.FunctionDef) -> dict[str, str]:
    """Reference kernel parameter -> the local its body binds one element to: ``Ai = As[g]`` with
    ``g`` the variable of an enclosing ``for`` loop. Only parameters indexed so are lists."""
    params = {a.arg for a in kernel.args.args}
    out: dict[str, str] = {}
    for loop in ast.walk(kernel):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
            continue
        index = loop.target.id
        for stmt in ast.walk(loop):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, value = stmt.targets[0], stmt.value
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Subscript)
                and isinstance(value.value, ast.Name)
                and value.value.id in params
                and isinstance(value.slice, ast.Name)
                and value.slice.id == index
            ):
                out.setdefault(value.value.id, target.id)
    return out


def element_twin(ref_param: str, item: str, tensors: list[str]) -> str | None:
    """The kernel.rs tensor that takes one element of ``ref_param``: the one named as the element's
    local (``Ai`` ~ ``ai``) or as the list without its plural ``s`` (``As`` ~ ``a``), case aside;
    None unless exactly one tensor is named so."""
    names = {item.lower()}
    if len(ref_param) > 1 and ref_param.lower().endswith("s"):
        names.add(ref_param.lower()[:-1])
    found = [t for t in tensors if t.lower() in names]
    return found[0] if len(found) == 1 else None


def appended_list(loop: ast.For, empty_lists: set[str]) -> tuple[str, ast.expr] | None:
    """``for A, B in zip(xs, ys): M, K = A.shape; C = torch.empty(...); out.append(C)`` over a list
    ``out`` bound to ``[]`` before it: (``out``, the same list as one comprehension). Only plain
    assignments and one ``append`` of an allocation; anything else is None (not this shape)."""
    if loop.orelse or not loop.body:
        return None
    *lets, last = loop.body
    local: dict[str, ast.expr] = {}
    for stmt in lets:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return None
        if not all(isinstance(n, ast.Name) for n in _names(stmt.targets[0])):
            return None
        bind(stmt.targets[0], substitute(stmt.value, local, {}), local)
    call = last.value if isinstance(last, ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "append"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in empty_lists
        and len(call.args) == 1
    ):
        return None
    item = substitute(call.args[0], local, {})
    if not is_allocation(item):
        return None
    comp = ast.ListComp(
        elt=item,
        generators=[
            ast.comprehension(
                target=copy.deepcopy(loop.target), iter=copy.deepcopy(loop.iter), ifs=[], is_async=0
            )
        ],
    )
    return call.func.value.id, ast.fix_missing_locations(comp)


def _names(target: ast.expr) -> list[ast.expr]:
    return list(target.elts) if isinstance(target, ast.Tuple) else [target]
