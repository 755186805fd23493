"""Facts from the public op declarations in ``src/tilegym/ops/ops.py`` (read with ``ast``).

Gives the dispatch name the wrapper registers under, whether it is a getter (``get_<op>``
returning a callable), the signature as declared, and which parameters are tensors.
"""

from __future__ import annotations

import ast
from pathlib import Path

from bot.infer.facts import Facts
from bot.types import Source, Target

OPS_PY = Path("src/tilegym/ops/ops.py")


def gather(target: Target, facts: Facts) -> None:
    path = target.repo / OPS_PY
    if not path.is_file():
        facts.note_tried("python.register.name", f"{OPS_PY} (missing)")
        return
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    declared = _dispatch_functions(tree)
    for name, kind in ((target.op, "direct"), (f"get_{target.op}", "getter")):
        fn = declared.get(name)
        if fn is None:
            continue
        where = Source("ops_py", f"{OPS_PY}:{fn.lineno} @dispatch({name!r})")
        facts.offer("python.register.name", name, where)
        facts.offer("python.register.kind", kind, where)
        facts.offer("python.signature", render_signature(fn.args), where)
        if kind == "direct":
            facts.offer("python.tensor_params", tensor_params(fn.args), where)
            out = [a.arg for a in fn.args.args if a.arg == "out"]
            if out:
                facts.offer("python.out_param", out[0], where)
        return
    facts.note_tried("python.register.name", f"{OPS_PY}: no @dispatch({target.op!r}) or get_{target.op}")


def _dispatch_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    found: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if (
                isinstance(deco, ast.Call)
                and _name(deco.func) == "dispatch"
                and deco.args
                and isinstance(deco.args[0], ast.Constant)
                and isinstance(deco.args[0].value, str)
            ):
                found[deco.args[0].value] = node
    return found


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def render_signature(args: ast.arguments) -> str:
    """The parameter list without annotations: ``input, out=None, **kwargs``."""
    parts: list[str] = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults):
        parts.append(arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}")
    if args.vararg:
        parts.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        parts.append(arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}")
    if args.kwarg:
        parts.append(f"**{args.kwarg.arg}")
    return ", ".join(parts)


def tensor_params(args: ast.arguments) -> list[str]:
    """Required parameters annotated ``torch.Tensor`` (the op's tensor inputs), in order."""
    positional = args.posonlyargs + args.args
    required = positional[: len(positional) - len(args.defaults)]
    return [a.arg for a in required if a.annotation is not None and "Tensor" in ast.unparse(a.annotation)]
