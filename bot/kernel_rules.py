"""What a ``kernel.rs`` may not contain, checked before agent-d reads or compiles it.

The kernel is PR code compiled on a runner: ``include_str!("/runner/file")`` inside
``compile_error!`` copies a runner file into the build log (and from there into reports and
reviews), ``env!`` reads the runner's environment at compile time, ``#[path]`` and
``extern crate`` reach outside the kernel's folder. A kernel needs none of them: only
cutile's macros and a few harmless ones from core are allowed, and any other macro (a
``macro_rules!`` of its own could call ``include_str!`` through a metavariable) is refused.
The scan is lexical, on the text with comments and literals removed.
"""

from __future__ import annotations

import re

ALLOWED_MACROS = frozenset(
    {
        # cutile::core
        "const_shape",
        "const_array",
        # core, evaluated without touching the machine
        "assert",
        "assert_eq",
        "assert_ne",
        "debug_assert",
        "debug_assert_eq",
        "debug_assert_ne",
        "panic",
        "unreachable",
        "unimplemented",
        "todo",
        "matches",
    }
)
NAMED = {
    "include": "reads a file of the machine at compile time",
    "include_str": "reads a file of the machine at compile time",
    "include_bytes": "reads a file of the machine at compile time",
    "env": "reads the machine's environment at compile time",
    "option_env": "reads the machine's environment at compile time",
}
_KEYWORDS = frozenset({"return", "if", "while", "match", "in", "let", "else", "break", "yield", "as", "mut"})
_MACRO_RE = re.compile(r"(?<![\w$])(?:r#)?([A-Za-z_]\w*)\s*!\s*[(\[{]")
_META_MACRO_RE = re.compile(r"\$\w+\s*!")
_MACRO_RULES_RE = re.compile(r"\bmacro_rules\s*!")
_PATH_ATTR_RE = re.compile(r"#\s*!?\s*\[\s*path\b")
_EXTERN_CRATE_RE = re.compile(r"\bextern\s+crate\b")
_LEXEMES = re.compile(
    r"""//[^\n]*                        # line comment
      | /\*                             # block comment (nesting handled below)
      | b?r(\#*)".*?"\1                 # raw string
      | b?"(?:\\.|[^"\\])*"             # string
      | b?'(?:\\.|[^'\\\n])'            # char literal (not a lifetime)
    """,
    re.VERBOSE | re.DOTALL,
)


def _code_only(text: str) -> str:
    """``text`` with comments and string/char literals blanked (newlines kept for line numbers)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        m = _LEXEMES.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        out.append(text[i : m.start()])
        end = m.end()
        if m.group(0) == "/*":
            depth, end = 1, m.end()
            while depth and end < len(text):
                if text.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif text.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                else:
                    end += 1
        out.append(re.sub(r"[^\n]", " ", text[m.start() : end]))
        i = end
    return "".join(out)


def refusals(text: str) -> list[str]:
    """Why ``kernel.rs`` (its text) is refused, one line per finding with its line number; [] if fine."""
    code = _code_only(text)
    found: list[str] = []

    def line_of(pos: int) -> int:
        return code.count("\n", 0, pos) + 1

    for m in _MACRO_RE.finditer(code):
        name = m.group(1)
        if name in _KEYWORDS or name in ALLOWED_MACROS:
            continue
        why = NAMED.get(name, "is not a cutile macro")
        found.append(f"line {line_of(m.start())}: `{name}!` {why}")
    for m in _MACRO_RULES_RE.finditer(code):
        found.append(f"line {line_of(m.start())}: `macro_rules!` defines a macro of its own")
    for m in _META_MACRO_RE.finditer(code):
        found.append(f"line {line_of(m.start())}: a macro called through a metavariable")
    for m in _PATH_ATTR_RE.finditer(code):
        found.append(f"line {line_of(m.start())}: `#[path]` loads a file from outside the kernel's folder")
    for m in _EXTERN_CRATE_RE.finditer(code):
        found.append(f"line {line_of(m.start())}: `extern crate` links a crate of the machine")
    return found
