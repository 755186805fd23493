"""Where a kernel's fault is: file and line in the pull request, for the check run's annotations.

Only structured evidence is read, never text scraped for a position: cargo's JSON diagnostics
(the primary span, out of any macro expansion: ``bot/build/build.py``), the kernel reader's refusals
and parse errors (each with its line: ``bot/read/reader.py``), and the place the cutile JIT names
under an error it printed (``  --> file:line:col``, read by ``bot/testresults/log.py`` with rustc's
pointer rule, ``compiler_output.location``). Only the kernel's own files are annotated: its
``kernel.rs`` (the porter's), and the ``ffi.rs`` agent-d generated for it, whose faults are
agent-d's own bug; such an annotation says so and is a warning, not a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bot.build.compiler_output import CompileError
from bot.build.types import Annotation
from bot.targets.types import Target
from bot.testing.types import Located

MAX_PER_KERNEL = 100  # the artifact's bound (bot/github/artifact.py); the check run takes 50 a request
MAX_TITLE = 255  # the Checks API's limit
MAX_MESSAGE = 2000  # ours; the Checks API takes up to 64 KB
OWN_BUG = (
    "agent-d generated this file, so this error is agent-d's own bug, not the kernel's: "
    "report it to agent-d's maintainers"
)


def kernel_errors(target: Target, errors: Iterable[CompileError]) -> tuple[Annotation, ...]:
    """Each cargo error in ``target``'s kernel.rs: the porter's to fix."""
    kernel = target.kernel_rs.resolve()
    return bounded(
        _place(target, target.kernel_rs, "failure", f"{_head(e)} in kernel.rs", _said(e), _span(e))
        for e in errors
        if e.source == kernel and e.line >= 1
    )


def generated_errors(target: Target, errors: Iterable[CompileError]) -> tuple[Annotation, ...]:
    """Each cargo error in the ffi.rs agent-d generated for ``target``: agent-d's own bug, said so."""
    ffi = target.ffi_rs.resolve()
    return bounded(
        _place(
            target,
            target.ffi_rs,
            "warning",
            f"agent-d's own bug: {_head(e)} in the generated ffi.rs",
            f"{_said(e)}\n\n{OWN_BUG}",
            _span(e),
        )  # fmt: skip
        for e in errors
        if e.source == ffi and e.line >= 1
    )


def _head(error: CompileError) -> str:
    return f"cargo error[{error.code}]" if error.code else "cargo error"


def _said(error: CompileError) -> str:
    return f"{error.message}: {error.label}" if error.label else error.message


def _span(error: CompileError) -> tuple[int, int, int, int]:
    # rustc's end column is one past the span; the Checks API's is its last column
    return error.line, error.end_line, error.column, error.end_column - 1


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
