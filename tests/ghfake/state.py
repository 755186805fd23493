"""The in-memory world behind the fake: users, repositories (bare git repos), pull
requests, comments, reviews, check runs, statuses and collaborator roles."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import gitops

ROLES = ("admin", "maintain", "write", "triage", "read")
LEGACY_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
}


# accounts whose id GitHub fixed long ago (the workflow token acts as github-actions[bot])
FIXED_IDS = {"github-actions[bot]": 41898282}


class ApiError(Exception):
    """An answer GitHub itself would give (404, 422, ...), not a contract violation."""

    def __init__(self, status: int, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class User:
    login: str
    id: int
    type: str = "User"  # "User", "Bot" or "Organization"
    name: str | None = None
    email: str | None = None


@dataclass
class Repo:
    owner: User
    name: str
    id: int
    default_branch: str
    git_dir: Path
    private: bool = False
    parent: Repo | None = None
    created_at: str = field(default_factory=now)
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> role

    @property
    def full_name(self) -> str:
        return f"{self.owner.login}/{self.name}"


@dataclass
class Reaction:
    id: int
    user: User
    content: str
    created_at: str = field(default_factory=now)


@dataclass
class Pull:
    number: int
    id: int
    base: Repo
    head: Repo
    head_ref: str
    base_ref: str
    title: str
    body: str | None
    user: User
    draft: bool = False
    state: str = "open"
    maintainer_can_modify: bool = True
    created_at: str = field(default_factory=now)
    updated_at: str = field(default_factory=now)
    closed_at: str | None = None
    labels: list[str] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)  # on the PR's issue side


@dataclass
class Comment:
    id: int
    repo: Repo
    issue_number: int
    body: str
    user: User
    created_at: str = field(default_factory=now)
    updated_at: str = field(default_factory=now)
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Review:
    id: int
    repo: Repo
    number: int
    user: User
    body: str
    state: str
    commit_id: str
    submitted_at: str | None
    comments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class CheckRun:
    id: int
    repo: Repo
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    details_url: str | None = None
    external_id: str | None = None
    output: dict[str, Any] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)
    app_slug: str = "agent-d"


@dataclass
class Status:
    id: int
    repo: Repo
    sha: str
    state: str
    context: str
    description: str | None
    target_url: str | None
    creator: User
    created_at: str = field(default_factory=now)


class State:
    """All mutable data of one fake GitHub.  Guarded by ``lock`` (one request at a time)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.lock = threading.RLock()
        self._ids = itertools.count(1001)
        self.users: dict[str, User] = {}
        self.repos: dict[str, Repo] = {}
        self.pulls: dict[tuple[str, int], Pull] = {}
        self.comments: dict[int, Comment] = {}
        self.reviews: dict[int, Review] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self.statuses: list[Status] = []
        self._numbers: dict[str, itertools.count] = {}
        self._files_cache: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        self._sha_cache: dict[tuple[str, ...], Any] = {}  # keyed by immutable shas: never stale
        self._ref_memo: dict[tuple[Path, str], str | None] = {}  # refs: valid for one request only

    def begin_request(self) -> None:
        """Forget ref lookups (branches move between requests, e.g. after a push)."""
        self._ref_memo.clear()

    def rev(self, git_dir: Path, ref: str) -> str | None:
        key = (git_dir, ref)
        if key not in self._ref_memo:
            self._ref_memo[key] = gitops.fast_rev_parse(git_dir, ref)
        return self._ref_memo[key]

    def merge_base(self, git_dir: Path, a: str, b: str) -> str:
        key = ("mb", str(git_dir), a, b)
        if key not in self._sha_cache:
            self._sha_cache[key] = gitops.merge_base(git_dir, a, b) or a
        return self._sha_cache[key]

    def next_id(self) -> int:
        return next(self._ids)

    # ------------------------------------------------------------------ users
    def user(self, login: str, type: str | None = None) -> User:
        """The user ``login``, created on first sight; GitHub Apps (``name[bot]``) are of type Bot."""
        key = login.lower()
        if key not in self.users:
            kind = type or ("Bot" if login.endswith("[bot]") else "User")
            self.users[key] = User(login=login, id=FIXED_IDS.get(key) or self.next_id(), type=kind)
        return self.users[key]

    def find_user(self, login: str) -> User:
        u = self.users.get(login.lower())
        if u is None:
            raise ApiError(404, "Not Found")
        return u

    # ------------------------------------------------------------------ repos
    def repo(self, owner: str, name: str) -> Repo:
        r = self.repos.get(f"{owner}/{name}".lower())
        if r is None:
            raise ApiError(404, "Not Found")
        return r

    def create_repo(
        self, owner: str, name: str, files: dict[str, str | bytes | None], default_branch: str, private: bool
    ) -> Repo:
        key = f"{owner}/{name}".lower()
        if key in self.repos:
            raise ValueError(f"repository {owner}/{name} exists already")
        git_dir = gitops.init_bare(self.root / "git" / owner / f"{name}.git", default_branch)
        repo = Repo(self.user(owner), name, self.next_id(), default_branch, git_dir, private)
        self.repos[key] = repo
        self._numbers[key] = itertools.count(1)
        if files:
            who = gitops.Identity(owner, f"{owner}@users.noreply.example")
            gitops.commit_files(git_dir, default_branch, files, "Initial commit", who)
        return repo

    def fork_repo(self, parent: Repo, owner: str, name: str | None) -> Repo:
        name = name or parent.name
        key = f"{owner}/{name}".lower()
        git_dir = self.root / "git" / owner / f"{name}.git"
        gitops.init_bare(git_dir, parent.default_branch)
        gitops.copy_branch(parent.git_dir, git_dir, "refs/heads/*", "refs/heads/*")
        repo = Repo(
            self.user(owner), name, self.next_id(), parent.default_branch, git_dir, parent.private, parent
        )
        self.repos[key] = repo
        self._numbers[key] = itertools.count(1)
        return repo

    def resolve(self, repo: Repo, ref: str) -> str:
        """A sha, branch, tag, ``refs/...`` or ``pull/N/head`` -> commit sha (404 if unknown)."""
        cands = [f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/{ref}", ref]
        if ref.startswith("refs/") or len(ref) == 40:
            cands.insert(0, ref)
        for cand in cands:
            sha = self.rev(repo.git_dir, cand)
            if sha:
                return sha
        if len(ref) == 40:
            raise ApiError(422, f"No commit found for SHA: {ref}")
        raise ApiError(404, f"No commit found for the ref {ref}")

    def collaborator_role(self, repo: Repo, login: str) -> str | None:
        if login.lower() == repo.owner.login.lower():
            return "admin"
        return repo.collaborators.get(login.lower())

    def author_association(self, repo: Repo, login: str) -> str:
        if login.lower() == repo.owner.login.lower():
            return "OWNER"
        if self.collaborator_role(repo, login):
            return "COLLABORATOR"
        return "NONE"

    # ------------------------------------------------------------------ pulls
    def open_pr(self, base: Repo, head: Repo, head_ref: str, base_ref: str | None, **fields: Any) -> Pull:
        base_ref = base_ref or base.default_branch
        if gitops.rev_parse(head.git_dir, f"refs/heads/{head_ref}") is None:
            raise ValueError(f"{head.full_name} has no branch {head_ref!r}")
        number = next(self._numbers[base.full_name.lower()])
        pr = Pull(
            number=number,
            id=self.next_id(),
            base=base,
            head=head,
            head_ref=head_ref,
            base_ref=base_ref,
            **fields,
        )
        self.pulls[(base.full_name.lower(), number)] = pr
        self.sync_pull_ref(pr)
        return pr

    def pull(self, repo: Repo, number: int) -> Pull:
        pr = self.pulls.get((repo.full_name.lower(), number))
        if pr is None:
            raise ApiError(404, "Not Found")
        return pr

    def issue_comments(self, repo: Repo, number: int) -> list[Comment]:
        """The issue comments of pull ``number`` in ``repo``, oldest first."""
        return sorted(
            (c for c in self.comments.values() if c.repo is repo and c.issue_number == number),
            key=lambda c: c.id,
        )

    def head_sha(self, pr: Pull) -> str:
        sha = self.rev(pr.head.git_dir, f"refs/heads/{pr.head_ref}")
        if sha is None:
            raise ApiError(404, f"head branch {pr.head_ref} of {pr.head.full_name} is gone")
        return sha

    def base_sha(self, pr: Pull) -> str:
        return self.resolve(pr.base, pr.base_ref)

    def sync_pull_ref(self, pr: Pull) -> str:
        """Mirror the live head into ``refs/pull/N/head`` of the base repo (as GitHub does)."""
        sha = self.head_sha(pr)
        ref = f"refs/pull/{pr.number}/head"
        if self.rev(pr.base.git_dir, ref) != sha:
            gitops.copy_branch(pr.head.git_dir, pr.base.git_dir, f"refs/heads/{pr.head_ref}", ref)
            self._ref_memo[(pr.base.git_dir, ref)] = sha
        return sha

    def pull_files(self, pr: Pull) -> list[dict[str, Any]]:
        head = self.sync_pull_ref(pr)
        base = self.base_sha(pr)
        key = (pr.base.full_name, base, head)
        if key not in self._files_cache:
            mb = self.merge_base(pr.base.git_dir, base, head)
            self._files_cache[key] = gitops.diff_entries(pr.base.git_dir, mb, head)
        return self._files_cache[key]

    def pull_commits(self, pr: Pull) -> list[str]:
        head = self.sync_pull_ref(pr)
        base = self.base_sha(pr)
        mb = self.merge_base(pr.base.git_dir, base, head)
        key = ("revs", str(pr.base.git_dir), mb, head)
        if key not in self._sha_cache:
            self._sha_cache[key] = gitops.rev_list(pr.base.git_dir, mb, head)
        return self._sha_cache[key]

    def pulls_for_sha(self, repo: Repo, sha: str) -> list[Pull]:
        return [
            p for p in self.pulls.values() if p.base is repo and p.state == "open" and self.head_sha(p) == sha
        ]
