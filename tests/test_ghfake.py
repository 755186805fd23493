"""The GitHub fake, exercised through PyGithub and GitPython exactly as the bot uses them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest
from github import (
    Auth,
    Github,
    GithubException,
    GithubRetry,
    RateLimitExceededException,
    UnknownObjectException,
)

try:  # tests/ on sys.path (pytest's default rootdir-based import, no tests/__init__.py)
    from ghfake import GitHubFake, sign
    from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake
    from ghfake.spec import load_spec
except ImportError:  # the repository root on sys.path instead
    from tests.ghfake import GitHubFake, sign
    from tests.ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
    from tests.ghfake.spec import load_spec

CONFIG = "kernels:\n  globs: ['crate/src/**/*.rs']\n"


def client(fake: GitHubFake, **kw) -> Github:
    kw.setdefault("retry", None)
    return Github(
        base_url=fake.base_url,
        auth=Auth.Token("test-token"),
        seconds_between_requests=None,
        seconds_between_writes=None,
        **kw,
    )


def scenario(fake: GitHubFake, n_files: int = 1):
    fake.create_repo(
        "acme", "kernels", {"README.md": "hello\n", "lib.py": "x = 1\n", ".github/agent-d.yml": CONFIG}
    )
    files = {f"crate/src/k{i}.rs": f"fn k{i}() {{}}\n" for i in range(n_files)}
    files["lib.py"] = "x = 2\n"
    fake.commit("acme/kernels", "feature", files, "add kernels", author="alice")
    return fake.open_pr("acme/kernels", None, "feature", "Add kernels", "alice", body="please test")


def test_spec_is_indexed_once(ghfake_spec):
    spec = ghfake_spec
    assert spec.version == "23.0.2"
    assert load_spec(spec.path) is spec  # parsed once per process (benchmarks/ghfake_speed.py times it)
    op, params = spec.match("GET", "/repos/o/r/contents/.github/agent-d.yml")
    assert op.operation_id == "repos/get-content" and params["path"] == ".github/agent-d.yml"
    assert (
        spec.match("GET", "/repos/o/r/pulls/comments")[0].operation_id
        == "pulls/list-review-comments-for-repo"
    )
    assert spec.match("GET", "/repos/o/r/commits/main/check-runs")[0].operation_id == "checks/list-for-ref"
    assert spec.match("GET", "/no/such/thing") is None


def test_pygithub_round_trip(github_fake):
    fake = github_fake
    scenario(fake, n_files=5)
    fake.add_collaborator("maint", "maintain")
    fake.add_collaborator("tri", "triage")
    gh = client(fake, per_page=2)
    repo = gh.get_repo("acme/kernels")
    assert repo.default_branch == "main" and repo.clone_url == fake.clone_url("acme/kernels")

    pr = repo.get_pull(1)
    head = fake.branch_sha("acme/kernels", "feature")
    assert (pr.head.sha, pr.head.ref, pr.base.ref, pr.user.login) == (head, "feature", "main", "alice")
    assert pr.changed_files == 6 and pr.maintainer_can_modify
    files = list(pr.get_files())  # 6 files over 3 pages: follows the Link header
    assert sorted(f.status for f in files) == ["added"] * 5 + ["modified"]
    assert {f.filename for f in files if f.status == "modified"} == {"lib.py"}
    assert [f.patch for f in files if f.filename == "lib.py"] == ["@@ -1 +1 @@\n-x = 1\n+x = 2"]
    assert len(fake.calls("GET", r"/pulls/1/files$")) == 3
    assert [p.number for p in repo.get_pulls(state="open")] == [1]

    cfg = repo.get_contents(".github/agent-d.yml", ref=repo.default_branch)
    assert cfg.decoded_content.decode() == CONFIG
    with pytest.raises(UnknownObjectException):
        repo.get_contents(".github/missing.yml", ref="main")
    with pytest.raises(GithubException) as bad_ref:
        repo.get_contents(".github/agent-d.yml", ref="no-such-branch")
    assert bad_ref.value.status == 404
    listing = repo.get_contents("crate/src", ref="feature")
    assert len(listing) == 5 and listing[0].type == "file"

    run = repo.create_check_run("agent-d", head, status="queued", external_id="run-1")
    assert run.status == "queued" and run.conclusion is None
    run.edit(status="in_progress")
    run.edit(conclusion="neutral", output={"title": "agent-d", "summary": "no kernels", "annotations": []})
    assert (run.status, run.conclusion) == ("completed", "neutral")
    runs = list(repo.get_commit(head).get_check_runs())
    assert [(r.id, r.conclusion) for r in runs] == [(run.id, "neutral")]
    assert runs[0].pull_requests[0].number == 1

    review = pr.create_review(
        commit=repo.get_commit(head), body="<!-- agent-d:verdict -->\nok", event="COMMENT"
    )
    assert review.state == "COMMENTED" and review.commit_id == head
    assert [r.id for r in pr.get_reviews()] == [review.id]
    # counts are per pull request: a review with inline comments on another PR does not count here
    fake.commit("acme/kernels", "other", {"lib.py": "x = 3\n"}, "other change", author="alice")
    other = repo.get_pull(fake.open_pr("acme/kernels", None, "other", "Other", "alice").number)
    other.create_review(
        commit=repo.get_commit(other.head.sha),
        body="inline",
        event="COMMENT",
        comments=[{"path": "lib.py", "position": 1, "body": "here"}],
    )
    assert (repo.get_pull(other.number).review_comments, repo.get_pull(1).review_comments) == (1, 0)

    comment = pr.create_issue_comment("<!-- agent-d:status -->\nqueued")
    comment.edit("<!-- agent-d:status -->\ndone")
    assert [c.body for c in pr.get_issue_comments()] == ["<!-- agent-d:status -->\ndone"]
    reaction = comment.create_reaction("rocket")
    assert reaction.content == "rocket"
    assert comment.create_reaction("rocket").id == reaction.id  # the same reaction twice: 200, not a new one
    comment.delete()
    assert list(pr.get_issue_comments()) == []

    assert repo.get_collaborator_permission("maint") == "write"
    assert repo.get_collaborator_role_name("maint") == "maintain"
    assert repo.get_collaborator_permission("tri") == "read"
    assert repo.get_collaborator_permission("acme") == "admin"
    with pytest.raises(UnknownObjectException):
        repo.get_collaborator_permission("nobody-at-all")

    commit = repo.get_commit(head)
    assert commit.commit.message == "add kernels" and len(list(commit.files)) == 6
    status = commit.create_status("success", description="ok", context="agent-d/legacy")
    assert status.state == "success" and commit.get_combined_status().state == "success"

    with pytest.raises(GithubException) as not_a_user:  # an App's token is no user, as on GitHub
        _ = gh.get_user().login
    assert not_a_user.value.status == 403
    assert gh.get_rate_limit().rate.limit == 5000
    assert [e.path for e in fake.log if e.status >= 400] == [
        "/repos/acme/kernels/contents/.github/missing.yml",
        "/repos/acme/kernels/contents/.github/agent-d.yml",
        "/repos/acme/kernels/collaborators/nobody-at-all/permission",
        "/user",
    ]


def test_check_run_annotations_take_50_a_request_and_are_appended(github_fake):
    fake = github_fake
    scenario(fake)
    repo = client(fake).get_repo("acme/kernels")
    run = repo.create_check_run("agent-d", fake.branch_sha("acme/kernels", "feature"))

    def note(line: int, **more) -> dict:
        return {"path": "lib.py", "start_line": line, "end_line": line, "annotation_level": "failure",
                "message": f"line {line}", **more}  # fmt: skip

    out = {"title": "t", "summary": "s"}
    run.edit(conclusion="failure", output={**out, "annotations": [note(n) for n in range(1, 51)]})
    run.edit(output={**out, "annotations": [note(51, start_column=2, end_column=4)]})
    shown = list(run.get_annotations())
    assert [a.start_line for a in shown] == list(range(1, 52))
    assert (shown[-1].start_column, shown[-1].end_column, shown[0].start_column) == (2, 4, None)
    assert shown[0].blob_href.endswith(f"/blob/{run.head_sha}/lib.py")
    refused = [
        [note(n) for n in range(1, 52)],  # 51 in one request
        [{**note(3), "end_line": 4, "start_column": 1, "end_column": 2}],  # columns across lines
        [note(0)],
        [note(1, title="x" * 256)],
    ]
    for batch in refused:
        with pytest.raises(GithubException) as answer:
            run.edit(output={**out, "annotations": batch})
        assert answer.value.status == 422
    with pytest.raises(GithubException):  # the OpenAPI description's own rule: a known level
        run.edit(output={**out, "annotations": [note(1, annotation_level="error")]})
    assert len(list(run.get_annotations())) == 51
    fake.violations.clear()


def test_contract_violations_are_recorded(github_fake):
    fake = github_fake
    scenario(fake)
    gh = client(fake)
    pr = gh.get_repo("acme/kernels").get_pull(1)
    with pytest.raises(GithubException) as bad_event:
        pr.create_review(body="x", event="LGTM")
    assert bad_event.value.status == 422
    assert len(fake.violations) == 1 and "'LGTM' is not one of" in fake.violations[0]
    assert not fake.calls("GET", r"/reviews$") and list(pr.get_reviews()) == []  # nothing was created

    with pytest.raises(GithubException) as no_body:
        pr.create_review(event="COMMENT")  # schema-valid, but GitHub refuses it
    assert no_body.value.status == 422 and "body is required" in fake.violations[1]

    with pytest.raises(GithubException) as unknown:
        gh.requester.requestJsonAndCheck("GET", "/repos/acme/kernels/no-such-endpoint")
    assert unknown.value.status == 501
    with pytest.raises(GithubException) as unmodelled:
        gh.requester.requestJsonAndCheck("GET", "/repos/acme/kernels/branches")
    assert unmodelled.value.status == 501 and "does not model" in fake.violations[-1]
    with pytest.raises(GithubException):
        gh.requester.requestJsonAndCheck("GET", "/repos/acme/kernels/pulls", parameters={"colour": "red"})
    assert "'colour' is not described" in fake.violations[-1]
    assert len(fake.violations) == 5
    fake.violations.clear()


def test_502_after_effect_leaves_one_review(github_fake):
    fake = github_fake
    scenario(fake)
    pr = client(fake).get_repo("acme/kernels").get_pull(1)
    fake.inject("POST", r"/pulls/1/reviews$", 502, after_effect=True)
    with pytest.raises(GithubException) as exc:
        pr.create_review(body="verdict", event="COMMENT")
    assert exc.value.status == 502
    assert len(list(pr.get_reviews())) == 1
    assert len(fake.calls("POST", r"/reviews$")) == 1


def test_retrying_posts_duplicates_after_a_502(github_fake):
    """Why the bot must not retry POST: PyGithub's default GithubRetry replays it."""
    fake = github_fake
    scenario(fake)
    gh = client(fake, retry=GithubRetry(total=2, backoff_factor=0))
    pr = gh.get_repo("acme/kernels").get_pull(1)
    fake.inject("POST", r"/issues/1/comments$", 502, after_effect=True)
    pr.create_issue_comment("status")
    assert len(list(pr.get_issue_comments())) == 2
    assert [e.status for e in fake.calls("POST", r"/comments$")] == [502, 201]


