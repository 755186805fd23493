"""One agent-d writer per pull request at a time, held on GitHub itself.

GitHub has no create-if-absent for check runs, reviews or comments, so "look, then create"
alone lets concurrent runs (a redelivered event, a re-run job) both see nothing and both
create.  The lock is agent-d's own 👀 reaction on the pull request: GitHub keeps one
reaction per user and content, answering 201 to the request that created it and 200 to
every other ("Reaction exists"), which makes the create an atomic test-and-set shared by
all workflow runs.  Releasing deletes the reaction by its id, so a run never releases a
lock someone else took after breaking its own stale one.  A reaction older than ``stale``
seconds is a run that died holding it and is removed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from github import GithubException

log = logging.getLogger(__name__)
CONTENT = "eyes"
STALE_S = 300.0  # far longer than any held section (API calls and one push)
WAIT_S = 360.0  # longer than STALE_S: a waiter always outlives a dead holder's lock


class LockTimeout(RuntimeError):
    pass


@contextmanager
def pr_lock(repo, number: int, wait: float | None = None, stale: float | None = None) -> Iterator[None]:
    wait = WAIT_S if wait is None else wait
    stale = STALE_S if stale is None else stale
    url = f"{repo.url}/issues/{number}/reactions"
    requester = repo.requester
    reaction_id = _acquire(requester, url, wait, stale)
    try:
        yield
    finally:
        _delete(requester, url, reaction_id)


def _acquire(requester, url: str, wait: float, stale: float) -> int:
    deadline = time.monotonic() + wait
    pause = 0.1
    while True:
        status, headers, text = requester.requestJson("POST", url, input={"content": CONTENT})
        if status not in (200, 201):
            raise GithubException(status, _json(text), headers)
        reaction = _json(text)
        if status == 201:
            return reaction["id"]
        age = time.time() - _epoch(reaction.get("created_at"))
        if age > stale:
            log.warning("pull request lock held for %.0f s: a run died holding it; removing it", age)
            _delete(requester, url, reaction["id"])
        elif time.monotonic() > deadline:
            raise LockTimeout(
                f"another agent-d run has been writing to this pull request for {age:.0f} s; gave up "
                f"after {wait:.0f} s (its lock is the 👀 reaction by agent-d on the pull request)"
            )
        time.sleep(pause)
        pause = min(pause * 2, 2.0)


def _delete(requester, url: str, reaction_id: int) -> None:
    """Remove the reaction (404: a waiter already removed it as stale).  A failure is logged, not
    raised: the lock then goes stale and the next run removes it."""
    try:
        status, _, text = requester.requestJson("DELETE", f"{url}/{reaction_id}")
    except Exception as exc:
        status, text = 0, type(exc).__name__
    if status not in (204, 404):
        log.warning(
            "could not release the pull request lock (%s %s); it expires in %.0f s", status, text, STALE_S
        )


def _json(text: str):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def _epoch(stamp: str | None) -> float:
    try:
        return datetime.fromisoformat(stamp or "").timestamp()
    except ValueError:
        return time.time()  # no usable date: treat the lock as fresh, never break it early
