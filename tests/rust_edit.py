"""Token-level edits of a cutile-rs ``kernel.rs`` for the variant corpus (tests/variant_corpus.py).

A small Rust lexer (identifiers, literals, comments, punctuation) is enough to rename names
consistently, body included, and to rewrite an entry's parameter list: comments are dropped (they
would keep the old names), everything else keeps its text. The kernel reader (syn) checks the
result parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_]*(\.[0-9][0-9A-Za-z_]*)?")
_CHAR = re.compile(r"'(\\.[^']*|[^'\\])'")


@dataclass
class Tok:
    kind: str  # ident | number | string | char | lifetime | comment | space | punct
    text: str


def tokens(text: str) -> list[Tok]:
    out: list[Tok] = []
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
            out.append(Tok("comment", text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while depth and j < len(text):
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(Tok("comment", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(Tok("string", text[i : j + 1]))
            i = j + 1
        elif c == "'":
            m = _CHAR.match(text, i)
            if m:
                out.append(Tok("char", m.group()))
                i = m.end()
            else:
                m = _IDENT.match(text, i + 1)
                out.append(Tok("lifetime", "'" + m.group()))
                i = m.end()
        elif c.isspace():
            j = i
            while j < len(text) and text[j].isspace():
                j += 1
            out.append(Tok("space", text[i:j]))
            i = j
        elif m := _IDENT.match(text, i):
            out.append(Tok("ident", m.group()))
            i = m.end()
        elif m := _NUMBER.match(text, i):
            out.append(Tok("number", m.group()))
            i = m.end()
        else:
            out.append(Tok("punct", c))
            i += 1
    return out


def join(toks: list[Tok]) -> str:
    return "".join(t.text for t in toks)


def without_comments(toks: list[Tok]) -> list[Tok]:
    return [t for t in toks if t.kind != "comment"]


def _prev_code(toks: list[Tok], i: int) -> str:
    """The code text just before token ``i`` (two punctuation marks at most)."""
    seen = ""
    j = i - 1
    while j >= 0 and len(seen) < 2:
        if toks[j].kind not in ("space", "comment"):
            if toks[j].kind != "punct":
                break
            seen = toks[j].text + seen
        j -= 1
    return seen


def rename(toks: list[Tok], names: dict[str, str]) -> list[Tok]:
    """Every identifier in ``names`` renamed, except a field or method (``x.name``) or a path
    segment (``a::name``), which name something else."""
    out: list[Tok] = []
    for i, t in enumerate(toks):
        if t.kind == "ident" and t.text in names:
            before = _prev_code(toks, i)
            if not (before.endswith(".") or before.endswith("::")):
                t = Tok("ident", names[t.text])
        out.append(t)
    return out


def identifiers(text: str) -> set[str]:
    return {t.text for t in tokens(text) if t.kind == "ident"}


# --------------------------------------------------------------------------- an entry's signature


@dataclass
class Signature:
    """Where an entry's generics and parameters are in a token list."""

    params_open: int  # index of the "(" opening the parameter list
    params_close: int  # index of its ")"
    body_open: int  # index of the "{" opening the body


def find_entry(toks: list[Tok], name: str) -> Signature:
    for i, t in enumerate(toks):
        if t.kind == "ident" and t.text == name and _prev_ident(toks, i) == "fn":
            j = i + 1
            depth = 0
            while True:  # past the generics: <...>
                tj = toks[j]
                if tj.text == "<":
                    depth += 1
                elif tj.text == ">":
                    depth -= 1
                elif tj.text == "(" and depth == 0:
                    break
                j += 1
            close = _matching(toks, j)
            body = close
            while toks[body].text != "{":
                body += 1
            return Signature(j, close, body)
    raise ValueError(f"no fn {name}")


def _prev_ident(toks: list[Tok], i: int) -> str:
    j = i - 1
    while j >= 0 and toks[j].kind in ("space", "comment"):
        j -= 1
    return toks[j].text if j >= 0 else ""


def _matching(toks: list[Tok], i: int) -> int:
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    opener = toks[i].text
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == opener:
            depth += 1
        elif toks[j].text == pairs[opener]:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced")


def split_params(toks: list[Tok], sig: Signature) -> list[str]:
    """The parameter texts of an entry, in order, each stripped (comments already gone)."""
    params: list[list[Tok]] = [[]]
    depth = 0
    for t in toks[sig.params_open + 1 : sig.params_close]:
        if t.text in "([{<" and t.kind == "punct":
            depth += 1
        elif t.text in ")]}>" and t.kind == "punct":
            depth -= 1
        if t.text == "," and depth == 0:
            params.append([])
            continue
        params[-1].append(t)
    return [s for p in params if (s := join(p).strip())]


def with_params(toks: list[Tok], sig: Signature, params: list[str], body_prefix: str = "") -> list[Tok]:
    """The token list with the entry's parameters replaced by ``params`` (one per line) and
    ``body_prefix`` put first in its body."""
    new_params = "\n" + "".join(f"        {p},\n" for p in params) + "    "
    head = toks[: sig.params_open + 1] + tokens(new_params)
    middle = toks[sig.params_close : sig.body_open + 1]
    tail = toks[sig.body_open + 1 :]
    prefix = tokens(f"\n        {body_prefix}") if body_prefix else []
    return head + middle + prefix + tail
