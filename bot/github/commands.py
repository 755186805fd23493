"""``/agent-d <command>`` lines in PR comments.

Only whole lines count, and only outside fenced or indented code, inline code, block
quotes and HTML comments, so quoting someone else's command never triggers a run.
"""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass

from bot.errors import UsageError
from bot.targets.targets import check_name

_LINE_RE = re.compile(r"^[ \t]{0,3}/agent-d(?:[ \t]+(?P<rest>.*))?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")

HELP_TEXT = """\
agent-d commands (one per line, at the start of the line):

- `/agent-d rerun [kernel ...] [--sha <head sha>]`: run the host stage again for every added kernel,
  or only the named ones. On a pull request whose head was pushed by someone who is not a
  maintainer, this approves one commit and needs its full 40-character sha: only that commit runs,
  and a new push needs a new approval.
- `/agent-d apply [--sha <head sha>]`: when `auto_commit: false` is set, run again and commit the
  generated files.
- `/agent-d help`: this text.

Who may run them: users with write, maintain or admin access to the repository, plus the users
and teams listed under `allowed_users` / `allowed_teams` in `.github/agent-d.yml` (default branch).
"""


class CommandError(ValueError):
    """The command line could not be parsed."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # never exit the process on bad input
        raise CommandError(message)

    def exit(self, status: int = 0, message: str | None = None) -> None:
        raise CommandError(message or "")


def _parser() -> _Parser:
    p = _Parser(prog="/agent-d", add_help=False)
    sub = p.add_subparsers(dest="name", required=True, parser_class=_Parser)
    rerun = sub.add_parser("rerun", add_help=False)
    rerun.add_argument("kernels", nargs="*")
    rerun.add_argument("--sha", default="")
    sub.add_parser("help", add_help=False)
    apply = sub.add_parser("apply", add_help=False)
    apply.add_argument("--sha", default="")
    return p


@dataclass(frozen=True)
class Command:
    name: str  # rerun | help | apply | invalid
    kernels: tuple[str, ...] = ()
    sha: str = ""
    error: str = ""
    line: str = ""


def strip_markdown_noise(body: str) -> str:
    """Drop code (fenced, indented, inline), quotes and HTML comments; keep the line structure."""
    body = re.sub(r"<!--.*?-->", "", body.replace("\r\n", "\n"), flags=re.DOTALL)
    out: list[str] = []
    fence: str | None = None
    for line in body.split("\n"):
        m = _FENCE_RE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        if line.lstrip().startswith(">") or line.startswith(("    ", "\t")):
            out.append("")
            continue
        out.append(re.sub(r"(`+).*?\1", "", line))
    return "\n".join(out)


def parse_commands(body: str) -> list[Command]:
    """Every ``/agent-d`` line of ``body`` in order; unparsable ones come back as ``invalid``."""
    found: list[Command] = []
    for match in _LINE_RE.finditer(strip_markdown_noise(body)):
        line = match.group(0).strip()
        rest = (match.group("rest") or "").strip()
        if not rest:
            found.append(Command("help", line=line))
            continue
        try:
            words = shlex.split(rest)
            words[0] = words[0].lower()
            ns = _parser().parse_args(words)
        except (CommandError, ValueError) as exc:
            found.append(Command("invalid", error=str(exc) or "unknown command", line=line))
            continue
        kernels = tuple(getattr(ns, "kernels", ()) or ())
        bad = kernel_name_errors(kernels)
        sha = getattr(ns, "sha", "") or ""
        if bad:
            found.append(Command("invalid", error=bad, line=line))
        elif sha and not re.fullmatch(r"[0-9a-f]{7,40}", sha):
            found.append(Command("invalid", error=f"not a commit sha: {sha}", line=line))
        else:
            found.append(Command(ns.name, kernels=kernels, sha=sha, line=line))
    return found


def kernel_name_errors(kernels: tuple[str, ...]) -> str:
    """``bot.targets.targets.check_name``'s message for each name it refuses, joined; "" if all pass."""
    errors: list[str] = []
    for k in kernels:
        try:
            check_name(k)
        except UsageError as exc:
            errors.append(str(exc))
    return "; ".join(errors)
