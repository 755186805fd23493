"""Unit tests for the pure parts of bot/github: config, events, commands, redaction, kernels."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from bot.errors import UsageError
from bot.github.client import RETRIED_METHODS, ClientSettings, make_retry
from bot.github.commands import parse_commands
from bot.github.config import Config, ConfigError, parse_config
from bot.github.events import parse_event
from bot.github.kernels import added_kernels, checked_ops
from bot.github.redact import RedactFilter, Redactor, scrubbed_env
from bot.github.render import commit_message, fence, is_bot_message
from bot.targets.targets import OP_NAME, check_name

# --------------------------------------------------------------------------- config


def test_config_defaults_and_values():
    assert parse_config("") == Config()
    cfg = parse_config("auto_commit: false\nmax_bot_commits: 2\nallowed_users: [alice]\ncheck_name: gate\n")
    assert (cfg.auto_commit, cfg.max_bot_commits, cfg.allowed_users, cfg.check_name) == (
        False,
        2,
        ("alice",),
        "gate",
    )
    kernel_dir = "src/tilegym/ops/cutile_rs/foo_kernel"
    found = added_kernels([_f(f"{kernel_dir}/kernel.rs", "added"), _f(f"{kernel_dir}/ffi.rs", "added")])
    assert [k.op for k in found] == ["foo"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("auto_comit: true\n", "auto_comit"),
        ("max_bot_commits: 0\n", "max_bot_commits"),
        ("kernel_globs: ['../x.rs']\n", "kernel_globs"),
        ("kernel_globs: ['src/*.py']\n", "kernel_globs"),
        ("kernel_globs: ['src/tilegym/ops/cutile_rs/*_kernel/kernel.rs']\n", "kernel_globs: not a setting"),
        ("timeout_minutes: 30\n", "timeout_minutes: not a setting.*`port-timeout-minutes`"),
        ("gpu_runner_labels: [gpu]\n", "gpu_runner_labels: not a setting.*`gpu-runs-on`"),
        ("allowed_teams: ['noslash']\n", "allowed_teams"),
        (": [\n", "YAML"),
    ],
)
def test_config_rejects_bad_input(text, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_config(text)


# --------------------------------------------------------------------------- commands


def test_commands_are_line_anchored_and_skip_code_and_quotes():
    body = (
        "please\n/agent-d rerun silu_and_mul\n> /agent-d apply\n```\n/agent-d apply\n```\n"
        "    /agent-d apply\n`/agent-d apply`\n<!-- /agent-d apply -->\ntext /agent-d apply\n"
    )
    cmds = parse_commands(body)
    assert [(c.name, c.kernels) for c in cmds] == [("rerun", ("silu_and_mul",))]


def test_commands_variants():
    assert parse_commands("/AGENT-D Rerun")[0].name == "rerun"
    assert parse_commands("/agent-d")[0].name == "help"
    assert parse_commands("/agent-d help")[0].name == "help"
    assert parse_commands(f"/agent-d apply --sha {'a' * 40}")[0].sha == "a" * 40
    assert parse_commands("/agent-d apply")[0].name == "apply"
    bad = parse_commands("/agent-d frobnicate")[0]
    assert bad.name == "invalid" and "frobnicate" in bad.error
    assert parse_commands("/agent-d rerun ../etc")[0].name == "invalid"
    for reserved in ("lib", "mod", "crate", "ffi_util", "_x", "a" * 65):  # bot/targets/targets.py's rule
        bad = parse_commands(f"/agent-d rerun silu {reserved}")[0]
        assert bad.name == "invalid" and "not a plain identifier" in bad.error and repr(reserved) in bad.error
    assert parse_commands("/agent-d rerun silu " + "a" * 64)[0].kernels == ("silu", "a" * 64)
    assert parse_commands("/agent-d rerun --sha abc1234")[0].sha == "abc1234"
    assert parse_commands("/agent-d rerun --sha nothex")[0].name == "invalid"
    assert parse_commands("/agent-dx rerun") == []


# --------------------------------------------------------------------------- events


def _repo():
    return {"full_name": "o/r"}


def test_pull_request_events():
    payload = {
        "action": "synchronize",
        "before": "a" * 40,
        "pull_request": {
            "number": 7,
            "draft": False,
            "head": {"sha": "b" * 40, "repo": {"full_name": "fork/r"}},
            "base": {"repo": {"full_name": "o/r"}},
        },
        "repository": _repo(),
        "sender": {"login": "alice", "type": "User"},
    }
    ev = parse_event("pull_request", payload)
    assert (ev.kind, ev.pr_number, ev.head_sha, ev.before_sha, ev.fork) == (
        "pull_request",
        7,
        "b" * 40,
        "a" * 40,
        True,
    )
    payload["action"] = "labeled"
    assert parse_event("pull_request", payload).kind == "ignored"


def test_comment_events():
    payload = {
        "action": "created",
        "issue": {"number": 3, "pull_request": {"url": "x"}, "state": "open"},
        "comment": {"id": 11, "body": "/agent-d rerun", "user": {"login": "m", "type": "User"}},
        "repository": _repo(),
        "sender": {"login": "m", "type": "User"},
    }
    ev = parse_event("issue_comment", payload)
    assert (ev.kind, ev.pr_number, ev.comment_id) == ("comment", 3, 11)
    bot = dict(payload, sender={"login": "agent-d[bot]", "type": "Bot"})
    assert parse_event("issue_comment", bot).kind == "ignored"
    edited = dict(payload, action="edited")
    assert parse_event("issue_comment", edited).kind == "ignored"
    issue = dict(payload, issue={"number": 3, "state": "open"})
    assert parse_event("issue_comment", issue).kind == "ignored"


def test_push_check_run_and_dispatch_events():
    push = {"ref": "refs/heads/pull-request/12", "after": "c" * 40, "before": "d" * 40, "repository": _repo()}
    ev = parse_event("push", push)
    assert (ev.kind, ev.pr_number, ev.head_sha) == ("push", 12, "c" * 40)
    assert parse_event("push", dict(push, ref="refs/heads/main")).kind == "ignored"
    check = {
        "action": "rerequested",
        "check_run": {"id": 5, "head_sha": "e" * 40, "pull_requests": [{"number": 4}]},
    }
    ev = parse_event("check_run", {**check, "repository": _repo(), "sender": {"login": "m"}})
    assert (ev.kind, ev.pr_number, ev.check_run_id) == ("check_rerun", 4, 5)
    wd = {"inputs": {"pr": "9", "kernels": "a, b"}, "repository": _repo()}
    ev = parse_event("workflow_dispatch", wd)
    assert (ev.kind, ev.pr_number, ev.kernels) == ("dispatch", 9, ("a", "b"))
    ev = parse_event("workflow_dispatch", {**wd, "inputs": {"pr": "9", "sha": " " + "A" * 40}})
    assert ev.head_sha == "a" * 40  # the approved commit, normalised
    bad = parse_event("workflow_dispatch", {**wd, "inputs": {"pr": "9", "sha": "main"}})
    assert bad.kind == "ignored" and "not a commit sha" in bad.reason


# --------------------------------------------------------------------------- redaction


def test_redactor_masks_values_and_shapes():
    r = Redactor(["s3cr3t-canary-value"])
    text = "tok s3cr3t-canary-value url https://x-access-token:abc123@github.com/o/r ghp_" + "A" * 36
    out = r.redact(text)
    assert "s3cr3t" not in out and "abc123" not in out and "ghp_AAAA" not in out
    assert r.redact("AUTHORIZATION: basic dXNlcjpwYXNz") == "AUTHORIZATION: ***"


def test_redact_filter_scrubs_messages_and_tracebacks(caplog):
    r = Redactor(["canary-9f8e7d6c"])
    logger = logging.getLogger("test.redact")
    handler = caplog.handler
    handler.addFilter(RedactFilter(r))
    try:
        logger.warning("token is %s", "canary-9f8e7d6c")
        try:
            raise RuntimeError("failed with canary-9f8e7d6c")
        except RuntimeError:
            logger.exception("boom")
    finally:
        handler.removeFilter(handler.filters[-1])
    assert "canary-9f8e7d6c" not in caplog.text
    assert "***" in caplog.text


def test_scrubbed_env_drops_secrets():
    env = {"GITHUB_TOKEN": "x", "ACTIONS_RUNTIME_URL": "u", "MY_API_KEY": "k", "PATH": "/bin", "HOME": "/h"}
    assert scrubbed_env(env) == {"PATH": "/bin", "HOME": "/h"}


# --------------------------------------------------------------------------- client


def test_retry_never_replays_post():
    retry = make_retry(ClientSettings())
    assert "POST" not in RETRIED_METHODS and "GET" in RETRIED_METHODS
    assert not retry._is_method_retryable("POST")
    assert retry._is_method_retryable("GET")


# --------------------------------------------------------------------------- kernels + render


def _f(name, status, patch=None):
    return SimpleNamespace(filename=name, status=status, patch=patch)


def test_added_kernels_from_file_list():
    files = [
        _f("src/tilegym/ops/cutile_rs/silu_and_mul_kernel/kernel.rs", "added", "@@ -0,0 +1,2 @@\n+a\n+b"),
        _f("src/tilegym/ops/cutile_rs/bmm_kernel/kernel.rs", "modified", "@@ -1,1 +1,1 @@\n-a\n+b"),
        _f("src/tilegym/ops/cutile_rs/swiglu_kernel/kernel.rs", "added"),  # no patch (large file)
        _f("README.md", "added", "@@ -0,0 +1 @@\n+x"),
    ]
    assert [k.op for k in added_kernels(files)] == ["silu_and_mul", "swiglu"]


def test_added_kernels_follow_bot_targets_rule():
    ops = "src/tilegym/ops/cutile_rs"
    files = [
        _f(f"{ops}/gelu_kernel/kernel.rs", "renamed"),  # a rename into place adds it (bot.targets.targets)
        _f(f"{ops}/relu_kernel/kernel.rs", "copied"),
        _f(f"{ops}/old_kernel/kernel.rs", "removed"),
        _f(f"{ops}/nested/x_kernel/kernel.rs", "added"),  # not at KERNEL_PATH
        _f(f"{ops}/y_kernel/kernel.rs\n", "added"),
    ]
    found = added_kernels(files)
    assert [(k.op, k.path) for k in found] == [
        ("gelu", f"{ops}/gelu_kernel/kernel.rs"),
        ("relu", f"{ops}/relu_kernel/kernel.rs"),
    ]
    assert checked_ops(found) == ["gelu", "relu"]
    # a name bot/targets/targets.py refuses is found, then refused with the file named
    bad = added_kernels(
        [_f(f"{ops}/lib_kernel/kernel.rs", "added"), _f(f"{ops}/ok_kernel/kernel.rs", "added")]
    )
    assert [k.op for k in bad] == ["lib", "ok"]
    with pytest.raises(
        UsageError, match=r"lib_kernel/kernel\.rs`: kernel name 'lib' is not a plain identifier"
    ):
        checked_ops(bad)


def test_one_kernel_name_rule_for_targets_commands_and_the_artifact():
    from bot.github.artifact_schema import RESULT_SCHEMA

    assert RESULT_SCHEMA["properties"]["ops"]["items"]["pattern"] == OP_NAME.pattern
    for name in ("_x", "a" * 65, "relu\n"):
        with pytest.raises(UsageError):
            check_name(name)
    assert check_name("a" * 64) == "a" * 64


def test_bot_commit_trailer_and_fence():
    msg = commit_message(["b", "a"], "f" * 40, "run-1")
    assert is_bot_message(msg) and "for a, b" in msg
    assert not is_bot_message("Agent-D-Tested-Tree: nope")
    assert fence("x\n````\ny").startswith("`````text")


# --------------------------------------------------------------------------- create_once


def test_create_once_fails_closed_and_never_blindly_retries():
    from github import GithubException

    from bot.github.publish import create_once

    created = []

    def broken_lookup():
        raise GithubException(502, {"message": "bad gateway"}, {})

    with pytest.raises(GithubException):
        create_once(broken_lookup, lambda: created.append(1), "x", pause=0)
    assert created == []  # a failed lookup never leads to a create

    store: list[str] = []

    def flaky_create():
        store.append("obj")  # GitHub stored it, then answered 502
        raise GithubException(502, {"message": "bad gateway"}, {})

    obj, was_created = create_once(lambda: store[0] if store else None, flaky_create, "y", pause=0)
    assert (obj, was_created, store) == ("obj", False, ["obj"])

    def forbidden():
        raise GithubException(403, {"message": "Resource not accessible by integration"}, {})

    with pytest.raises(GithubException):
        create_once(lambda: None, forbidden, "z", pause=0)


# --------------------------------------------------------------------------- publish helpers


def _user(login, kind="User"):
    return SimpleNamespace(login=login, type=kind)


def test_find_marked_counts_only_the_bots_own_posts():
    from bot.github.publish import find_marked

    marker = "<!-- agent-d:reply c1 -->"
    planted = SimpleNamespace(body=f"I wrote the marker myself\n{marker}", user=_user("mallory"))
    other = SimpleNamespace(body="no marker", user=_user("agent-d[bot]", "Bot"))
    ours = SimpleNamespace(body=f"{marker}\nreply", user=_user("agent-d[bot]", "Bot"))
    assert find_marked([planted, other], marker, ("agent-d[bot]",)) is None
    assert find_marked([planted, other, ours], marker, ("agent-d[bot]",)) is ours
    assert find_marked([SimpleNamespace(body=None, user=None)], marker, ()) is None


class _Run(SimpleNamespace):
    pass


class _Repo:
    """Just enough of a PyGithub Repository for ensure_check_run; counts the lookups."""

    def __init__(self, runs=(), fail_creates=0):
        self.runs, self.lookups, self.fail_creates = list(runs), 0, fail_creates

    def get_commit(self, sha):
        self.lookups += 1
        return SimpleNamespace(
            get_check_runs=lambda check_name, filter: [
                r for r in self.runs if r.name == check_name and filter == "all"
            ]
        )

    def create_check_run(self, **kw):
        run = _Run(id=len(self.runs) + 1, name=kw["name"], external_id=kw["external_id"])
        self.runs.append(run)  # GitHub stores it ...
        if self.fail_creates:
            from github import GithubException

            self.fail_creates -= 1
            raise GithubException(502, {"message": "bad gateway"}, {})  # ... and answers 502
        return run


def test_ensure_check_run_says_whether_it_created_the_run(monkeypatch):
    from bot.github import publish

    monkeypatch.setattr(publish.time, "sleep", lambda s: None)
    repo = _Repo()
    run, created = publish.ensure_check_run(repo, "a" * 40, "agent-d", "pr1:x:auto", "t", "s")
    assert created and run.external_id == "pr1:x:auto" and repo.lookups == 1
    again, created = publish.ensure_check_run(repo, "a" * 40, "agent-d", "pr1:x:auto", "t", "s")
    assert (again, created, len(repo.runs), repo.lookups) == (run, False, 1, 2)
    # stored by GitHub but answered 502: found by the next lookup, and it is this call's run
    flaky = _Repo(fail_creates=1)
    run, created = publish.ensure_check_run(flaky, "a" * 40, "agent-d", "pr1:x:auto", "t", "s")
    assert created and len(flaky.runs) == 1 and flaky.lookups == 2


# --------------------------------------------------------------------------- port job helpers


def test_port_job_and_finalize_share_the_path_rule_and_limits():
    from bot.github import artifact, artifact_schema
    from bot.github.port_job import PortJobError, _normalise

    for path in ("src/tilegym/ops/cutile_rs/x_kernel/ffi.rs", "tests/ops/test_x.py"):
        assert artifact.is_allowed(path)
        artifact.check_path(path)
    for path in (
        "src/tilegym/ops/cutile_rs/x_kernel/kernel.rs",
        "src/tilegym/ops/cutile_rs/.github/x",
        "src/tilegym/ops/cutile_rs/a\\b",
        "setup.py",
    ):
        assert not artifact.is_allowed(path)
        with pytest.raises(artifact.ArtifactError):
            artifact.check_path(path)
    v = _normalise(("FAIL", "host", "r" * 5000, "b" * 100000))
    assert (len(v.reason), len(v.validator_block)) == (
        artifact_schema.MAX_REASON,
        artifact_schema.MAX_VALIDATOR_BLOCK,
    )
    with pytest.raises(PortJobError, match="unknown verdict kind"):
        _normalise(("PASS", "", "", ""))


def test_port_job_refuses_a_kernel_name_bot_targets_refuses(tmp_path):
    from bot.github.port_job import PortJobError, run_port_job

    def never(repo, op):
        raise AssertionError("the port must not start")

    with pytest.raises(PortJobError, match="'lib' is not a plain identifier"):
        run_port_job(tmp_path, "0" * 40, ["silu_and_mul", "lib"], tmp_path / "a", never, base_sha="0" * 40)


# --------------------------------------------------------------------------- CLI


def test_cli_parser_does_not_import_pygithub():
    import subprocess
    import sys

    code = (
        "import sys; from bot.cli import build_parser; p = build_parser(); "
        "assert {'dispatch', 'finalize', 'port-job', 'run'} <= set(p._subparsers._group_actions[0].choices); "
        "assert 'github' not in sys.modules and 'bot.github.client' not in sys.modules, 'PyGithub imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pr_derived_reasons_are_inert_markdown_in_the_verdict_table():
    from bot.github.artifact import KernelVerdict
    from bot.github.render import verdict_table

    hostile = "<img src=x onerror=alert(1)> [win](https://evil.example) @maint **x** | y\n# z"
    table = verdict_table({"silu": KernelVerdict("FAIL", "kernel<b>", hostile, "")})
    row = table.splitlines()[2]
    assert "<img" not in row and "<b>" not in row and "&lt;img" in row
    assert "\\[win\\]\\(https:\u200b//evil" in row and "@\u200bmaint" in row and "\\*\\*x\\*\\*" in row
    assert row.count(" | ") == 2 and "\\|" in row  # the reason's pipe does not open a column


def test_escaped_text_starts_no_list_or_heading_and_links_no_issue():
    from bot.github.render import code_span, escape_md

    assert escape_md("1. item") == "1\\. item" and escape_md("- item") == "\\- item"
    assert escape_md("=== x") == "\\=== x" and escape_md("# x") == "\\# x"
    assert escape_md("see #12") == "see \\#12"  # no cross-reference to issue 12
    assert escape_md("agent-d wrote a.b") == "agent-d wrote a.b"  # mid-line they are plain text
    assert code_span("a `b` <img>") == "`` a `b` <img> ``"  # a longer fence than any run inside
