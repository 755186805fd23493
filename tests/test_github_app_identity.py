"""agent-d as a GitHub App against the local GitHub: each trusted job mints the App's installation
token itself (from the App id and private key, never a token handed between jobs), mints it again
before it expires on a long job, commits as the App's bot user in GitHub's noreply form, and writes
the Actions job summary. The action's own step script is what runs, as the runner would run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from github import GithubException
from github_world import BOTS, REPO, world  # noqa: F401
from test_github_support import fake_generate, fake_port

from bot.errors import UsageError
from bot.github import gitops
from bot.github.client import ClientSettings, make_github
from bot.github.credentials import GITHUB_ACTIONS_BOT, AppCredentials, TokenCredentials, credentials_from_env
from bot.github.runner import run_all

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / ".github" / "workflows" / "agent-d.yml"
MINTED = re.compile(r"ghs_fake\d{32}")
QUICK = dict(backoff_factor=0.01, secondary_rate_wait=1, max_rate_limit_wait=5)


def _settings(fake) -> ClientSettings:
    return ClientSettings(
        api_url=fake.base_url, seconds_between_requests=None, seconds_between_writes=None, **QUICK
    )


def _action_step(inputs: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The action's agent-d step: its script, and its env with each ``${{ inputs.x }}`` filled in
    from ``inputs`` or the input's declared default, as the runner fills them."""
    action = yaml.safe_load(ACTION.read_text())
    [step] = [s for s in action["runs"]["steps"] if s.get("id") == "agent-d"]
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()} | inputs
    env = {}
    for name, value in step["env"].items():
        given = re.fullmatch(r"\$\{\{ inputs\.([\w-]+) \}\}", value)
        env[name] = values[given[1]] if given else value
    return step["run"], env


def _run_action(tmp: Path, fake, inputs: dict[str, str]) -> tuple[subprocess.CompletedProcess, Path]:
    script, step_env = _action_step(inputs)
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "agent-d"  # the console script `pip install` makes, on this checkout
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bot.cli "$@"\n')
    shim.chmod(0o755)
    summary = tmp / "step-summary.md"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": str(tmp),
        "PYTHONPATH": str(ROOT),
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": fake.base_url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_RUN_ID": "77",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(tmp / "outputs"),
        "AGENT_D_SECONDS_BETWEEN_REQUESTS": "0",
        "AGENT_D_SECONDS_BETWEEN_WRITES": "0",
        "AGENT_D_BACKOFF": "0.01",
        **step_env,
    }
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    return proc, summary