def test_rate_limit_injection(github_fake):
    fake = github_fake
    scenario(fake)
    gh = client(fake)
    fake.inject_primary_rate_limit("GET", r"^/repos/acme/kernels$", reset_in=30)
    with pytest.raises(RateLimitExceededException) as primary:
        gh.get_repo("acme/kernels")
    assert primary.value.headers["x-ratelimit-remaining"] == "0"
    fake.inject_secondary_rate_limit("POST", r"/comments$", retry_after=7)
    with pytest.raises(RateLimitExceededException) as secondary:
        gh.get_repo("acme/kernels").get_pull(1).create_issue_comment("hi")
    assert secondary.value.headers["retry-after"] == "7"
    assert "secondary rate limit" in secondary.value.data["message"]
    # GithubRetry honours Retry-After and then succeeds.
    fake.inject_secondary_rate_limit("GET", r"/pulls/1$", retry_after=1)
    t0 = time.monotonic()
    assert client(fake, retry=GithubRetry(total=3)).get_repo("acme/kernels").get_pull(1).number == 1
    assert time.monotonic() - t0 >= 0.9


def test_push_moves_head_and_files(github_fake, tmp_path):
    fake = github_fake
    scenario(fake)
    gh = client(fake)
    old = gh.get_repo("acme/kernels").get_pull(1).head.sha
    work = git.Repo.clone_from(fake.clone_url("acme/kernels"), tmp_path / "wc", branch="feature")
    (tmp_path / "wc" / "crate" / "glue.rs").write_text("// generated\n")
    work.index.add(["crate/glue.rs"])
    work.index.commit("agent-d: glue", author=git.Actor("agent-d[bot]", "bot@example.invalid"))
    work.remotes.origin.push("HEAD:refs/heads/feature")
    pr = gh.get_repo("acme/kernels").get_pull(1)
    assert pr.head.sha == work.head.commit.hexsha != old
    assert "crate/glue.rs" in {f.filename for f in pr.get_files()}
    assert pr.commits == 2
    hook = fake.webhook("pull_request", "synchronize")
    assert hook["pull_request"]["head"]["sha"] == pr.head.sha and hook["action"] == "synchronize"


