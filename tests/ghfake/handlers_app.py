"""REST handlers for GitHub App installation auth, branches, review dismissal and "Update branch"."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

import jwt

from . import gitops
from .handlers import Ctx, Reply, _unprocessable, handles
from .state import ApiError

INSTALLATION_ID = 4242
APP_SLUG = "agent-d"
_tokens = itertools.count(1)


@dataclass
class AppSide:
    """The GitHub App the fake knows. With ``public_key`` set, its own operations need a JWT
    signed with the App's private key and issued by ``app_id``, as GitHub's do."""

    app_id: int = 1
    slug: str = APP_SLUG
    public_key: Any = None
    token_lifetime: float = 3600.0  # GitHub's: one hour


def _require_app_jwt(ctx: Ctx) -> None:
    app: AppSide = ctx.server.app
    if app.public_key is None:
        return
    try:
        claims = jwt.decode(
            ctx.bearer, app.public_key, algorithms=["RS256"], options={"require": ["iat", "exp", "iss"]}
        )
    except jwt.PyJWTError as exc:
        ctx.server.violations.append(f"{ctx.request_path}: the App's JWT was refused: {exc}")
        raise ApiError(401, "A JSON web token could not be decoded") from None
    if str(claims["iss"]) != str(app.app_id):
        ctx.server.violations.append(
            f"{ctx.request_path}: a JWT issued by {claims['iss']}, not App {app.app_id}"
        )
        raise ApiError(401, "A JSON web token could not be decoded")


@handles("apps/get-repo-installation")
def get_repo_installation(ctx: Ctx) -> Reply:
    _require_app_jwt(ctx)
    app: AppSide = ctx.server.app
    repo = ctx.repo()
    f = ctx.render.f
    inst = f.skeleton(
        "installation",
        id=INSTALLATION_ID,
        app_id=app.app_id,
        app_slug=app.slug,
        client_id="Iv1.fake",
        target_id=repo.owner.id,
        target_type="Organization" if repo.owner.type == "Organization" else "User",
        single_file_name=None,
        repository_selection="selected",
        access_tokens_url=f.api(f"app/installations/{INSTALLATION_ID}/access_tokens"),
        html_url=f.html(f"settings/installations/{INSTALLATION_ID}"),
        repositories_url=f.api("installation/repositories"),
        events=["pull_request", "issue_comment", "check_run", "push"],
        account=ctx.render.user(repo.owner),
        permissions={"checks": "write", "contents": "write", "pull_requests": "write", "issues": "write"},
        created_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:00Z",
        suspended_by=None,
        suspended_at=None,
    )
    return Reply(200, inst)


@handles("apps/create-installation-access-token")
def create_installation_token(ctx: Ctx) -> Reply:
    _require_app_jwt(ctx)
    app: AppSide = ctx.server.app
    if ctx.path["installation_id"] != INSTALLATION_ID:
        raise ApiError(404, "Not Found")
    token = f"ghs_fake{next(_tokens):032d}"
    bot = f"{app.slug}[bot]"
    ctx.state.user(bot)
    ctx.server_tokens[token] = bot
    until = time.time() + app.token_lifetime
    ctx.server.token_expires[token] = until
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until))
    body = {
        "token": token,
        "expires_at": expires,
        "permissions": (ctx.body or {}).get("permissions")
        or {"checks": "write", "contents": "write", "pull_requests": "write", "issues": "write"},
        "repository_selection": "selected",
    }
    return Reply(201, body)


@handles("repos/get-branch")
def get_branch(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    name = ctx.path["branch"]
    sha = ctx.state.rev(repo.git_dir, f"refs/heads/{name}")
    if sha is None:
        raise ApiError(404, "Branch not found")
    api = ctx.render.f.api(f"repos/{repo.full_name}/branches/{name}")
    body = ctx.render.f.skeleton(
        "branch-with-protection",
        name=name,
        commit=ctx.render.commit(repo, sha, with_files=False),
        _links={"html": ctx.render.f.html(f"{repo.full_name}/tree/{name}"), "self": api},
        protected=False,
        protection={"enabled": False},
        protection_url=api + "/protection",
    )
    return Reply(200, body)


@handles("pulls/dismiss-review")
def dismiss_review(ctx: Ctx) -> Reply:
    rv = ctx.state.reviews.get(ctx.path["review_id"])
    if rv is None or rv.repo is not ctx.repo() or rv.number != ctx.path["pull_number"]:
        raise ApiError(404, "Not Found")
    if rv.state not in ("APPROVED", "CHANGES_REQUESTED"):
        raise _unprocessable(f"Can not dismiss a {rv.state.lower()} pull request review", "state")
    rv.state = "DISMISSED"
    return Reply(200, ctx.render.review(rv))


@handles("pulls/update-branch")
def update_branch(ctx: Ctx) -> Reply:
    """Merge the base branch into the head branch, as the authenticated user (the "Update branch" button)."""
    pr = ctx.state.pull(ctx.repo(), ctx.path["pull_number"])
    login = ctx.user.login
    if ctx.state.collaborator_role(pr.base, login) not in ("admin", "maintain", "write"):
        raise ApiError(403, "Must have admin rights to Repository.")
    head, base = ctx.state.sync_pull_ref(pr), ctx.state.base_sha(pr)  # the head's commits in the base repo
    expected = (ctx.body or {}).get("expected_head_sha")
    if expected and expected != head:
        raise _unprocessable("expected head sha didn't match current head ref.")
    if gitops.is_ancestor(pr.base.git_dir, base, head):
        raise _unprocessable("There are no new commits on the base branch.")
    gitops.copy_branch(
        pr.base.git_dir, pr.head.git_dir, f"refs/heads/{pr.base_ref}", "refs/ghfake/update-base"
    )
    who = gitops.Identity(login, f"{login}@users.noreply.example")
    message = f"Merge branch '{pr.base_ref}' into {pr.head_ref}"
    try:
        gitops.merge_into(pr.head.git_dir, pr.head_ref, base, message, who)
    except gitops.GitError:
        raise _unprocessable("merge conflict between base and head") from None
    ctx.state.begin_request()  # the head branch moved
    ctx.state.sync_pull_ref(pr)
    return Reply(
        202, {"message": "Updating pull request branch.", "url": ctx.render.f.html(pr.base.full_name)}
    )
