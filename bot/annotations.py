"""Where a kernel's fault is: file and line in the pull request, for the check run's annotations.

Only structured evidence is read, never text scraped for a position: cargo's JSON diagnostics
(the primary span, out of any macro expansion: ``bot/build.py``), the kernel reader's refusals
and parse errors (each with its line: ``bot/reader.py``), and the place the cutile JIT names
under an error it printed (``  --> file:line:col``, read by ``bot/testresults/log.py`` with rustc's
pointer rule, ``compiler_output.location``). Only the kernel's own files are annotated: its
``kernel.rs`` (the porter's), and the ``ffi.rs`` agent-d generated for it, whose faults are
agent-d's own bug; such an annotation says so and is a warning, not a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bot.compiler_output import CompileError
from bot.types import Annotation, Located, Target

MAX_PER_KERNEL = 100  # the artifact's bound (bot/github/artifact.py); the check run takes 50 a request
MAX_TITLE = 255  # the Checks API's limit
MAX_MESSAGE = 2000  # ours; the Checks API takes up to 64 KB
OWN_BUG = (
    "agent-d generated this file, so this error is agent-d's own bug, not the kernel's: "
    "report it to agent-d's maintainers"
)


def from_compile_errors(target: Target, errors: Iterable[CompileError]) -> tuple[Annotation, ...]:
    """Each cargo error in ``target``'s kernel.rs (failure) or in its generated ffi.rs (warning)."""
    kernel, ffi = target.kernel_rs.resolve(), target.ffi_rs.resolve()
    found: list[Annotation] = []
    for error in errors:
        if error.source not in (kernel, ffi) or error.line < 1:
            continue
        said = f"{error.message}: {error.label}" if error.label else error.message
        head = f"cargo error[{error.code}]" if error.code else "cargo error"
        # rustc's end column is one past the span; the Checks API's is its last column
        span = (error.line, error.end_line, error.column, error.end_column - 1)
        if error.source == kernel:
            found.append(_place(target, target.kernel_rs, "failure", f"{head} in kernel.rs", said, span))
        else:
            title = f"agent-d's own bug: {head} in the generated ffi.rs"
            found.append(_place(target, target.ffi_rs, "warning", title, f"{said}\n\n{OWN_BUG}", span))
    return bounded(found)


def from_refusals(target: Target, refusals: Iterable[tuple[int, int, str]]) -> tuple[Annotation, ...]:
    """Each construct the reader's allow-list refused in ``target``'s kernel.rs, (line, column, what)."""
    title = "not allowed in a kernel (agent-d's kernel allow-list)"
    return bounded(
        _place(target, target.kernel_rs, "failure", title, what, (line, line, column, column))
        for line, column, what in refusals
        if line >= 1
    )


def from_parse_error(target: Target, line: int, column: int, message: str) -> tuple[Annotation, ...]:
    """The place the reader could not parse ``target``'s kernel.rs at (none without a line)."""
    if line < 1:
        return ()
    span = (line, line, column, column)
    return (_place(target, target.kernel_rs, "failure", "kernel.rs does not parse", message, span),)


def from_jit(target: Target, located: Iterable[Located]) -> tuple[Annotation, ...]:
    """Each JIT error that names a place in ``target``'s kernel.rs. The JIT prints the path as rustc
    was given it (relative to the crate it was compiled in, or absolute) and counts columns from 0
    (cutile-compiler 0.2.0's ``SourceLocation``); the Checks API counts them from 1."""
    kernel = target.kernel_rs.resolve()
    title = "the cutile JIT refused kernel.rs here"
    return bounded(
        _place(target, target.kernel_rs, "failure", title, at.message, (at.line, at.line, at.column + 1, 0))
        for at in located
        if at.line >= 1 and _resolved(target.crate_dir, at.path) == kernel
    )


def bounded(annotations: Iterable[Annotation]) -> tuple[Annotation, ...]:
    """Each annotation once, in order, at most ``MAX_PER_KERNEL``."""
    return tuple(dict.fromkeys(annotations))[:MAX_PER_KERNEL]


def _place(
    target: Target, path: Path, level: str, title: str, message: str, span: tuple[int, int, int, int]
) -> Annotation:
    """An annotation on ``path`` of ``target``'s checkout; ``span``: (start line, end line, start
    column, end column), columns from 1 (0: none)."""
    start, end, column, end_column = span
    end = max(end, start)
    # the Checks API takes columns on a single line only
    columns = (column, max(end_column, column)) if start == end and column >= 1 else (0, 0)
    return Annotation(
        path.relative_to(target.repo).as_posix(),
        start,
        end,
        level,
        clip(title, MAX_TITLE),
        clip(message.strip() or title, MAX_MESSAGE),
        *columns,
    )


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _resolved(base: Path, path: str) -> Path | None:
    try:
        return (base / path).resolve()
    except (OSError, ValueError):
        return None
