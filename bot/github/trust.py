"""Who may make agent-d spend GPU time.

* A command (``/agent-d rerun``, ``apply``, the check's Re-run button) needs write,
  maintain or admin on the repository, or a listing under ``allowed_users`` /
  ``allowed_teams`` in the default-branch config.  Any API error means "no".
* A pull request runs by itself only when its head lives in the base repository, or its
  author passes the same test.  Anything else waits for a maintainer's command.
* An approval covers the head commit read at the moment the command is handled, and
  nothing else: the job matrix is pinned to that sha, and ``finalize`` refuses to
  publish when the head has moved.  No label or state carries trust to a later push.
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


def check_auto_run(gh, repo, cfg: Config, pr) -> Trust:
    """May this PR run without a maintainer's command?"""
    if not is_fork(pr):
        return Trust(True, "the head branch lives in this repository")
    author = pr.user.login
    user = check_user(gh, repo, cfg, author)
    if user.allowed:
        return Trust(True, f"fork PR by a trusted author: {user.reason}", user.role)
    return Trust(
        False,
        f"this pull request comes from a fork and its author @{author} is not a maintainer; a maintainer "
        f"must comment `/agent-d rerun` to approve commit {pr.head.sha[:12]} (each new push needs a new "
        "approval)",
        user.role,
    )