def test_the_action_mints_the_apps_token_in_its_own_job_and_writes_the_summary(world, tmp_path):  # noqa: F811
    key = world.fake.register_app(app_id=77, slug="tilegym-porter")
    pr = world.open_kernel_pr()
    check = world.repo.create_check_run("agent-d", world.fake.pr_head_sha(pr), status="queued")
    world.fake.exchanges.clear()
    inputs = {"command": "conclude", "install": "false", "token": "", "app-id": "77", "app-private-key": key}
    proc, summary = _run_action(
        tmp_path, world.fake, {**inputs, "check-run-id": str(check.id), "port-result": "failure"}
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    # the installation looked up and a token minted with the App's own JWT, in this job
    first, second, *rest = world.fake.exchanges
    assert (first.path, second.path) == (
        "/repos/nvidia/tilegym/installation",
        "/app/installations/4242/access_tokens",
    )
    assert first.token.count(".") == 2 and second.token.count(".") == 2  # JWTs, checked by the fake
    minted = second.response_body["token"]
    assert {e.token for e in rest} == {minted} and world.fake.tokens[minted] == "tilegym-porter[bot]"
    assert world.repo.get_check_run(check.id).conclusion == "failure"
    # masked for the runner's log the moment it exists, and said nowhere else; the key nowhere at all
    assert f"::add-mask::{minted}" in proc.stdout
    assert out.replace(f"::add-mask::{minted}", "").count(minted) == 0
    assert not any(line in out for line in key.splitlines() if len(line) > 20)
    assert summary.read_text().startswith(f"## agent-d conclude\n\nCheck run {check.id}: failure.")


def test_a_long_finalize_mints_again_and_commits_as_the_apps_bot_user(world, monkeypatch):  # noqa: F811
    # a token that lives 20 s is within PyGithub's refresh margin from the start: every use mints
    # anew, as a two-hour job's would after its first hour; a request with an expired token is a
    # violation the fake records (and this test's teardown fails on)
    key = world.fake.register_app(app_id=12, token_lifetime=20.0)
    credentials = AppCredentials("12", key, REPO, _settings(world.fake))
    gh = make_github(credentials.auth, _settings(world.fake))
    pushed_with: list[str] = []
    real_push = gitops.push

    def push(gitdir, url, sha, branch, token=None):
        pushed_with.append(token)
        assert time.time() < world.fake.token_expires[token], "git was handed an expired token"
        return real_push(gitdir, url, sha, branch, token)

    monkeypatch.setattr(gitops, "push", push)
    pr = world.open_kernel_pr()
    event = world.event("pull_request", "opened", pr=pr.number)
    s = run_all(gh, event, fake_port, world.tmp / "run", BOTS, "app", credentials, fake_generate)
    assert s.finalize.pushed and s.finalize.conclusion == "success"
    minted = [e.response_body["token"] for e in world.fake.exchanges if e.path.endswith("/access_tokens")]
    assert len(minted) > 3 and len(set(minted)) == len(minted)
    assert (
        pushed_with == [pushed_with[0]] and pushed_with[0] in minted[1:]
    )  # asked at the push, not at the start
    bot = gh.get_user("agent-d[bot]")
    commit = world.repo.get_commit(s.finalize.new_head)
    assert (commit.commit.author.name, commit.commit.author.email) == (
        "agent-d[bot]",
        f"{bot.id}+agent-d[bot]@users.noreply.github.com",
    )
    assert commit.author.login == "agent-d[bot]"  # GitHub links it: the id is the bot user's


def test_an_expired_installation_token_is_refused_by_the_local_github(world):  # noqa: F811
    """What the test above relies on: the fake notices a token used after it expired."""
    key = world.fake.register_app(token_lifetime=0.5)
    credentials = AppCredentials("1", key, REPO, _settings(world.fake))
    token = credentials.git_token()
    time.sleep(0.6)
    stale = make_github(token, _settings(world.fake))
    with pytest.raises(GithubException) as refused:
        stale.get_repo(REPO).get_pull(1)
    assert refused.value.status == 401 and "expired" in world.fake.violations[-1]
    world.fake.violations.clear()


def test_without_an_app_the_commit_author_is_who_the_token_acts_as(world):  # noqa: F811
    world.fake.set_token("ghp_maintainerPersonalToken0123456789", "maint")
    person = TokenCredentials("ghp_maintainerPersonalToken0123456789")
    maint = world.gh.get_user("maint")
    gh = make_github(person.auth, _settings(world.fake))
    assert person.commit_author(gh).email == f"{maint.id}+maint@users.noreply.github.com"
    # the workflow's GITHUB_TOKEN is no user (GET /user is refused): github-actions[bot]
    assert (
        TokenCredentials("ghs_workflowTokenLikeValue0123456789").commit_author(world.gh) == GITHUB_ACTIONS_BOT
    )
    pr = world.open_kernel_pr()
    s = world.run(world.event("pull_request", "opened", pr=pr.number))
    assert world.repo.get_commit(s.finalize.new_head).author.login == "github-actions[bot]"


def test_app_settings_that_cannot_work_are_usage_errors(world):  # noqa: F811
    settings = _settings(world.fake)
    with pytest.raises(UsageError, match="AGENT_D_APP_PRIVATE_KEY is not set"):
        credentials_from_env(REPO, settings, {"AGENT_D_APP_ID": "5"})
    with pytest.raises(UsageError, match="numeric id"):
        credentials_from_env(REPO, settings, {"AGENT_D_APP_ID": "my-app", "AGENT_D_APP_PRIVATE_KEY": "k"})
    key = world.fake.register_app(app_id=5)  # installed: App 5; a JWT that says App 6 is refused
    with pytest.raises(
        UsageError, match="not installed on nvidia/tilegym, or its private key is not the App's"
    ):
        credentials_from_env(REPO, settings, {"AGENT_D_APP_ID": "6", "AGENT_D_APP_PRIVATE_KEY": key})
    world.fake.violations.clear()


def test_the_workflow_gives_the_app_to_each_trusted_job_and_never_to_the_gpu_job():
    flow = yaml.safe_load(WORKFLOW.read_text())
    call = flow[True]["workflow_call"]  # YAML 1.1 reads `on` as True
    assert "app-id" in call["inputs"] and "app-private-key" in call["secrets"]
    for name in ("dispatch", "finalize", "conclude"):
        [step] = [s for s in flow["jobs"][name]["steps"] if s.get("uses") == "./.agent-d"]
        assert step["with"]["app-id"] == "${{ inputs.app-id }}"
        assert step["with"]["app-private-key"] == "${{ secrets.app-private-key }}"
    assert "secrets." not in yaml.safe_dump(flow["jobs"]["port"])
    script, env = _action_step({"command": "port-job"})
    assert "AGENT_D_APP_PRIVATE_KEY" in env
    assert re.search(r"port-job\)\n\s+#.*\n\s+unset .*AGENT_D_APP_ID AGENT_D_APP_PRIVATE_KEY", script)
