"""Webhook payloads from ``@octokit/webhooks-examples``, re-pointed at the fake's state.

A payload starts as a real recorded example for the event/action, then the parts a bot
reads (repository, pull_request, issue, comment, check_run, sender, refs and shas) are
overlaid from the live state, and every github.com URL is rewritten to the fake.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import gitops
from .state import Comment

if TYPE_CHECKING:
    from .fake import GitHubFake


def load_examples(path: Path) -> dict[str, list[dict[str, Any]]]:
    with open(path, "rb") as fh:
        return {e["name"]: e["examples"] for e in json.load(fh)}


def overlay(example: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """Copy ``live`` values over keys the example has, when the JSON types agree
    (webhook shapes differ from REST in places, e.g. integer timestamps in push events)."""
    for k, v in live.items():
        if k not in example:
            continue
        old = example[k]
        if (
            old is None
            or v is None
            or type(old) is type(v)
            or (isinstance(old, (int, float)) and isinstance(v, (int, float)))
        ):
            example[k] = copy.deepcopy(v)
    return example


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_merge(base[k], v)
        else:
            base[k] = v
    return base


def sign(body: bytes, secret: str) -> str:
    """The ``X-Hub-Signature-256`` header value for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def write_event(payload: dict[str, Any], path: str | Path) -> Path:
    """Write a payload where ``GITHUB_EVENT_PATH`` would point; return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(payload, indent=2))
    return p


class WebhookBuilder:
    def __init__(self, fake: GitHubFake, examples_path: Path):
        self.fake = fake
        self.examples = load_examples(examples_path)

    def example(self, event: str, action: str | None) -> dict[str, Any]:
        candidates = self.examples.get(event)
        if not candidates:
            raise KeyError(f"no webhook example for event {event!r}")
        for ex in candidates:
            if action is None or ex.get("action") == action:
                return copy.deepcopy(ex)
        raise KeyError(
            f"no webhook example for {event}.{action}; have {sorted({e.get('action') for e in candidates})}"
        )

    def build(self, event: str, action: str | None = None, **overrides: Any) -> dict[str, Any]:
        fake, state, render = self.fake, self.fake.state, self.fake.render
        payload = self.example(event, action)
        repo_name = overrides.pop("repo", None)
        number = overrides.pop("pr", None)
        sender = overrides.pop("sender", None)
        with state.lock:
            repo = state.repo(*repo_name.split("/", 1)) if repo_name else next(iter(state.repos.values()))
            pr = state.pull(repo, number) if number is not None else None
            if pr is None and event in ("pull_request", "issue_comment"):
                pr = max(
                    (p for p in state.pulls.values() if p.base is repo), key=lambda p: p.number, default=None
                )
                if pr is None:
                    raise ValueError(
                        f"{event} webhook: {repo.full_name} has no pull request; call open_pr first"
                    )
            if "repository" in payload:
                overlay(payload["repository"], render.repo(repo, "repository"))
            if pr is not None and "pull_request" in payload:
                overlay(payload["pull_request"], render.pull(pr))
                payload["number"] = pr.number
                sender = sender or pr.user.login
            if event == "issue_comment":
                sender = self._comment(payload, pr, sender, overrides)
            if event == "check_run":
                self._check_run(payload, repo, pr, overrides)
            if event == "push":
                self._push(payload, repo, overrides)
            if event == "workflow_dispatch":
                payload["ref"] = overrides.pop("ref", f"refs/heads/{repo.default_branch}")
                payload["inputs"] = overrides.pop("inputs", payload.get("inputs") or {})
            if "installation" in overrides:
                payload["installation"] = {"id": overrides.pop("installation"), "node_id": "MDIz"}
            user = state.user(sender or fake.default_login)
            payload["sender"] = overlay(payload.get("sender") or {}, render.user(user))
        deep_merge(payload, overrides)
        return fake.factory.rewrite_urls(payload)

    def _comment(
        self, payload: dict[str, Any], pr: Any, sender: str | None, overrides: dict[str, Any]
    ) -> str:
        state, render = self.fake.state, self.fake.render
        comment_id = overrides.pop("comment_id", None)
        body = overrides.pop("body", None)
        if comment_id is not None:
            c = state.comments[comment_id]
        else:
            author = state.user(overrides.pop("commenter", None) or sender or pr.user.login)
            c = Comment(
                state.next_id(), pr.base, pr.number, body if body is not None else "/agent-d help", author
            )
            state.comments[c.id] = c  # the comment exists on GitHub before the hook fires
        issue = render.issue_for_pull(pr)
        overlay(payload["issue"], issue)
        payload["issue"]["pull_request"] = issue["pull_request"]
        overlay(payload["comment"], render.comment(c))
        return c.user.login

    def _check_run(self, payload: dict[str, Any], repo: Any, pr: Any, overrides: dict[str, Any]) -> None:
        state, render = self.fake.state, self.fake.render
        run_id = overrides.pop("check_run_id", None)
        if run_id is None:
            runs = [c for c in state.check_runs.values() if c.repo is repo]
            if pr is not None:
                head = state.head_sha(pr)
                runs = [c for c in runs if c.head_sha == head]
            if not runs:
                raise ValueError("check_run webhook: create a check run first or pass check_run_id=")
            run_id = max(c.id for c in runs)
        cr = state.check_runs[run_id]
        live = render.check_run(cr)
        overlay(payload["check_run"], live)
        suite = payload["check_run"].get("check_suite")
        if isinstance(suite, dict):
            suite.update(
                id=live["check_suite"]["id"], head_sha=cr.head_sha, pull_requests=live["pull_requests"]
            )

    def _push(self, payload: dict[str, Any], repo: Any, overrides: dict[str, Any]) -> None:
        branch = overrides.pop("branch", repo.default_branch)
        after = gitops.rev_parse(repo.git_dir, f"refs/heads/{branch}") or gitops.ZERO_SHA
        info = gitops.commit_info(repo.git_dir, after)
        before = overrides.pop("before", None)
        if before is None:
            before = info.parents[0] if info.parents else gitops.ZERO_SHA
        api = self.fake.factory
        head_commit = {
            "id": after,
            "tree_id": info.tree,
            "distinct": True,
            "message": info.message,
            "timestamp": info.committer_date,
            "url": api.html(f"{repo.full_name}/commit/{after}"),
            "author": {"name": info.author_name, "email": info.author_email, "username": info.author_name},
            "committer": {
                "name": info.committer_name,
                "email": info.committer_email,
                "username": info.committer_name,
            },
            "added": [],
            "removed": [],
            "modified": [],
        }
        payload.update(
            ref=f"refs/heads/{branch}",
            before=before,
            after=after,
            created=before == gitops.ZERO_SHA,
            deleted=False,
            forced=False,
            base_ref=None,
            compare=api.html(f"{repo.full_name}/compare/{before[:12]}...{after[:12]}"),
            commits=[head_commit],
            head_commit=head_commit,
            pusher={"name": info.author_name, "email": info.author_email},
        )
