"""The world the GitHub end-to-end tests run in (no tests here): the local GitHub (tests/ghfake) with
nvidia/tilegym, a maintainer and an outsider, a PyGithub client on it, and a canary token in the
environment that must never reach GitHub, a log or a report. Tests drive agent-d with webhook payloads
built from @octokit/webhooks-examples; it talks to the OpenAPI-validated fake over HTTP and pushes
through bare git remotes.

A test module uses the ``world`` fixture by importing it beside ghfake's fixtures (``from ghfake.fixtures
import ghfake_assets, ghfake_spec, github_fake``), as pytest finds fixtures in the test module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_github_support import BASE_FILES, KERNEL_RS, fake_generate, fake_port, kernel_path

from bot.github import redact
from bot.github.client import ClientSettings, make_github
from bot.github.credentials import TokenCredentials
from bot.github.events import parse_event
from bot.github.publish import STATUS_MARKER
from bot.github.runner import run_all

CANARY = "ghs_CanaryE2eTokenValue0123456789abcdefQ"
BOTS = ("agent-d[bot]",)
REPO = "nvidia/tilegym"


@pytest.fixture
def world(github_fake, monkeypatch, tmp_path):
    fake = github_fake
    monkeypatch.setenv("GITHUB_TOKEN", CANARY)
    monkeypatch.setenv("GITHUB_API_URL", fake.base_url)
    redact.install()
    fake.set_token(CANARY, "agent-d[bot]")
    fake.create_repo("nvidia", "tilegym", files=dict(BASE_FILES))
    fake.add_collaborator("maint", "maintain", REPO)
    fake.add_user("outsider")
    return World(fake, fake_client(fake), tmp_path)


def fake_client(fake, token: str = CANARY):
    """A PyGithub client on the local GitHub (the canary token unless told); short waits, no pacing."""
    settings = ClientSettings(
        api_url=fake.base_url,
        backoff_factor=0.01,
        secondary_rate_wait=1,
        max_rate_limit_wait=5,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    return make_github(token, settings)


class World:
    def __init__(self, fake, gh, tmp: Path):
        self.fake, self.gh, self.tmp, self.n = fake, gh, tmp, 0

    @property
    def repo(self):
        return self.gh.get_repo(REPO)

    def open_kernel_pr(self, branch="add-silu", author="maint", fork_owner=None, files=None, **kw):
        files = files if files is not None else {kernel_path("silu_and_mul"): KERNEL_RS}
        head_repo = None
        where = REPO
        if fork_owner:
            head_repo = self.fake.fork(REPO, fork_owner)
            where = head_repo
        self.fake.commit(where, branch, files, "add kernel", author=author)
        return self.fake.open_pr(REPO, head_repo, branch, "Add kernel", author, **kw)

    def base_sha(self, pr):
        """The pull request's base commit as dispatch reads it (the tip of its base branch)."""
        return self.fake.state.base_sha(pr)

    def event(self, name, action=None, **kw):
        return parse_event(name, self.fake.webhook(name, action, **kw))

    def run(self, event):
        self.n += 1
        return run_all(
            self.gh,
            event,
            fake_port,
            self.tmp / f"run{self.n}",
            BOTS,
            run_ref=f"run-{self.n}",
            credentials=TokenCredentials(CANARY),
            generate=fake_generate,
        )

    def reviews(self, number):
        return list(self.repo.get_pull(number).get_reviews())

    def sticky(self, number):
        return [c for c in self.repo.get_pull(number).get_issue_comments() if STATUS_MARKER in c.body]

    def checks(self, sha):
        return list(self.repo.get_commit(sha).get_check_runs(check_name="agent-d"))

    def all_checks(self, sha):
        """Every agent-d run on ``sha``, oldest first (``checks`` is GitHub's default: the newest)."""
        runs = self.repo.get_commit(sha).get_check_runs(check_name="agent-d", filter="all")
        return sorted(runs, key=lambda c: c.id)

    def posts(self, pattern):
        return len(self.fake.calls("POST", pattern))


def no_canary_anywhere(fake, *texts: str) -> None:
    for ex in fake.exchanges:
        assert CANARY not in json.dumps(ex.request_body), ex.path
        assert CANARY not in json.dumps(ex.response_body), ex.path
    for text in texts:
        assert CANARY not in text
