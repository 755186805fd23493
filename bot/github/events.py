"""A webhook / Actions event payload turned into one typed ``Event``.

Only fields agent-d needs are kept; everything else in the payload is ignored, and
nothing in here talks to GitHub.  Events agent-d does not act on come back with
``kind="ignored"`` and a reason, so the caller can still conclude a check or log why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PR_ACTIONS = frozenset({"opened", "synchronize", "reopened", "ready_for_review"})
COPY_BRANCH_RE = re.compile(r"^refs/heads/pull-request/(\d+)$")


@dataclass(frozen=True)
class Event:
    """What happened, in agent-d's terms.

    kind: "pull_request" | "comment" | "check_rerun" | "dispatch" | "push" | "ignored"
    """

    kind: str
    name: str  # the GitHub event name (pull_request, issue_comment, ...)
    action: str
    repo: str  # "owner/name" of the base repository
    pr_number: int | None = None
    head_sha: str = ""  # as the payload saw it; always re-read before acting
    before_sha: str = ""  # synchronize / push: the previous head
    sender: str = ""
    sender_is_bot: bool = False
    comment_id: int | None = None
    comment_body: str = ""
    check_run_id: int | None = None
    kernels: tuple[str, ...] = ()  # workflow_dispatch input
    fork: bool = False
    reason: str = ""  # why an event is ignored


def _is_bot(user: dict | None) -> bool:
    if not user:
        return False
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


def _ignored(name: str, action: str, repo: str, reason: str, **kw: Any) -> Event:
    return Event(kind="ignored", name=name, action=action, repo=repo, reason=reason, **kw)


def parse_event(name: str, payload: dict[str, Any]) -> Event:
    repo = (payload.get("repository") or {}).get("full_name", "")
    action = str(payload.get("action", ""))
    sender = payload.get("sender") or {}
    common = {"sender": sender.get("login", ""), "sender_is_bot": _is_bot(sender)}
    if name in ("pull_request", "pull_request_target"):
        return _pull_request(name, action, repo, payload, common)
    if name == "issue_comment":
        return _comment(name, action, repo, payload, common)
    if name == "check_run":
        return _check_rerun(name, action, repo, payload, common)
    if name == "workflow_dispatch":
        return _manual_dispatch(name, action, repo, payload, common)
    if name == "push":
        return _copy_branch_push(name, action, repo, payload, common)
    return _ignored(name, action, repo, f"event {name!r} is not handled", **common)


def _check_rerun(name: str, action: str, repo: str, payload: dict, common: dict) -> Event:
    """A maintainer pressed "Re-run" on agent-d's check."""
    run = payload.get("check_run") or {}
    prs = run.get("pull_requests") or []
    if action != "rerequested":
        return _ignored(name, action, repo, f"check_run.{action} is not a trigger", **common)
    # GitHub leaves pull_requests empty for fork heads; our own external_id names the PR.
    match = re.match(r"^pr(\d+):", str(run.get("external_id") or ""))
    if not prs and not match:
        return _ignored(name, action, repo, "the re-requested check has no pull request", **common)
    return Event(
        kind="check_rerun",
        name=name,
        action=action,
        repo=repo,
        pr_number=int(prs[0]["number"]) if prs else int(match.group(1)),
        head_sha=run.get("head_sha", ""),
        check_run_id=run.get("id"),
        **common,
    )


def _manual_dispatch(name: str, action: str, repo: str, payload: dict, common: dict) -> Event:
    """A maintainer started the workflow by hand for a pull request (and maybe a commit and kernels)."""
    inputs = payload.get("inputs") or {}
    raw_pr = str(inputs.get("pr", inputs.get("pr_number", ""))).strip()
    if not raw_pr.isdigit():
        return _ignored(name, action, repo, "workflow_dispatch needs a numeric `pr` input", **common)
    kernels = tuple(k for k in re.split(r"[\s,]+", str(inputs.get("kernels", "") or "")) if k)
    sha = str(inputs.get("sha", "") or "").strip().lower()
    if sha and not re.fullmatch(r"[0-9a-f]{7,40}", sha):
        return _ignored(
            name, action, repo, f"workflow_dispatch `sha` input is not a commit sha: {sha!r}", **common
        )
    return Event(
        kind="dispatch",
        name=name,
        action="",
        repo=repo,
        pr_number=int(raw_pr),
        head_sha=sha,  # the commit the maintainer approves; required when its pusher is not trusted
        kernels=kernels,
        **common,
    )


def _copy_branch_push(name: str, action: str, repo: str, payload: dict, common: dict) -> Event:
    """A push to pull-request/<N>, the branch copy-pr-bot mirrors a pull request to."""
    match = COPY_BRANCH_RE.match(str(payload.get("ref", "")))
    if not match:
        return _ignored(name, action, repo, "push to a branch that is not pull-request/<N>", **common)
    if payload.get("deleted"):
        return _ignored(name, action, repo, "the pull-request branch was deleted", **common)
    return Event(
        kind="push",
        name=name,
        action="",
        repo=repo,
        pr_number=int(match.group(1)),
        head_sha=str(payload.get("after", "")),
        before_sha=str(payload.get("before", "")),
        **common,
    )


def _pull_request(name: str, action: str, repo: str, payload: dict, common: dict) -> Event:
    pr = payload.get("pull_request") or {}
    head = pr.get("head") or {}
    base = pr.get("base") or {}
    head_repo = (head.get("repo") or {}).get("full_name", "")
    base_repo = (base.get("repo") or {}).get("full_name", repo)
    fields = {
        "pr_number": int(pr.get("number", payload.get("number", 0))) or None,
        "head_sha": head.get("sha", ""),
        "fork": head_repo != base_repo,
        **common,
    }
    if action not in PR_ACTIONS:
        return _ignored(name, action, repo, f"pull_request.{action} is not a trigger", **fields)
    before = str(payload.get("before", "")) if action == "synchronize" else ""
    return Event(kind="pull_request", name=name, action=action, repo=repo, before_sha=before, **fields)


def _comment(name: str, action: str, repo: str, payload: dict, common: dict) -> Event:
    issue = payload.get("issue") or {}
    comment = payload.get("comment") or {}
    fields = {
        "pr_number": issue.get("number"),
        "comment_id": comment.get("id"),
        "comment_body": str(comment.get("body") or ""),
        **common,
    }
    if action != "created":
        return _ignored(
            name, action, repo, f"issue_comment.{action} is not a trigger (only new comments)", **fields
        )
    if not issue.get("pull_request"):
        return _ignored(name, action, repo, "the comment is on an issue, not a pull request", **fields)
    if issue.get("state", "open") != "open":
        return _ignored(name, action, repo, "the pull request is closed", **fields)
    if _is_bot(comment.get("user")) or common["sender_is_bot"]:
        return _ignored(name, action, repo, "comments by bots are ignored", **fields)
    return Event(kind="comment", name=name, action=action, repo=repo, **fields)


def load_event(name: str, path: str | Path) -> Event:
    """Raises ``OSError`` when the file cannot be read, ``ValueError`` when it is not a JSON object."""
    with open(path, encoding="utf-8") as fh:
        payload = json.load(fh)
    if not isinstance(payload, dict):
        raise ValueError(f"the payload is a JSON {type(payload).__name__}, not an object")
    return parse_event(name, payload)
