"""Text agent-d posts: review body, status comment, check summaries, replies.

Bodies are deterministic (no timestamps or run ids), so a rerun that finds the same
result leaves the existing review and comment untouched.
"""

from __future__ import annotations

import re

from bot.build.types import Annotation
from bot.classify.types import verdict_headline
from bot.github.artifact import Artifact, KernelVerdict
from bot.github.commands import HELP_TEXT
from bot.github.path_classes import CLASSES, WHY_NOT_USED, ClassedPaths

SEVERITY = {"ALL_PASS": 0, "FAIL": 1, "BLOCKED": 2}
CONCLUSION = {"ALL_PASS": "success", "FAIL": "failure", "BLOCKED": "failure"}


def overall(verdicts: dict[str, KernelVerdict]) -> str:
    if not verdicts:
        return "BLOCKED"
    return max((v.kind for v in verdicts.values()), key=SEVERITY.__getitem__)


def headline(verdicts: dict[str, KernelVerdict]) -> str:
    """The overall verdict with the class(es) of the kernels that decided it, worded as everywhere
    else (``BLOCKED (block_class: env)``): the check title and the review heading."""
    kind = overall(verdicts)
    classes = sorted({v.klass for v in verdicts.values() if v.kind == kind and v.klass})
    return verdict_headline(kind, ", ".join(classes))


def check_title(verdicts: dict[str, KernelVerdict]) -> str:
    return f"VERDICT: {headline(verdicts)}"


def fence(text: str, lang: str = "text") -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#|~>])")  # '#' also: #123 would link an issue
# list markers and setext underlines count only where a line starts
_MD_LINE_START = re.compile(r"^(\d*)([+\-.!=])")


def escape_md(text: str) -> str:
    """PR-derived text as inert Markdown on one line: no markup, no HTML, no links, no @mentions."""
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_LINE_START.sub(r"\1\\\2", _MD_SPECIAL.sub(r"\\\1", text))
    return text.replace("@", "@\u200b").replace("://", ":\u200b//")


def code_span(text: str) -> str:
    """PR-derived text shown as written, on one line, as an inline code span: nothing in it is
    markup (HTML, links and @mentions are inert inside code)."""
    text = " ".join(text.split())
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}"


def verdict_table(verdicts: dict[str, KernelVerdict]) -> str:
    rows = ["| Kernel | Verdict | Reason |", "|---|---|---|"]
    for op, v in sorted(verdicts.items()):
        reason = escape_md(v.reason[:300])
        rows.append(f"| `{op}` | {verdict_headline(v.kind, escape_md(v.klass))} | {reason} |")
    return "\n".join(rows)


def annotations(verdicts: dict[str, KernelVerdict]) -> list[Annotation]:
    """Every kernel's annotations, kernel by kernel: where each fault is, for the check run."""
    return [place for _, v in sorted(verdicts.items()) for place in v.annotations]


def merged_verdicts(artifacts: list[Artifact]) -> dict[str, KernelVerdict]:
    out: dict[str, KernelVerdict] = {}
    for art in artifacts:
        out.update(art.verdicts)
    return out


def review_body(
    artifacts: list[Artifact], commit: str, tree: str, notes: list[str], perf: list[str] | None = None
) -> str:
    """``perf``: the perf stage's section (bot/github/render_perf.py), after the verdict table."""
    verdicts = merged_verdicts(artifacts)
    parts = [
        f"## agent-d: {check_title(verdicts)}",
        "",
        f"Tested tree `{tree}` (commit `{commit}`).",
        "",
        verdict_table(verdicts),
    ]
    parts += ["", *perf] if perf else []
    for op, v in sorted(verdicts.items()):
        block = v.validator_block.strip() or "(no validator block: the run stopped before validation)"
        parts += [
            "",
            f"<details><summary>Validator block: <code>{op}</code></summary>",
            "",
            fence(block),
            "",
            "</details>",
        ]
    parts += ["", *notes] if notes else []
    parts += ["", f"VERDICT: {overall(verdicts)}"]
    return "\n".join(parts)


MAX_LISTED = 20  # paths of one class named in the review; the rest are counted


