"""REST handlers for checks, statuses, commits and contents (git-backed data)."""

from __future__ import annotations

from . import gitops
from .handlers import Ctx, Reply, _unprocessable, handles
from .state import ApiError, CheckRun, Status, now

MAX_CHECK_TEXT = 65535
MAX_ANNOTATIONS = 50  # per request; each update appends its own to the run's
MAX_ANNOTATION_TITLE = 255
MAX_ANNOTATION_TEXT = 64 * 1024


def _apply_check_fields(cr: CheckRun, body: dict) -> None:
    for key in ("name", "details_url", "external_id", "started_at", "completed_at", "status", "conclusion"):
        if key in body:
            setattr(cr, key, body[key])
    if "actions" in body:
        if len(body["actions"]) > 3:
            raise _unprocessable("A check run can have at most 3 actions", "actions", "CheckRun")
        cr.actions = list(body["actions"])
    if "output" in body:
        out = dict(body["output"])
        for key in ("summary", "text"):
            if len(out.get(key) or "") > MAX_CHECK_TEXT:
                raise _unprocessable(
                    f"output.{key} is too long (maximum is {MAX_CHECK_TEXT})", key, "CheckRun"
                )
        new = list(out.get("annotations", []))
        if len(new) > MAX_ANNOTATIONS:
            raise _unprocessable(
                f"at most {MAX_ANNOTATIONS} annotations per request", "annotations", "CheckRun"
            )
        for annotation in new:
            _check_annotation(annotation)
        out["annotations"] = list(cr.output.get("annotations", [])) + new
        cr.output = out
    if body.get("conclusion") is not None:
        cr.status = "completed"
    if cr.status == "completed":
        if cr.conclusion is None:
            raise _unprocessable("conclusion must be set when status is completed", "conclusion", "CheckRun")
        cr.completed_at = cr.completed_at or now()
    if cr.status == "in_progress":
        cr.started_at = cr.started_at or now()


def _check_annotation(a: dict) -> None:
    """GitHub's rules the OpenAPI description states only in words (docs: "Update a check run")."""
    if a["start_line"] < 1 or a["end_line"] < a["start_line"]:
        raise _unprocessable("start_line must be at least 1 and end_line at least start_line", "annotations")
    columns = [a[k] for k in ("start_column", "end_column") if k in a]
    if columns and a["start_line"] != a["end_line"]:
        raise _unprocessable("start_column and end_column are only allowed on a single line", "annotations")
    if any(c < 1 for c in columns):
        raise _unprocessable("columns start at 1", "annotations")
    if len(a.get("title") or "") > MAX_ANNOTATION_TITLE:
        raise _unprocessable(f"title is longer than {MAX_ANNOTATION_TITLE} characters", "annotations")
    for key in ("message", "raw_details"):
        if len((a.get(key) or "").encode()) > MAX_ANNOTATION_TEXT:
            raise _unprocessable(f"{key} is larger than 64 KB", "annotations")


@handles("checks/list-annotations")
def list_annotations(ctx: Ctx) -> Reply:
    cr = _check_run(ctx)
    html = ctx.render.f.html(f"{cr.repo.full_name}/blob/{cr.head_sha}/")
    rows = [
        {
            "path": a["path"],
            "blob_href": html + a["path"],
            "start_line": a["start_line"],
            "end_line": a["end_line"],
            "start_column": a.get("start_column"),
            "end_column": a.get("end_column"),
            "annotation_level": a["annotation_level"],
            "title": a.get("title"),
            "message": a["message"],
            "raw_details": a.get("raw_details"),
        }
        for a in cr.output.get("annotations", [])
    ]
    chunk, headers = ctx.page(rows)
    return Reply(200, chunk, headers)


