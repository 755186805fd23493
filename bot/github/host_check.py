"""A pull request that changes a port's own host code (its ffi.rs or cffi wrapper) and adds no
kernel.rs: ``agent-d check`` of each such port at the head, as a check run with an annotation on
each finding's line and one review. Nothing is pushed, and no code of the pull request runs: the
files are read through the API (each bounded) and parsed, never written into a checkout.
"""

from __future__ import annotations

import re
from pathlib import Path

from github import GithubException

from bot.build.types import Annotation
from bot.check.rules import registered_names
from bot.check.run import MAX_BYTES, CheckResult, HostFiles, check_files
from bot.github import publish, render
from bot.github.kernels import ADDED_STATUSES
from bot.targets.types import Target

OPS = "src/tilegym/ops/cutile_rs"
HOST_FILE = re.compile(
    rf"{OPS}/(?:(?P<kernel>[a-z][a-z0-9_]*)_kernel/ffi\.rs|(?P<wrapper>[a-z][a-z0-9_]*)\.py)"
)
CHANGED = ADDED_STATUSES | {"modified"}
MAX_OPS = 10  # ports checked for one pull request; the rest are named, not checked


class HostFileUnreadable(Exception):
    """A host file the API would not give (missing, too large, not text)."""


def port_of(path: str) -> str:
    """The op whose ffi.rs or wrapper ``path`` is; '' for any other path (`__init__.py` never
    matches: an op's name starts with a letter)."""
    m = HOST_FILE.fullmatch(path)
    return (m["kernel"] or m["wrapper"]) if m else ""


def changed_ports(files) -> list[str]:
    """The ops whose ffi.rs or wrapper the pull request adds or changes, sorted."""
    return sorted({port_of(f.filename) for f in files if f.status in CHANGED} - {""})


def _text(repo, path: str, ref: str) -> str:
    try:
        found = repo.get_contents(path, ref=ref)
    except GithubException as exc:
        raise HostFileUnreadable(f"`{path}` at {ref[:12]}: GitHub answered {exc.status}") from None
    if isinstance(found, list) or found.type != "file":
        raise HostFileUnreadable(f"`{path}` is not a file")
    if found.size > MAX_BYTES:
        raise HostFileUnreadable(f"`{path}` is {found.size} bytes, more than {MAX_BYTES} a host file may be")
    return found.decoded_content.decode("utf-8", errors="replace")


def host_files(repo, op: str, head: str, base: str) -> HostFiles | None:
    """The port of ``op`` at ``head``; None when ``op`` is not a port there (no kernel.rs).
    The name it must be registered under is the one the base's wrapper registers (the op's own
    where the base has none)."""
    target = Target(Path("."), op)
    try:
        _text(repo, f"{OPS}/{op}_kernel/kernel.rs", head)
    except HostFileUnreadable:
        return None
    try:
        base_names = registered_names(_text(repo, f"{OPS}/{op}.py", base))
    except (HostFileUnreadable, SyntaxError):
        base_names = []
    try:
        util = _text(repo, f"{OPS}/ffi_util.rs", head)
    except HostFileUnreadable:
        util = ""
    return HostFiles(
        op, target.symbol, Path(f"{OPS}/{op}_kernel/ffi.rs"), _text(repo, f"{OPS}/{op}_kernel/ffi.rs", head),
        Path(f"{OPS}/{op}.py"), _text(repo, f"{OPS}/{op}.py", head), util, (base_names or [op])[0],
    )  # fmt: skip


def run(repo, ops: list[str], head: str, base: str, reader: str) -> tuple[list[CheckResult], list[str]]:
    """Each port checked; the second list: why a port was not (its files unreadable, or past MAX_OPS)."""
    results, skipped = [], []
    for op in ops[:MAX_OPS]:
        try:
            files = host_files(repo, op, head, base)
        except HostFileUnreadable as exc:
            skipped.append(f"`{op}`: {render.escape_md(str(exc))}")
            continue
        if files is not None:
            results.append(check_files(files, reader))
    skipped += [
        f"`{op}`: not checked (more than {MAX_OPS} ports in one pull request)" for op in ops[MAX_OPS:]
    ]
    return results, skipped


def annotations(results: list[CheckResult]) -> list[Annotation]:
    return [
        Annotation(
            str(f.path), max(f.line, 1), max(f.line, 1), "failure", f"agent-d check: {r.op}", f.message
        )
        for r in results
        for f in r.findings
    ]


def review_body(results: list[CheckResult], skipped: list[str]) -> str:
    holds = all(r.holds for r in results)
    lines = [
        f"## agent-d check: {'the host code holds' if holds else 'findings in the host code'}",
        "",
        "This pull request changes a port's own host code and adds no kernel.rs, so agent-d checked it "
        "as it is (nothing generated, nothing pushed): `_FFI_CDEF` against ffi.rs's export, and the "
        "host rules on both files.",
        "",
        "| Port | Result |",
        "|---|---|",
    ]
    for r in results:
        lines.append(f"| `{r.op}` | {'holds' if r.holds else f'{len(r.findings)} finding(s)'} |")
    for r in results:
        for f in r.findings:
            lines.append(f"- `{f.path}:{f.line}`: {render.escape_md(f.message)}")
    lines += ["", *(f"- {s}" for s in skipped)] if skipped else []
    return "\n".join(lines)


def publish_check(repo, pr, head: str, ports: list[str], check: tuple[str, str, str], bots: tuple[str, ...]):
    """Check ``ports`` at ``head`` and publish: the check run ``check`` (name, external id, details
    URL) concluded with an annotation on each finding's line, and one review.

    Returns (conclusion, title, check run id); None when the run existed already (a redelivery);
    a string when nothing was checked: why ("" when no changed file belongs to a port)."""
    from bot.read.reader import ReaderUnavailable, reader_binary

    try:
        reader = str(reader_binary())
    except ReaderUnavailable as exc:
        return f"agent-d could not check the host code here: {render.escape_md(str(exc))}"
    results, skipped = run(repo, ports, head, pr.base.sha, reader)
    if not results and not skipped:
        return ""
    holds = all(r.holds for r in results)
    conclusion, title = ("success", "host code holds") if holds else ("failure", "host code findings")
    body = review_body(results, skipped)
    name, external, details = check
    check_run, created = publish.ensure_check_run(repo, head, name, external, title, body, details)
    if not created:
        return None
    publish.conclude(check_run, conclusion, title, body, annotations=annotations(results))
    publish.post_review(repo, pr, head, body, bots)
    return conclusion, title, check_run.id