def path_list(paths: list[str] | tuple[str, ...], limit: int = MAX_LISTED) -> str:
    """PR paths as inert code spans, the first ``limit`` of them, then how many more."""
    shown = ", ".join(code_span(p) for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def unused_edits(unused: ClassedPaths) -> list[str]:
    """The review's section naming the pull request's edits the build and the tests did not use."""
    if not unused:
        return []
    lines = ["**Edits of this pull request that agent-d did not use:**", ""]
    for klass in CLASSES:
        paths = unused.group(klass)
        if paths:
            lines.append(f"- {path_list(paths)}: {WHY_NOT_USED[klass]}.")
    return ["\n".join(lines)]


MAX_CONTRACT_SHOWN = 4000  # characters of one contract in the review


def contract_section(contracts: dict[str, str]) -> list[str]:
    """The review's section showing the host contracts the pull request adds or changes: what
    steered the generated files, inert in a code block, for the maintainer who approves them."""
    if not contracts:
        return []
    lines = ["**Host contract of this pull request** (read as typed data, docs/contract.md):"]
    for path, text in sorted(contracts.items()):
        shown = text if len(text) <= MAX_CONTRACT_SHOWN else text[:MAX_CONTRACT_SHOWN] + "\n# ... (cut)"
        lines += ["", f"{code_span(path)}:", "", fence(shown, "yaml")]
    return ["\n".join(lines)]


def overwrite_refusal(paths: tuple[str, ...] | list[str]) -> str:
    return (
        f"this pull request edits files agent-d writes ({path_list(paths)}); agent-d built and tested its own "
        "versions of them from the base's files and does not push over the pull request's edits. Take the "
        "base's version of them back and agent-d commits on its next run"
    )


def patch_instructions(
    patch: str, pr_number: int, why: str, take_back: tuple[str, list[str]] | None = None, limit: int = 40000
) -> str:
    """The review's note that the generated files were not committed, with the commands that apply
    them; ``take_back``: (base commit, paths) whose base version the patch applies to."""
    tag = "AGENT_D_PATCH"
    while tag in patch:
        tag += "_"
    if len(patch) > limit:
        return (
            f"**The generated files were not committed:** {why}\n\nThe patch is {len(patch)} characters, too "
            "long to post; download `patch.diff` from the workflow run's artifact and run `git apply --index "
            "patch.diff && git commit -m 'agent-d: generated host code'` on your branch."
        )
    command = f"git fetch origin pull/{pr_number}/head && git checkout FETCH_HEAD  # or your local branch\n"
    if take_back is not None:  # agent-d's paths only (artifact.ALLOWED_PATHS): nothing to quote
        base, paths = take_back
        command += f"git fetch origin {base} && git checkout FETCH_HEAD -- {' '.join(paths)}\n"
    command += (
        f"git apply --index <<'{tag}'\n{patch.rstrip()}\n{tag}\n"
        'git commit -m "agent-d: generated host code"\n'
    )
    return (
        f"**The generated files were not committed:** {why}\n\nTo apply them yourself, run this on your branch "
        f"and push:\n\n{fence(command, 'sh')}"
    )


def status_comment(sha: str, state: str, detail: str) -> str:
    return f"### agent-d status\n\n**{state}** for commit `{sha[:12]}`.\n\n{detail}\n"


def check_summary(verdicts: dict[str, KernelVerdict], notes: list[str]) -> str:
    return "\n".join([verdict_table(verdicts), "", *notes]) if verdicts else "\n".join(notes)


def reply(marker: str, text: str, with_help: bool = False) -> str:
    body = f"{marker}\n{text}\n"
    if with_help:
        body += "\n" + HELP_TEXT
    return body


TRAILER = "Agent-D-Tested-Tree"


def commit_message(ops: list[str], tree: str, run_ref: str) -> str:
    names = ", ".join(sorted(ops))
    return (
        f"agent-d: generated host code for {names}\n\n"
        "Written by agent-d (ffi.rs, Python wrapper, wiring) and tested on a GPU runner.\n\n"
        f"{TRAILER}: {tree}\nAgent-D-Run: {run_ref}\n"
    )


def is_bot_message(message: str) -> bool:
    return re.search(rf"^{TRAILER}: [0-9a-f]{{40}}$", message or "", re.MULTILINE) is not None
