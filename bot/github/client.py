"""The PyGithub client agent-d uses, and the few settings that make it safe.

Reads are retried (5xx, connection errors, primary and secondary rate limits, through
PyGithub's ``GithubRetry``).  POST is deliberately left out of the retried methods: a
create that failed after GitHub stored it would otherwise be replayed and duplicated.
Creates go through ``publish.create_once`` instead, which looks before it writes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from github import Auth, Github
from github.GithubRetry import GithubRetry
from urllib3.util.retry import Retry

from bot.errors import UsageError
from bot.github.redact import REDACTOR

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
# GET/HEAD/PUT/DELETE/OPTIONS/TRACE plus PATCH (our PATCHes set absolute values: safe to repeat).
RETRIED_METHODS = frozenset(Retry.DEFAULT_ALLOWED_METHODS | {"GET", "PATCH"}) - {"POST"}
BOT_LOGINS = ("agent-d[bot]", "github-actions[bot]")


@dataclass(frozen=True)
class ClientSettings:
    api_url: str = DEFAULT_API_URL
    total_retries: int = 5
    backoff_factor: float = 0.5
    secondary_rate_wait: float = 60.0
    max_rate_limit_wait: float = 600.0  # past this, fail instead of sleeping out a reset
    # GitHub asks for a second between writes; reads go one at a time, unpaced (issue 35: review sooner)
    seconds_between_requests: float | None = None
    seconds_between_writes: float | None = 1.0
    timeout: int = 30

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ClientSettings:
        env = dict(os.environ if env is None else env)

        def num(name: str, default: float) -> float:
            return float(env[name]) if env.get(name) else default

        return cls(
            api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
            backoff_factor=num("AGENT_D_BACKOFF", 0.5),
            secondary_rate_wait=num("AGENT_D_SECONDARY_RATE_WAIT", 60.0),
            max_rate_limit_wait=num("AGENT_D_MAX_RATE_LIMIT_WAIT", 600.0),
            seconds_between_requests=num("AGENT_D_SECONDS_BETWEEN_REQUESTS", 0.0) or None,
            seconds_between_writes=num("AGENT_D_SECONDS_BETWEEN_WRITES", 1.0) or None,
        )


def make_retry(settings: ClientSettings) -> GithubRetry:
    return GithubRetry(
        total=settings.total_retries,
        backoff_factor=settings.backoff_factor,
        secondary_rate_wait=settings.secondary_rate_wait,
        max_rate_limit_wait=settings.max_rate_limit_wait,
        allowed_methods=RETRIED_METHODS,
    )


def token_from_env(env: dict[str, str] | None = None) -> str:
    env = dict(os.environ if env is None else env)
    token = env.get("AGENT_D_TOKEN") or env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or ""
    if not token:
        raise UsageError(
            "no GitHub token: set AGENT_D_TOKEN (or GITHUB_TOKEN) to a token with contents, pull requests "
            "and checks write access (docs/github.md)"
        )
    return token


def make_github(token: str | Auth.Auth, settings: ClientSettings | None = None) -> Github:
    """A client for ``settings.api_url`` authenticated with ``token`` (registered for redaction), or
    with an ``Auth`` that registers its own (bot/github/credentials.py)."""
    settings = settings or ClientSettings.from_env()
    if isinstance(token, str):
        REDACTOR.add(token)
        token = Auth.Token(token)
    return Github(auth=token, **connection(settings))


def connection(settings: ClientSettings) -> dict:
    """How every PyGithub object agent-d makes talks to GitHub: where, how long, retried and paced
    as ``settings`` say (a ``Github`` client and the App's ``GithubIntegration`` alike)."""
    return {
        "base_url": settings.api_url.rstrip("/"),
        "timeout": settings.timeout,
        "retry": make_retry(settings),
        "seconds_between_requests": settings.seconds_between_requests,
        "seconds_between_writes": settings.seconds_between_writes,
        "user_agent": "agent-d",
    }


def log_rate_limit(gh: Github) -> None:
    """One line with the remaining core quota (never fails the run)."""
    try:
        remaining, limit = gh.rate_limiting
        log.info(
            "GitHub rate limit: %s of %s left, resets at %s", remaining, limit, gh.rate_limiting_resettime
        )
    except Exception as exc:
        log.info("rate limit unknown: %s", type(exc).__name__)


def bot_logins(env: dict[str, str] | None = None) -> tuple[str, ...]:
    env = dict(os.environ if env is None else env)
    extra = tuple(x for x in env.get("AGENT_D_BOT_LOGIN", "").split(",") if x)
    return extra + BOT_LOGINS
