"""Writes to GitHub that stay single: check runs, the review, the sticky comment, reactions.

Every create is "look, then create": the object carries a hidden marker (or, for check
runs, a name + head sha + external id) and is searched for first.  A create that fails
with a 5xx or a rate limit is never replayed blindly: the lookup runs again, and only
if the object is still absent is the create repeated.  A failed lookup raises (fail
closed) rather than risking a duplicate.  Everything posted is redacted and truncated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from github import GithubException
from github.GithubObject import NotSet

from bot.build.types import Annotation
from bot.github.redact import REDACTOR

log = logging.getLogger(__name__)
T = TypeVar("T")

STATUS_MARKER = "<!-- agent-d:status -->"
MAX_BODY = 60000  # GitHub's limit is 65,536 characters per comment / review / check output field
MAX_ANNOTATIONS = 50  # the Checks API's limit per request; further updates append more


def review_marker(sha: str) -> str:
    return f"<!-- agent-d:verdict sha={sha} -->"


def clip(text: str, limit: int = MAX_BODY) -> str:
    text = REDACTOR.redact(text)
    if len(text) <= limit:
        return text
    note = "\n\n_[truncated by agent-d: the full text is in the workflow artifact]_\n"
    return text[: limit - len(note)] + note


def _transient(exc: Exception) -> bool:
    if not isinstance(exc, GithubException):
        return isinstance(exc, (ConnectionError, TimeoutError, OSError))
    if exc.status >= 500 or exc.status == 429:
        return True
    text = str(exc.data).lower() if exc.data else ""
    return exc.status == 403 and ("rate limit" in text or "retry-after" in str(exc.headers or {}).lower())


def create_once(
    lookup: Callable[[], T | None],
    create: Callable[[], T],
    what: str,
    attempts: int = 3,
    pause: float = 1.0,
) -> tuple[T, bool]:
    """Return (object, created). ``lookup`` runs before every create attempt."""
    last: Exception | None = None
    for attempt in range(attempts):
        found = lookup()
        if found is not None:
            if attempt:
                log.info("%s: found after a failed create; not creating again", what)
            return found, False
        try:
            return create(), True
        except Exception as exc:
            if not _transient(exc):
                raise
            last = exc
            log.warning("%s: create failed (%s); looking again before any retry", what, _describe(exc))
            time.sleep(pause * (attempt + 1))
    found = lookup()
    if found is not None:
        return found, False
    assert last is not None
    raise last


def _describe(exc: Exception) -> str:
    if isinstance(exc, GithubException):
        return f"HTTP {exc.status}"
    return type(exc).__name__


# --------------------------------------------------------------------------- check runs


def find_check_run(repo, sha: str, name: str, external_id: str | None = None):
    """The newest check run ``name`` on ``sha`` (with ``external_id`` when given), or None."""
    runs = [r for r in _check_runs(repo, sha, name) if r.name == name]
    if external_id is not None:
        runs = [r for r in runs if (r.external_id or "") == external_id]
    return max(runs, key=lambda r: r.id) if runs else None


def open_check_runs(repo, sha: str, name: str) -> list:
    return [r for r in _check_runs(repo, sha, name) if r.status != "completed"]


def _check_runs(repo, sha: str, name: str):
    # GitHub lists only the newest run of each name unless asked for all; a key (external_id)
    # can be on an older run of the same name, and "already handled" must see it.
    return repo.get_commit(sha).get_check_runs(check_name=name, filter="all")


def ensure_check_run(
    repo,
    sha: str,
    name: str,
    external_id: str,
    title: str,
    summary: str,
    details_url: str = "",
    conclusion: str = "",
    annotations: Sequence[Annotation] = (),
) -> tuple[object, bool]:
    """Find or create the check run ``name``/``external_id`` on ``sha``, status queued, or with
    ``conclusion`` created completed in the same request (one write, not two), with the first 50
    ``annotations`` (the caller appends the rest: ``append_annotations``).

    Returns (run, created). ``created`` is False only when the run already existed before this
    call; a run that shows up after one of this call's creates failed (GitHub stored it, then
    answered 5xx) counts as created here.
    """
    lookups = 0

    def lookup():
        nonlocal lookups
        lookups += 1
        return find_check_run(repo, sha, name, external_id)

    def create():
        kwargs: dict = {"details_url": details_url} if details_url else {}
        output = {"title": clip(title, 200), "summary": clip(summary)}
        if conclusion:
            kwargs.update(status="completed", conclusion=conclusion)
            batches = _batches(annotations)
            output.update({"annotations": batches[0]} if batches else {})
        else:
            kwargs["status"] = "queued"
        return repo.create_check_run(
            name=name, head_sha=sha, external_id=external_id, output=output, **kwargs
        )

    run, created = create_once(lookup, create, f"check run {name}@{sha[:12]}")
    return run, created or lookups > 1


def conclude(
    check_run,
    conclusion: str,
    title: str,
    summary: str,
    text: str = "",
    annotations: Sequence[Annotation] = (),
) -> None:
    """Conclude the run with its output; the annotations go 50 a request (the Checks API's limit):
    the first with the conclusion, the rest in further updates, which GitHub appends."""
    output = {"title": clip(title, 200), "summary": clip(summary)}
    if text:
        output["text"] = clip(text)
    batches = _batches(annotations)
    first = {"annotations": batches[0]} if batches else {}
    check_run.edit(status="completed", conclusion=conclusion, output={**output, **first})
    append_annotations(check_run, title, summary, annotations)


def append_annotations(check_run, title: str, summary: str, annotations: Sequence[Annotation]) -> None:
    """The annotations past the first 50, 50 an update (GitHub appends them to the run's)."""
    output = {"title": clip(title, 200), "summary": clip(summary)}
    for batch in _batches(annotations)[1:]:
        check_run.edit(output={**output, "annotations": batch})


def _batches(annotations: Sequence[Annotation]) -> list[list[dict]]:
    return [
        [annotation_payload(a) for a in annotations[i : i + MAX_ANNOTATIONS]]
        for i in range(0, len(annotations), MAX_ANNOTATIONS)
    ]


def annotation_payload(place: Annotation) -> dict:
    """One annotation as the Checks API takes it, its text redacted; columns only where it has them."""
    payload = {
        "path": place.path,
        "start_line": place.start_line,
        "end_line": place.end_line,
        "annotation_level": place.level,
        "title": clip(place.title, 255),
        "message": clip(place.message, 60000),
    }
    if place.start_column and place.start_line == place.end_line:
        payload.update(start_column=place.start_column, end_column=max(place.end_column, place.start_column))
    return payload


# --------------------------------------------------------------------------- marked posts


def _mine(user, bots: tuple[str, ...]) -> bool:
    return user is not None and (user.login in bots or getattr(user, "type", "") == "Bot")


def find_marked(items, marker: str, bots: tuple[str, ...]):
    """The first of ``items`` (reviews, comments) that carries ``marker`` and that agent-d posted.

    Anyone can write the marker into their own comment; only the bot's own count, so a planted
    marker never stands in for (and suppresses) the bot's post.
    """
    return next((i for i in items if marker in (i.body or "") and _mine(i.user, bots)), None)


# --------------------------------------------------------------------------- review


def post_review(
    repo, pr, sha: str, body: str, bots: tuple[str, ...], comments: list[dict] | None = None
) -> tuple[object, str]:
    """One COMMENT review per commit, marked; an edit (or nothing) if it already exists.
    ``comments`` (suggested changes on the pull request's lines) go with the review when it is
    created: a review's comments cannot be edited with it.

    Returns (review, action) with action in created | edited | unchanged.
    """
    marker = review_marker(sha)
    full = clip(f"{marker}\n{body}")

    review, created = create_once(
        lambda: find_marked(pr.get_reviews(), marker, bots),
        lambda: pr.create_review(
            commit=repo.get_commit(sha), body=full, event="COMMENT", comments=comments or NotSet
        ),
        "review",
    )
    if created:
        return review, "created"
    if (review.body or "").strip() == full.strip():
        return review, "unchanged"
    review.edit(full)
    return review, "edited"


# --------------------------------------------------------------------------- sticky comment


def upsert_sticky(pr, body: str, bots: tuple[str, ...]) -> tuple[object, str]:
    """The one status comment, edited in place. Returns (comment, created|edited|unchanged)."""
    full = clip(f"{STATUS_MARKER}\n{body}")

    comment, created = create_once(
        lambda: find_marked(pr.get_issue_comments(), STATUS_MARKER, bots),
        lambda: pr.create_issue_comment(full),
        "status comment",
    )
    if created:
        return comment, "created"
    if (comment.body or "").strip() == full.strip():
        return comment, "unchanged"
    comment.edit(full)
    return comment, "edited"


def react(comment, content: str) -> None:
    """Add a reaction; reactions are idempotent on GitHub, and a failed one never fails the run."""
    try:
        comment.create_reaction(content)
    except GithubException as exc:
        log.info("reaction %s failed (HTTP %s); ignored", content, exc.status)
