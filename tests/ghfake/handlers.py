"""REST handlers, keyed by GitHub's ``operationId``.

Each handler gets a ``Ctx`` (typed path/query params, parsed JSON body, authenticated
user) and returns a ``Reply``.  Raise ``ApiError`` for answers GitHub would give itself
(404, 422 ...).  To model a new operation: write a function here (or in a sibling
module imported by ``server.py``) decorated with ``@handles("<operationId>")``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from .objects import Renderer
from .state import ApiError, Comment, Reaction, Repo, Review, State, User, now

MAX_COMMENT = 65536


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Ctx:
    state: State
    render: Renderer
    base_url: str
    request_path: str
    path: dict[str, Any]
    query: dict[str, Any]
    body: Any
    user: User
    server_tokens: dict[str, str] = field(default_factory=dict)  # token -> login (shared with the server)
    bearer: str = ""  # the request's Authorization token (a JWT for the App's own operations)
    server: Any = None  # the FakeServer (its App side: bot/ghfake handlers_app.AppSide)

    def repo(self) -> Repo:
        return self.state.repo(self.path["owner"], self.path["repo"])

    def page(self, items: list[Any], default_per_page: int = 30) -> tuple[list[Any], dict[str, str]]:
        per_page = max(1, min(int(self.query.get("per_page", default_per_page)), 100))
        page = max(1, int(self.query.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def url(n: int) -> str:
            q = {k: v for k, v in self.query.items() if k not in ("page", "per_page")}
            q.update(per_page=per_page, page=n)
            return f"{self.base_url}{self.request_path}?{urlencode(q, doseq=True)}"

        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(1)}>; rel="first"', f'<{url(page - 1)}>; rel="prev"']
        return chunk, ({"Link": ", ".join(links)} if links else {})


HANDLERS: dict[str, Callable[[Ctx], Reply]] = {}


def handles(*operation_ids: str) -> Callable[[Callable[[Ctx], Reply]], Callable[[Ctx], Reply]]:
    def deco(fn: Callable[[Ctx], Reply]) -> Callable[[Ctx], Reply]:
        for op in operation_ids:
            HANDLERS[op] = fn
        return fn

    return deco


def _unprocessable(message: str, field_name: str | None = None, resource: str | None = None) -> ApiError:
    errors = [
        {"resource": resource or "Resource", "field": field_name or "", "code": "invalid", "message": message}
    ]
    return ApiError(422, "Validation Failed", errors)


# ---------------------------------------------------------------------------- meta
@handles("rate-limit/get")
def rate_limit(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.rate_limit(remaining=4999))


@handles("users/get-authenticated")
def get_authenticated(ctx: Ctx) -> Reply:
    if ctx.user.type == "Bot":  # an installation token or GITHUB_TOKEN is no user
        raise ApiError(403, "Resource not accessible by integration")
    return Reply(200, ctx.render.public_user(ctx.user))


@handles("users/get-by-username")
def get_user(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.public_user(ctx.state.find_user(ctx.path["username"])))


@handles("repos/get")
def get_repo(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.repo(ctx.repo()))


@handles("repos/get-collaborator-permission-level")
def get_permission(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    user = ctx.state.find_user(ctx.path["username"])
    role = ctx.state.collaborator_role(repo, user.login)
    if role is None:
        role = "none" if repo.private else "read"
    body = ctx.render.permission(repo, user, role)
    if role == "none":
        body["permission"] = "none"
    return Reply(200, body)


# ---------------------------------------------------------------------------- pulls
@handles("pulls/list")
def list_pulls(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    want = ctx.query.get("state", "open")
    pulls = [p for p in ctx.state.pulls.values() if p.base is repo and want in ("all", p.state)]
    if "head" in ctx.query:
        owner, _, ref = str(ctx.query["head"]).partition(":")
        pulls = [p for p in pulls if p.head.owner.login.lower() == owner.lower() and p.head_ref == ref]
    if "base" in ctx.query:
        pulls = [p for p in pulls if p.base_ref == ctx.query["base"]]
    pulls.sort(key=lambda p: p.number, reverse=ctx.query.get("direction", "desc") == "desc")
    chunk, headers = ctx.page(pulls)
    return Reply(200, [ctx.render.pull(p, simple=True) for p in chunk], headers)


@handles("pulls/get")
def get_pull(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.pull(ctx.state.pull(ctx.repo(), ctx.path["pull_number"])))


@handles("pulls/list-files")
def list_files(ctx: Ctx) -> Reply:
    pr = ctx.state.pull(ctx.repo(), ctx.path["pull_number"])
    entries = ctx.state.pull_files(pr)[:3000]
    chunk, headers = ctx.page(entries)
    return Reply(200, [ctx.render.diff_entry(pr, e) for e in chunk], headers)


@handles("pulls/list-commits")
def list_pull_commits(ctx: Ctx) -> Reply:
    pr = ctx.state.pull(ctx.repo(), ctx.path["pull_number"])
    chunk, headers = ctx.page(ctx.state.pull_commits(pr))
    return Reply(200, [ctx.render.commit(pr.base, sha, with_files=False) for sha in chunk], headers)


@handles("issues/get")
def get_issue(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.issue_for_pull(ctx.state.pull(ctx.repo(), ctx.path["issue_number"])))


# ---------------------------------------------------------------------------- issue comments
def _comment(ctx: Ctx) -> Comment:
    c = ctx.state.comments.get(ctx.path["comment_id"])
    if c is None or c.repo is not ctx.repo():
        raise ApiError(404, "Not Found")
    return c


def _check_body(body: str) -> None:
    if not body.strip():
        raise _unprocessable("body cannot be blank", "body", "IssueComment")
    if len(body) > MAX_COMMENT:
        raise _unprocessable(
            f"Body is too long (maximum is {MAX_COMMENT} characters)", "body", "IssueComment"
        )


@handles("issues/list-comments")
def list_comments(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    ctx.state.pull(repo, ctx.path["issue_number"])
    items = ctx.state.issue_comments(repo, ctx.path["issue_number"])
    if "since" in ctx.query:
        items = [c for c in items if c.updated_at >= ctx.query["since"]]
    chunk, headers = ctx.page(items)
    return Reply(200, [ctx.render.comment(c) for c in chunk], headers)


@handles("issues/create-comment")
def create_comment(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    ctx.state.pull(repo, ctx.path["issue_number"])
    _check_body(ctx.body["body"])
    c = Comment(ctx.state.next_id(), repo, ctx.path["issue_number"], ctx.body["body"], ctx.user)
    ctx.state.comments[c.id] = c
    rendered = ctx.render.comment(c)
    return Reply(201, rendered, {"Location": rendered["url"]})


@handles("issues/get-comment")
def get_comment(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.comment(_comment(ctx)))


@handles("issues/update-comment")
def update_comment(ctx: Ctx) -> Reply:
    c = _comment(ctx)
    _check_body(ctx.body["body"])
    c.body = ctx.body["body"]
    c.updated_at = now()
    return Reply(200, ctx.render.comment(c))


@handles("issues/delete-comment")
def delete_comment(ctx: Ctx) -> Reply:
    c = _comment(ctx)
    del ctx.state.comments[c.id]
    return Reply(204)


@handles("reactions/create-for-issue-comment")
def create_reaction(ctx: Ctx) -> Reply:
    c = _comment(ctx)
    for r in c.reactions:
        if r.user is ctx.user and r.content == ctx.body["content"]:
            return Reply(200, ctx.render.reaction(r))
    r = Reaction(ctx.state.next_id(), ctx.user, ctx.body["content"])
    c.reactions.append(r)
    return Reply(201, ctx.render.reaction(r))


@handles("reactions/list-for-issue-comment")
def list_reactions(ctx: Ctx) -> Reply:
    c = _comment(ctx)
    items = [r for r in c.reactions if ctx.query.get("content") in (None, r.content)]
    chunk, headers = ctx.page(items)
    return Reply(200, [ctx.render.reaction(r) for r in chunk], headers)


@handles("reactions/create-for-issue")
def create_issue_reaction(ctx: Ctx) -> Reply:
    pr = ctx.state.pull(ctx.repo(), ctx.path["issue_number"])
    for r in pr.reactions:
        if r.user is ctx.user and r.content == ctx.body["content"]:
            return Reply(200, ctx.render.reaction(r))  # GitHub: "Reaction exists"
    r = Reaction(ctx.state.next_id(), ctx.user, ctx.body["content"])
    pr.reactions.append(r)
    return Reply(201, ctx.render.reaction(r))


@handles("reactions/list-for-issue")
def list_issue_reactions(ctx: Ctx) -> Reply:
    pr = ctx.state.pull(ctx.repo(), ctx.path["issue_number"])
    items = [r for r in pr.reactions if ctx.query.get("content") in (None, r.content)]
    chunk, headers = ctx.page(items)
    return Reply(200, [ctx.render.reaction(r) for r in chunk], headers)


@handles("reactions/delete-for-issue")
def delete_issue_reaction(ctx: Ctx) -> Reply:
    pr = ctx.state.pull(ctx.repo(), ctx.path["issue_number"])
    mine = [r for r in pr.reactions if r.id == ctx.path["reaction_id"]]
    if not mine:
        raise ApiError(404, "Not Found")
    if mine[0].user is not ctx.user:
        raise ApiError(403, "Must have admin rights to Repository.")
    pr.reactions.remove(mine[0])
    return Reply(204)


# ---------------------------------------------------------------------------- reviews
_REVIEW_STATE = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
    None: "PENDING",
}


@handles("pulls/list-reviews")
def list_reviews(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    n = ctx.path["pull_number"]
    ctx.state.pull(repo, n)
    items = sorted(
        (
            r
            for r in ctx.state.reviews.values()
            if r.repo is repo and r.number == n and (r.state != "PENDING" or r.user is ctx.user)
        ),
        key=lambda r: r.id,
    )
    chunk, headers = ctx.page(items)
    return Reply(200, [ctx.render.review(r) for r in chunk], headers)


@handles("pulls/get-review")
def get_review(ctx: Ctx) -> Reply:
    rv = ctx.state.reviews.get(ctx.path["review_id"])
    if rv is None or rv.repo is not ctx.repo() or rv.number != ctx.path["pull_number"]:
        raise ApiError(404, "Not Found")
    return Reply(200, ctx.render.review(rv))


def _comment_on_the_diff(comment: dict, patch: str | None) -> None:
    """GitHub places a comment by ``line`` (and ``start_line``) only on the right side's lines of one
    hunk of the file's diff; anything else is refused as it refuses it."""
    if "line" not in comment:
        return  # placed by ``position`` in the diff: not modelled
    if comment.get("side", "RIGHT") != "RIGHT" or comment.get("start_side", "RIGHT") != "RIGHT":
        return
    line, start = comment["line"], comment.get("start_line", comment["line"])
    hunks = [
        range(int(m[1]), int(m[1]) + int(m[2] if m[2] is not None else 1))
        for m in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", patch or "", re.M)
    ]
    if not any(line in h and start in h for h in hunks) or start > line:
        raise _unprocessable(
            "pull_request_review_thread.line must be part of the diff", "line", "PullRequestReviewComment"
        )


