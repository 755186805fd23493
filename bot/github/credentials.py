"""Who agent-d is on GitHub: a token it was given, or a GitHub App whose token it mints itself.

A token passed from one Actions job to another is masked and dropped by the runner, and an
installation token lasts one hour while a port may take two. So with ``AGENT_D_APP_ID`` and
``AGENT_D_APP_PRIVATE_KEY`` every trusted job mints its own installation token, and PyGithub's
``AppInstallationAuth`` mints a new one before the current one expires; git asks for the token
at the moment it runs (``git_token``), never for a copy taken at the start.

The commit author follows GitHub's noreply form, ``<user id>+<login>@users.noreply.github.com``,
which is what links a commit to the account (the App's bot user, the person of a personal token,
or ``github-actions[bot]`` for the workflow's ``GITHUB_TOKEN``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from github import Auth, GithubException, GithubIntegration
from github.InstallationAuthorization import InstallationAuthorization

from bot.errors import UsageError
from bot.github.client import ClientSettings, connection, token_from_env
from bot.github.redact import REDACTOR


@dataclass(frozen=True)
class CommitAuthor:
    name: str
    email: str


def noreply(login: str, user_id: int) -> CommitAuthor:
    return CommitAuthor(login, f"{user_id}+{login}@users.noreply.github.com")


# The user GitHub's workflow token (GITHUB_TOKEN) acts as; GET /user is refused to it.
GITHUB_ACTIONS_BOT = noreply("github-actions[bot]", 41898282)


class Credentials(Protocol):
    auth: Auth.Auth
    login: str  # the bot's login where it is known without asking GitHub, else ""

    def git_token(self) -> str: ...

    def commit_author(self, gh) -> CommitAuthor: ...


class TokenCredentials:
    """A token from the environment: ``GITHUB_TOKEN``, a personal token, or one minted elsewhere."""

    def __init__(self, token: str) -> None:
        REDACTOR.add(token)
        self._token = token
        self.auth = Auth.Token(token)
        self.login = ""

    def git_token(self) -> str:
        return self._token

    def commit_author(self, gh) -> CommitAuthor:
        try:
            me = gh.get_user()
            return noreply(me.login, me.id)
        except GithubException as exc:
            if exc.status in (401, 403):  # an integration's token: GitHub's workflow token
                return GITHUB_ACTIONS_BOT
            raise


class _RegisteringInstallationAuth(Auth.AppInstallationAuth):
    """PyGithub's installation auth, registering each token it mints with the redactor (and with
    the Actions runner's log masking) the moment it exists."""

    def _get_installation_authorization(self) -> InstallationAuthorization:
        minted = super()._get_installation_authorization()
        REDACTOR.add(minted.token)
        if os.environ.get("GITHUB_ACTIONS") == "true":
            print(f"::add-mask::{minted.token}", flush=True)
        return minted


class AppCredentials:
    """A GitHub App installed on ``repository``: its installation found with the App's JWT, its
    tokens minted in this process and again before each expires."""

    def __init__(self, app_id: str, private_key: str, repository: str, settings: ClientSettings) -> None:
        REDACTOR.add(private_key)
        for line in private_key.splitlines():
            REDACTOR.add(line if len(line) >= 20 else None)
        owner, _, name = repository.partition("/")
        if not owner or not name:
            raise UsageError(
                f"the App's installation is looked up by repository owner/name, not {repository!r}"
            )
        app_auth = Auth.AppAuth(app_id, private_key)
        integration = GithubIntegration(auth=app_auth, **connection(settings))
        try:
            installation = integration.get_repo_installation(owner, name)
        except GithubException as exc:
            raise UsageError(
                f"GitHub App {app_id} is not installed on {repository}, or its private key is not the App's "
                f"(GitHub answered {exc.status}): install the App on the repository (docs/github.md, step 2)"
            ) from None
        self.installation_id = installation.id
        self.login = f"{installation.app_slug}[bot]"
        # bound to the integration's requester now, so git can ask for a token before any client exists
        self.auth = _RegisteringInstallationAuth(app_auth, installation.id, requester=integration.requester)

    def git_token(self) -> str:
        return self.auth.token  # minted again when within PyGithub's margin of expiring

    def commit_author(self, gh) -> CommitAuthor:
        return noreply(self.login, gh.get_user(self.login).id)


def credentials_from_env(
    repository: str, settings: ClientSettings, env: dict[str, str] | None = None
) -> Credentials:
    """The App when its id and key are set (both, or neither), else the token (a usage error without one)."""
    env = dict(os.environ if env is None else env)
    app_id, key = env.get("AGENT_D_APP_ID", "").strip(), env.get("AGENT_D_APP_PRIVATE_KEY", "")
    if app_id or key.strip():
        if not (app_id and key.strip()):
            missing = "AGENT_D_APP_PRIVATE_KEY" if app_id else "AGENT_D_APP_ID"
            raise UsageError(f"a GitHub App needs both its id and its private key: {missing} is not set")
        if not app_id.isdigit():
            raise UsageError(f"AGENT_D_APP_ID is the App's numeric id, not {app_id!r}")
        return AppCredentials(app_id, key, repository, settings)
    return TokenCredentials(token_from_env(env))
