"""Who may make agent-d spend GPU time.

* A command (``/agent-d rerun``, ``apply``, the check's Re-run button) needs write,
  maintain or admin on the repository, or a listing under ``allowed_users`` /
  ``allowed_teams`` in the default-branch config.  Any API error means "no".
* A pull request runs by itself only when its head lives in the base repository (pushing
  there needs write access), or the user who pushed the head passes the same test: the
  sender of ``synchronize``, or of ``opened`` when they own the fork.  ``reopened`` and
  ``ready_for_review`` name whoever clicked, not who pushed: dispatch reads its own record of
  the push instead (bot/github/dispatch.py).  Who opened the pull request does not matter:
  an outsider's push to a maintainer's fork branch waits.
* Anything else waits for a maintainer's approval of one exact commit, as NVIDIA's
  copy-pr-bot does: ``/agent-d rerun --sha <full 40-character sha>`` (or Re-run on that
  commit's check).  The approval covers that commit only; the job matrix is pinned to it,
  and ``finalize`` refuses to publish when the head has moved.  No label or state carries
  trust to a later push.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from github import GithubException

from bot.github.config import Config

log = logging.getLogger(__name__)
WRITE_ROLES = frozenset({"admin", "maintain", "write"})


@dataclass(frozen=True)
class Trust:
    allowed: bool
    reason: str
    role: str = "none"


def role_of(repo, login: str) -> str:
    """The collaborator role of ``login`` on ``repo`` ("none" on any error, e.g. a 404 for outsiders)."""
    try:
        role = repo.get_collaborator_role_name(login)
    except GithubException as exc:
        log.info("role lookup for %s failed (%s): treated as none", login, exc.status)
        return "none"
    if role in WRITE_ROLES or role in ("read", "triage", "none"):
        return role
    # A custom role: fall back on the legacy permission, which maps it onto admin/write/read/none.
    try:
        legacy = repo.get_collaborator_permission(login)
    except GithubException:
        return "none"
    return legacy if legacy in WRITE_ROLES else "read"


def _in_allowed_team(gh, teams: tuple[str, ...], login: str) -> str:
    for spec in teams:
        org_name, slug = spec.split("/", 1)
        try:
            team = gh.get_organization(org_name).get_team_by_slug(slug)
            if team.has_in_members(gh.get_user(login)):
                return spec
        except GithubException:
            continue
    return ""


def check_user(gh, repo, cfg: Config, login: str) -> Trust:
    """May ``login`` run agent-d commands on ``repo``?"""
    role = role_of(repo, login)
    if role in WRITE_ROLES:
        return Trust(True, f"@{login} has the {role} role", role)
    if login in cfg.allowed_users:
        return Trust(True, f"@{login} is listed in allowed_users", role)
    team = _in_allowed_team(gh, cfg.allowed_teams, login) if cfg.allowed_teams else ""
    if team:
        return Trust(True, f"@{login} is a member of {team}", role)
    return Trust(
        False,
        f"@{login} has the {role!r} role on this repository; agent-d commands need write, maintain or "
        "admin access (or a listing under allowed_users/allowed_teams in .github/agent-d.yml on the "
        "default branch), because they start jobs on GPU runners",
        role,
    )


def is_fork(pr) -> bool:
    head_repo = pr.head.repo
    return head_repo is None or head_repo.full_name != pr.base.repo.full_name


def approval_command(sha: str, name: str = "rerun") -> str:
    """The exact comment that approves ``sha``."""
    return f"/agent-d {name} --sha {sha}"


def check_auto_run(gh, repo, cfg: Config, pr, pusher: str, event: str = "") -> Trust:
    """May this PR's head run without a maintainer's approval? ``pusher``: who put the head there
    ("" when the event does not say; ``event`` then names it in the reason)."""
    if not is_fork(pr):
        return Trust(True, "the head branch lives in this repository")
    user = check_user(gh, repo, cfg, pusher) if pusher else Trust(False, "nobody", "none")
    if user.allowed:
        return Trust(True, f"the head of a fork was pushed by a trusted user: {user.reason}", user.role)
    who = (
        f"was pushed by @{pusher}, who is not a maintainer"
        if pusher
        else f"has no known pusher (a {event or 'this'} event names who clicked, not who pushed)"
    )
    return Trust(
        False,
        f"commit {pr.head.sha} on a fork {who}; after reviewing "
        f"it, a maintainer approves exactly that commit by commenting `{approval_command(pr.head.sha)}` "
        "(each new push needs a new approval)",
        user.role,
    )