def test_fork_pr_and_rejected_pushes(github_fake, tmp_path):
    fake = github_fake
    fake.create_repo("acme", "kernels", {"README.md": "hello\n"})
    fake.fork("acme/kernels", "mallory")
    fake.commit("mallory/kernels", "patch-1", {"crate/src/x.rs": "fn x() {}\n"}, author="mallory")
    fake.open_pr("acme/kernels", "mallory/kernels", "patch-1", "x", "mallory", maintainer_can_modify=False)
    pr = client(fake).get_repo("acme/kernels").get_pull(1)
    assert pr.head.repo.full_name == "mallory/kernels" and pr.head.repo.fork
    assert pr.base.repo.full_name == "acme/kernels" and not pr.maintainer_can_modify
    assert pr.head.repo.clone_url == fake.clone_url("mallory/kernels")
    assert [(f.filename, f.status) for f in pr.get_files()] == [("crate/src/x.rs", "added")]

    work = git.Repo.clone_from(pr.head.repo.clone_url, tmp_path / "wc", branch="patch-1")
    fake.push_rejection_hook(
        "mallory/kernels", "refusing to allow an App to create or update workflow", r"^\.github/workflows/"
    )
    (tmp_path / "wc" / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / "wc" / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    work.index.add([".github/workflows/ci.yml"])
    work.index.commit("touch a workflow")
    with pytest.raises(git.GitCommandError) as rejected:
        work.remotes.origin.push("HEAD:refs/heads/patch-1").raise_if_error()
    assert "failed to push" in str(rejected.value)
    with pytest.raises(git.GitCommandError) as rejected:  # the plain git CLI shows the hook's reason
        work.git.push("origin", "HEAD:refs/heads/patch-1")
    assert "remote: refusing to allow an App" in rejected.value.stderr
    work.git.reset("--hard", "HEAD~1")
    (tmp_path / "wc" / "glue.rs").write_text("// ok\n")
    work.index.add(["glue.rs"])
    work.index.commit("glue")
    work.remotes.origin.push("HEAD:refs/heads/patch-1").raise_if_error()
    assert client(fake).get_repo("acme/kernels").get_pull(1).head.sha == work.head.commit.hexsha

    fake.push_rejection_hook("mallory/kernels", "maintainer edits are disabled")
    (tmp_path / "wc" / "glue.rs").write_text("// again\n")
    work.index.add(["glue.rs"])
    work.index.commit("again")
    with pytest.raises(git.GitCommandError, match="maintainer edits are disabled"):
        work.git.push("origin", "HEAD:refs/heads/patch-1")


def _strings(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
    elif isinstance(obj, str):
        yield obj


@pytest.mark.parametrize(
    ("event", "action"),
    [
        ("pull_request", "opened"),
        ("pull_request", "synchronize"),
        ("pull_request", "reopened"),
        ("pull_request", "ready_for_review"),
        ("issue_comment", "created"),
        ("check_run", "rerequested"),
        ("push", None),
        ("workflow_dispatch", None),
    ],
)
def test_webhook_payloads(github_fake, tmp_path, event, action):
    fake = github_fake
    pull = scenario(fake)
    head = fake.pr_head_sha(pull)
    gh = client(fake)
    if event == "check_run":
        gh.get_repo("acme/kernels").create_check_run(
            "agent-d", head, status="completed", conclusion="failure"
        )
    payload = (
        fake.webhook(event, action, sender="maint")
        if event != "issue_comment"
        else fake.webhook(event, action, body="/agent-d rerun", commenter="maint")
    )
    assert payload["repository"]["full_name"] == "acme/kernels"
    assert payload["sender"]["login"] == "maint"
    urls = [s for s in _strings(payload) if s.startswith("http")]
    assert urls and all(u.startswith(fake.base_url) for u in urls), [u for u in urls if "github.com" in u][:3]
    if event == "pull_request":
        assert payload["action"] == action and payload["number"] == 1
        assert payload["pull_request"]["head"]["sha"] == head
        # A URL from the payload is usable by PyGithub as-is.
        assert (
            gh.get_repo(payload["repository"]["full_name"]).get_pull(payload["number"]).title == "Add kernels"
        )
    elif event == "issue_comment":
        assert payload["comment"]["body"] == "/agent-d rerun" and payload["issue"]["number"] == 1
        assert "pull_request" in payload["issue"]
        comments = gh.get_repo("acme/kernels").get_issue(1).get_comments()
        assert [c.id for c in comments] == [payload["comment"]["id"]]
    elif event == "check_run":
        assert payload["check_run"]["head_sha"] == head and payload["check_run"]["name"] == "agent-d"
    elif event == "push":
        assert payload["ref"] == "refs/heads/main" and payload["after"] == fake.branch_sha(
            "acme/kernels", "main"
        )
    else:
        assert payload["ref"] == "refs/heads/main"
    path = (
        fake.write_webhook(tmp_path / "event.json", event, action, sender="maint")
        if event != "check_run"
        else None
    )
    if path is not None:
        assert json.loads(Path(path).read_text())["repository"]["name"] == "kernels"
    body = json.dumps(payload).encode()
    assert sign(body, "s3cret").startswith("sha256=") and len(sign(body, "s3cret")) == 71


def test_app_installation_auth_and_reviews(github_fake):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from github import GithubIntegration

    fake = github_fake
    scenario(fake)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    integration = GithubIntegration(
        base_url=fake.base_url,
        auth=Auth.AppAuth(1, pem),
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    installation = integration.get_repo_installation("acme", "kernels")
    token = integration.get_access_token(installation.id).token
    assert fake.tokens[token] == "agent-d[bot]"
    gh = Github(
        base_url=fake.base_url,
        auth=Auth.Token(token),
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    repo = gh.get_repo("acme/kernels")
    assert repo.get_branch("feature").commit.sha == fake.branch_sha("acme/kernels", "feature")
    pr = repo.get_pull(1)
    head = repo.get_commit(pr.head.sha)
    inline = [{"path": "crate/src/k0.rs", "line": 1, "side": "RIGHT", "body": "generated glue"}]
    blocking = pr.create_review(commit=head, body="fails", event="REQUEST_CHANGES", comments=inline)
    assert blocking.user.login == "agent-d[bot]" and blocking.state == "CHANGES_REQUESTED"
    blocking.dismiss("fixed in a later run")
    assert [r.state for r in pr.get_reviews()] == ["DISMISSED"]
    with pytest.raises(GithubException) as bad_path:
        pr.create_review(commit=head, body="x", event="COMMENT", comments=[dict(inline[0], path="nope.rs")])
    assert bad_path.value.status == 422 and "Path could not be resolved" in fake.violations[-1]
    fake.violations.clear()
    assert [e.path for e in fake.log[:2]] == [
        "/repos/acme/kernels/installation",
        "/app/installations/4242/access_tokens",
    ]


def test_speed_benchmark_runs_and_prints_its_figures():
    """benchmarks/ghfake_speed.py drives the fake directly; keep it in step with its API."""
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "ghfake_speed.py"
    out = subprocess.run(
        [sys.executable, str(script), "--runs", "1"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == ["spec", "route", "round"]
