"""What dispatch reads, besides who pushed, before a head may run without an approval of that commit.

Two rules, each read from the API only (dispatch runs no pull request code):

* **Edits of the tests or the runtime.** The port always takes the tests, every ``conftest.py``
  and the runtime from the base branch (bot/github/base_tree.py); a pull request that edits
  them still needs a maintainer's approval of its exact commit, whoever pushed it. The edits
  are read from the pull request's file list; the added kernels' own inputs are not edits of
  the runtime, and a file that is still as agent-d's newest commit on the pull request left it
  is agent-d's wiring, not the author's edit.
* **Pushes onto someone else's pull request.** A maintainer who pushes onto a pull request by
  someone who is not one (GitHub's "Update branch" included) vouches only for commits they
  wrote themselves on top of a commit that was itself trusted: a merge commit, or a commit
  written by anyone else, needs an approval of the exact head.

"Trusted" for a commit is agent-d's own record on it: a check run whose key says a trusted push,
an approved command, or agent-d's own generated commit (``+commit``), never a run's conclusion.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bot.github import render
from bot.github.path_classes import GUARDED, kernel_inputs, path_class

MAX_PUSHED_COMMITS = 30  # commits walked back from a pushed head to a trusted one
# keys of agent-d's check runs that mean the commit ran (or waited as a draft) trusted
# (auto, draft: a trusted push; c<comment>, r<check run>-<login>, d<run>, push: a command that ran)
_TRUSTED_KEY = re.compile(r"^(?:auto|draft|c\d+|r\d+-.+|push|d(?!raft).+)$")
_EXTERNAL = re.compile(r"^pr(?P<pr>\d+):(?P<sha>[0-9a-f]{40}):(?P<key>.+)$")


def is_trust_record(external_id: str, pr_number: int, sha: str, conclusion: str | None) -> bool:
    """Whether a check run of agent-d's with ``external_id``, on ``sha``, records ``sha`` as trusted."""
    m = _EXTERNAL.match(external_id or "")
    if m is None or int(m.group("pr")) != pr_number:
        return False
    key = m.group("key")
    if key.endswith("+commit"):  # finalize's check on the commit it pushed
        return True
    if m.group("sha") != sha or not _TRUSTED_KEY.match(key):
        return False
    # an `auto` run concluded action_required is a record from before untrusted pushes had a key
    return not (key == "auto" and conclusion == "action_required")


def recorded_trusted(repo, pr_number: int, sha: str, check_name: str) -> bool:
    runs = repo.get_commit(sha).get_check_runs(check_name=check_name, filter="all")
    return any(is_trust_record(r.external_id, pr_number, sha, r.conclusion) for r in runs)


def _agent_d_files(repo, pr, check_name: str) -> dict[str, str]:
    """{path: blob sha} of the files agent-d's newest commit on the pull request wrote (its message
    and finalize's check on it both say it is agent-d's)."""
    for commit in reversed(list(pr.get_commits())):
        if not render.is_bot_message(commit.commit.message):
            continue
        runs = repo.get_commit(commit.sha).get_check_runs(check_name=check_name, filter="all")
        if any((r.external_id or "").endswith("+commit") for r in runs):
            return {f.filename: f.sha for f in repo.get_commit(commit.sha).files}
    return {}


def guarded_edits(repo, pr, files: list, added_ops: list[str], check_name: str) -> list[str]:
    """The pull request's edits of its tests, a ``conftest.py`` or the runtime (sorted paths)."""
    inputs = {p for op in added_ops for p in kernel_inputs(op)}
    touched = []
    for f in files:
        paths = {f.filename, getattr(f, "previous_filename", None) or f.filename}
        if any(path_class(p) in GUARDED and p not in inputs for p in paths):
            touched.append(f)
    if not touched:
        return []
    ours = _agent_d_files(repo, pr, check_name)
    return sorted(f.filename for f in touched if f.status == "removed" or ours.get(f.filename) != f.sha)


def contract_edits(files: list, added_ops: list[str]) -> list[str]:
    """The host contracts of the ported kernels that the pull request adds or changes (sorted)."""
    contracts = {kernel_inputs(op)[1] for op in added_ops}
    return sorted(f.filename for f in files if f.filename in contracts and f.status != "removed")


def contract_reason(head: str, contracts: list[str]) -> str:
    return (
        f"commit {head} adds or changes a host contract ({render.path_list(contracts)}) written without "
        "write access to this repository. A contract steers the files agent-d generates and pushes, so it runs "
        "only for a maintainer's approval of its exact commit: after reviewing the contract, "
        + _approves(head)
    )


def guarded_reason(head: str, edits: list[str]) -> str:
    return (
        f"commit {head} edits the tests, a `conftest.py` or the TileGym runtime ({render.path_list(edits)}). "
        "agent-d builds and tests them from the base branch, not from the pull request; still, a pull request "
        "that edits them runs only for a maintainer's approval of its exact commit, whoever pushed it: after "
        "reviewing it, " + _approves(head)
    )


def _approves(head: str) -> str:
    return f"a maintainer comments `/agent-d rerun --sha {head}` (each new push needs a new approval)"


def foreign_commits(repo, head: str, pusher: str, trusted: Callable[[str], bool]) -> str:
    """Why the commits ``pusher`` put on top of the last trusted commit are not all their own plain
    commits; "" when they are."""
    sha = head
    for _ in range(MAX_PUSHED_COMMITS):
        commit = repo.get_commit(sha)
        if len(commit.parents) != 1:
            return f'commit {sha} is a merge commit (as GitHub\'s "Update branch" makes), which brings in commits nobody approved'
        author = commit.author.login if commit.author is not None else ""
        if author.lower() != pusher.lower():
            who = f"@{author}" if author else "an author GitHub does not know"
            return f"commit {sha} was written by {who}, not by @{pusher}, who pushed it"
        sha = commit.parents[0].sha
        if trusted(sha):
            return ""
    return f"none of the {MAX_PUSHED_COMMITS} commits below it was approved or pushed by a maintainer"


def foreign_reason(head: str, pusher: str, author: str, why: str) -> str:
    return (
        f"commit {head} was pushed by @{pusher} onto a pull request by @{author}, who is not a maintainer, and "
        f"{why}; after reviewing it, a maintainer approves exactly that commit by commenting "
        f"`/agent-d rerun --sha {head}` (each new push needs a new approval)"
    )
