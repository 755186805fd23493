"""Facts from the op's public declaration: the ``@dispatch`` function discovery found (``ops.py``
or any other module under ``src/tilegym``), read with ``ast``.

Gives the dispatch name the wrapper registers under, whether it is a getter (``get_<op>``
returning a callable), the signature as declared, and which parameters are tensors. When the
tests call the op with keyword names the declaration does not have (``gelu(x)`` declared, tests
pass ``input=``), the declaration is not offered: the cuTile reference's signature is what the
tests were written against.
"""

from __future__ import annotations

import ast

from bot.infer.facts import Facts
from bot.targets.discover import public_function
from bot.targets.types import Discovery, Source, Target

# popped by TileGym's dispatcher before the implementation is called
_DISPATCH_KEYWORDS = {"backend"}


def gather(target: Target, found: Discovery, facts: Facts) -> None:
    if found.public is None:
        for line in found.tried:
            facts.note_tried("python.register.name", line)
        return
    fn = public_function(target.repo, found.public)
    if fn is None:
        facts.note_tried("python.register.name", f"{found.public.path}: does not parse")
        return
    kind = "getter" if found.public.detail.endswith("getter") else "direct"
    name = found.public.detail.split("'")[1]
    where = Source("ops_py", f"{found.public.path}:{fn.lineno} @dispatch({name!r})")
    facts.offer("python.register.name", name, where)
    facts.offer("python.register.kind", kind, where)
    unknown = _unknown_keywords(fn.args, found.call_keywords)
    if kind == "direct" and unknown:
        facts.note_tried(
            "python.signature",
            f"{found.public.path}:{fn.lineno}: tests pass {', '.join(unknown)}=, which {name}() does not declare",
        )
        return
    if _names_nothing(fn.args):
        # `def f(*args, **kwargs)`: the declaration forwards whatever it gets, it names no parameter;
        # the cuTile reference's signature is what the callers were written against
        facts.note_tried("python.signature", f"{found.public.path}:{fn.lineno}: {name}() names no parameter")
        return
    facts.offer("python.signature", render_signature(fn.args), where)
    if kind == "direct":
        facts.offer("python.tensor_params", tensor_params(fn.args), where)
        out = [a.arg for a in fn.args.args if a.arg == "out"]
        if out:
            facts.offer("python.out_param", out[0], where)


def _names_nothing(args: ast.arguments) -> bool:
    """``(*args, **kwargs)``: forwards whatever it gets. A getter's ``()`` names nothing because
    it takes nothing, and that is its signature."""
    named = args.posonlyargs or args.args or args.kwonlyargs
    return not named and bool(args.vararg or args.kwarg)


def _unknown_keywords(args: ast.arguments, keywords: tuple[str, ...]) -> list[str]:
    declared = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    return [k for k in keywords if k not in declared and k not in _DISPATCH_KEYWORDS]


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
    """Required parameters annotated ``torch.Tensor`` (the op's tensor inputs), in order. One
    annotated ``Optional[torch.Tensor]`` (or ``torch.Tensor | None``) is left out: the caller may
    pass None (moe's ``A_scale``), so the wrapper's prologue cannot ask it for ``.is_cuda``."""
    positional = args.posonlyargs + args.args
    required = positional[: len(positional) - len(args.defaults)]
    return [a.arg for a in required if a.annotation is not None and _a_tensor(a.annotation)]


def _a_tensor(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation)
    optional = text.startswith(("Optional[", "typing.Optional[")) or "None" in {
        part.strip() for part in text.split("|")
    }
    return "Tensor" in text and not optional