@handles("checks/create")
def create_check_run(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.body["head_sha"]
    if ctx.state.rev(repo.git_dir, sha) != sha:
        raise _unprocessable(f"No commit found for SHA: {sha}", "head_sha", "CheckRun")
    cr = CheckRun(ctx.state.next_id(), repo, ctx.body["name"], sha, started_at=now())
    _apply_check_fields(cr, ctx.body)
    ctx.state.check_runs[cr.id] = cr
    return Reply(201, ctx.render.check_run(cr))


def _check_run(ctx: Ctx) -> CheckRun:
    cr = ctx.state.check_runs.get(ctx.path["check_run_id"])
    if cr is None or cr.repo is not ctx.repo():
        raise ApiError(404, "Not Found")
    return cr


@handles("checks/get")
def get_check_run(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.check_run(_check_run(ctx)))


@handles("checks/update")
def update_check_run(ctx: Ctx) -> Reply:
    cr = _check_run(ctx)
    _apply_check_fields(cr, ctx.body or {})
    return Reply(200, ctx.render.check_run(cr))


@handles("checks/list-for-ref")
def list_check_runs(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.state.resolve(repo, ctx.path["ref"])
    runs = [c for c in ctx.state.check_runs.values() if c.repo is repo and c.head_sha == sha]
    if "check_name" in ctx.query:
        runs = [c for c in runs if c.name == ctx.query["check_name"]]
    if "status" in ctx.query:
        runs = [c for c in runs if c.status == ctx.query["status"]]
    if ctx.query.get("filter", "latest") == "latest":
        latest: dict[str, CheckRun] = {}
        for c in sorted(runs, key=lambda c: c.id):
            latest[c.name] = c
        runs = list(latest.values())
    runs.sort(key=lambda c: c.id, reverse=True)
    chunk, headers = ctx.page(runs)
    return Reply(
        200, {"total_count": len(runs), "check_runs": [ctx.render.check_run(c) for c in chunk]}, headers
    )


# ---------------------------------------------------------------------------- statuses
@handles("repos/create-commit-status")
def create_status(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.path["sha"]
    if ctx.state.rev(repo.git_dir, sha) != sha:
        raise _unprocessable(f"No commit found for SHA: {sha}", "sha", "Status")
    b = ctx.body
    s = Status(
        ctx.state.next_id(),
        repo,
        sha,
        b["state"],
        b.get("context") or "default",
        b.get("description"),
        b.get("target_url"),
        ctx.user,
    )
    ctx.state.statuses.append(s)
    return Reply(201, ctx.render.status(s))


def _statuses(ctx: Ctx) -> list[Status]:
    repo = ctx.repo()
    sha = ctx.state.resolve(repo, ctx.path["ref"])
    return sorted((s for s in ctx.state.statuses if s.repo is repo and s.sha == sha), key=lambda s: -s.id)


@handles("repos/list-commit-statuses-for-ref")
def list_statuses(ctx: Ctx) -> Reply:
    chunk, headers = ctx.page(_statuses(ctx))
    return Reply(200, [ctx.render.status(s) for s in chunk], headers)


@handles("repos/get-combined-status-for-ref")
def combined_status(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.state.resolve(repo, ctx.path["ref"])
    latest: dict[str, Status] = {}
    for s in reversed(_statuses(ctx)):
        latest[s.context] = s
    states = {s.state for s in latest.values()}
    overall = (
        "failure"
        if states & {"failure", "error"}
        else "pending"
        if states & {"pending"} or not states
        else "success"
    )
    api = ctx.render.f.api(f"repos/{repo.full_name}")
    body = {
        "state": overall,
        "statuses": [ctx.render.status(s) for s in latest.values()],
        "sha": sha,
        "total_count": len(latest),
        "repository": ctx.render.repo(repo, "minimal-repository"),
        "commit_url": f"{api}/commits/{sha}",
        "url": f"{api}/commits/{sha}/status",
    }
    return Reply(200, body)


# ---------------------------------------------------------------------------- git data
@handles("repos/get-commit")
def get_commit(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.state.resolve(repo, ctx.path["ref"])
    return Reply(200, ctx.render.commit(repo, sha))


@handles("repos/get-content")
def get_content(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    ref = ctx.query.get("ref") or repo.default_branch
    sha = ctx.state.resolve(repo, ref)
    path = ctx.path["path"].strip("/")
    found = gitops.read_path(repo.git_dir, sha, path)
    if found is None:
        raise ApiError(404, "Not Found")
    kind, data = found
    if kind == "file":
        blob, content = data  # type: ignore[misc]
        return Reply(200, ctx.render.content(repo, ref, "file", path, blob, len(content), content))
    entries = [ctx.render.content(repo, ref, k, p, s, size, None) for k, p, s, size in data]  # type: ignore[union-attr]
    return Reply(200, entries)
