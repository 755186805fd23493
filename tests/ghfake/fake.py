"""``GitHubFake``: the object tests use.  Server + state + scenario helpers."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Self

from . import gitops
from .assets import Assets, ensure_assets
from .server import FakeServer, LogEntry
from .spec import Spec, load_spec
from .state import ROLES, Pull, Repo, State
from .webhooks import WebhookBuilder, sign, write_event

__all__ = ["GitHubFake", "sign", "write_event"]


class GitHubFake(FakeServer):
    """A local GitHub on 127.0.0.1 backed by bare git repositories under ``root``.

    Use ``with GitHubFake.create(tmp_path) as fake:`` or the ``github_fake`` fixture.
    """

    def __init__(self, spec: Spec, assets: Assets, root: Path, **kwargs: Any):
        super().__init__(spec=spec, state=State(Path(root)), **kwargs)
        self.assets = assets
        self._hooks = WebhookBuilder(self, assets.webhook_examples_path)

    @classmethod
    def create(
        cls, root: str | Path | None = None, cache_dir: str | Path | None = None, **kwargs: Any
    ) -> GitHubFake:
        assets = ensure_assets(cache_dir)
        root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="ghfake-"))
        return cls(load_spec(assets.spec_path), assets, root, **kwargs).start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ repositories
    def _repo(self, repo: str | Repo) -> Repo:
        return repo if isinstance(repo, Repo) else self.state.repo(*repo.split("/", 1))

    def create_repo(
        self,
        owner: str,
        name: str,
        files: dict[str, str | bytes | None] | None = None,
        default_branch: str = "main",
        private: bool = False,
    ) -> Repo:
        """A repository whose default branch holds ``files`` (one initial commit)."""
        with self.state.lock:
            return self.state.create_repo(owner, name, files or {}, default_branch, private)

    def fork(self, repo: str | Repo, owner: str, name: str | None = None) -> Repo:
        """A second bare repository with all branches of ``repo`` (a fork owned by ``owner``)."""
        with self.state.lock:
            return self.state.fork_repo(self._repo(repo), owner, name)

    def commit(
        self,
        repo: str | Repo,
        branch: str,
        files: dict[str, str | bytes | None],
        message: str = "change",
        author: str | None = None,
        start_point: str | None = None,
    ) -> str:
        """Commit ``files`` (None deletes) to ``branch`` directly in the bare repo; return its sha.

        A missing branch starts at ``start_point`` (default: the default branch)."""
        r = self._repo(repo)
        login = author or r.owner.login
        self.state.user(login)
        who = gitops.Identity(login, f"{login}@users.noreply.example")
        sha = gitops.commit_files(r.git_dir, branch, files, message, who, start_point or r.default_branch)
        with self.state.lock:
            self.state.begin_request()  # a branch moved: no ref read before this push may be reused
        return sha

    def clone_url(self, repo: str | Repo) -> str:
        """``file://`` URL of the bare repository (also the REST ``clone_url``)."""
        return self._repo(repo).git_dir.resolve().as_uri()

    def branch_sha(self, repo: str | Repo, branch: str) -> str | None:
        return gitops.rev_parse(self._repo(repo).git_dir, f"refs/heads/{branch}")

    def push_rejection_hook(self, repo: str | Repo, reason: str, paths_regex: str | None = None) -> Path:
        """Make pushes to ``repo`` fail with ``reason`` (only those touching ``paths_regex`` if given)."""
        return gitops.install_pre_receive(self._repo(repo).git_dir, reason, paths_regex)

    def remove_push_rejection_hook(self, repo: str | Repo) -> None:
        gitops.remove_pre_receive(self._repo(repo).git_dir)

    # ------------------------------------------------------------------ people
    def add_user(self, login: str, type: str | None = None) -> None:
        with self.state.lock:
            self.state.user(login, type)

    def add_collaborator(self, login: str, role: str, repo: str | Repo | None = None) -> None:
        """Give ``login`` a role (admin, maintain, write, triage, read) on ``repo`` (default: every repo)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}")
        with self.state.lock:
            self.state.user(login)
            for r in [self._repo(repo)] if repo is not None else list(self.state.repos.values()):
                r.collaborators[login.lower()] = role

    def set_token(self, token: str, login: str) -> None:
        """Requests bearing ``token`` act as ``login`` (others act as ``default_login``)."""
        self.tokens[token] = login
        self.add_user(login)

    def register_app(self, app_id: int = 1, slug: str = "agent-d", token_lifetime: float = 3600.0) -> str:
        """Install a GitHub App ``slug`` on every repository: its own operations then need a JWT
        signed with the returned private key (PEM); its installation tokens last ``token_lifetime``
        seconds, and a request with an expired one is a violation."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.app.app_id, self.app.slug, self.app.token_lifetime = app_id, slug, token_lifetime
        self.app.public_key = key.public_key()
        self.add_user(f"{slug}[bot]")
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    # ------------------------------------------------------------------ pull requests
    def open_pr(
        self,
        base_repo: str | Repo,
        head_repo: str | Repo | None,
        head_branch: str,
        title: str,
        user_login: str,
        base_branch: str | None = None,
        body: str | None = "",
        draft: bool = False,
        maintainer_can_modify: bool = True,
    ) -> Pull:
        """Open a PR from ``head_repo:head_branch`` (same repo when ``head_repo`` is None).

        ``head.sha`` is read from the head branch on every request, so pushing moves it."""
        base = self._repo(base_repo)
        head = self._repo(head_repo) if head_repo is not None else base
        with self.state.lock:
            user = self.state.user(user_login)
            return self.state.open_pr(
                base,
                head,
                head_branch,
                base_branch,
                title=title,
                body=body,
                user=user,
                draft=draft,
                maintainer_can_modify=maintainer_can_modify,
            )

    def pr_head_sha(self, pr: Pull) -> str:
        return self.state.head_sha(pr)

    # ------------------------------------------------------------------ webhooks
    def webhook(self, event: str, action: str | None = None, **overrides: Any) -> dict[str, Any]:
        """A payload for ``event``/``action`` built from a real example and the live state.

        Keys: ``repo="owner/name"`` (default: first repo), ``pr=<number>`` (default: newest),
        ``sender=<login>``; issue_comment: ``body=``, ``commenter=``, ``comment_id=`` (without an
        id the comment is created in the state first); check_run: ``check_run_id=``;
        push: ``branch=``, ``before=``; workflow_dispatch: ``ref=``, ``inputs=``;
        ``installation=<id>``.  Any other key is deep-merged into the payload.
        """
        return self._hooks.build(event, action, **overrides)

    def write_webhook(
        self, path: str | Path, event: str, action: str | None = None, **overrides: Any
    ) -> Path:
        return write_event(self.webhook(event, action, **overrides), path)

    # ------------------------------------------------------------------ assertions
    def calls(self, method: str | None = None, path_regex: str | None = None) -> list[LogEntry]:
        pat = re.compile(path_regex) if path_regex else None
        return [
            e
            for e in self.log
            if (method is None or e.method == method.upper()) and (pat is None or pat.search(e.path))
        ]

    def assert_clean(self) -> None:
        assert self.violations == [], "GitHub contract violations:\n" + "\n".join(self.violations)