@handles("pulls/create-review")
def create_review(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    pr = ctx.state.pull(repo, ctx.path["pull_number"])
    body = ctx.body or {}
    event = body.get("event")
    text = body.get("body", "")
    if event in ("COMMENT", "REQUEST_CHANGES") and not text and not body.get("comments"):
        raise _unprocessable(f"Review body is required for event {event}", "body", "PullRequestReview")
    if event in ("APPROVE", "REQUEST_CHANGES") and pr.user is ctx.user:
        raise _unprocessable("Can not approve or request changes on your own pull request", "event")
    commits = ctx.state.pull_commits(pr)
    commit_id = body.get("commit_id") or ctx.state.head_sha(pr)
    if commit_id not in commits:
        raise _unprocessable(f"commit_id {commit_id} is not part of the pull request", "commit_id")
    if event is None and any(
        r.state == "PENDING" and r.user is ctx.user and r.repo is repo and r.number == pr.number
        for r in ctx.state.reviews.values()
    ):
        raise _unprocessable("User can only have one pending review per pull request", "user_id")
    files = {f["filename"]: f for f in ctx.state.pull_files(pr)}
    for c in body.get("comments", []):
        if c.get("path") not in files:
            raise _unprocessable(
                f"Path could not be resolved: {c.get('path')}", "path", "PullRequestReviewComment"
            )
        _comment_on_the_diff(c, files[c["path"]].get("patch"))
    state = _REVIEW_STATE[event]
    rv = Review(
        ctx.state.next_id(),
        repo,
        pr.number,
        ctx.user,
        text,
        state,
        commit_id,
        None if state == "PENDING" else now(),
        list(body.get("comments", [])),
    )
    ctx.state.reviews[rv.id] = rv
    return Reply(200, ctx.render.review(rv))
