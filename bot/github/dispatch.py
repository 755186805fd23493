"""``agent-d dispatch``: the trusted front door. Runs no PR code.

Reads the event, decides whether the PR adds kernels and whether the run is allowed,
creates the check run (queued) on the exact head commit, and emits the job matrix.
Everything it decides ends in a concluded or queued check: a PR without kernels gets
``neutral``, a fork PR waiting for a maintainer gets ``action_required``.
"""

from __future__ import annotations

import logging
import uuid

from github import GithubException

from bot.errors import UsageError
from bot.github import head_trust, host_check, publish, render
from bot.github.commands import Command, kernel_name_errors, parse_commands
from bot.github.config import Config, ConfigError, load_config
from bot.github.dispatch_result import DispatchResult
from bot.github.events import Event
from bot.github.kernels import added_kernels, checked_ops
from bot.github.pr_lock import pr_lock
from bot.github.redact import redact
from bot.github.trust import (
    WRITE_ROLES,
    Trust,
    approval_command,
    check_auto_run,
    check_user,
    is_fork,
    role_of,
)

log = logging.getLogger(__name__)
NO_KERNEL_TEXT = (
    "This pull request adds no `src/tilegym/ops/cutile_rs/<op>_kernel/kernel.rs`; nothing to port."
)


def _draft_key(trusted_push: bool) -> str:
    return "draft" if trusted_push else "draft-waiting"


def _auto_key(trusted_push: bool) -> str:
    """The key of a push's automatic run: it records who pushed, whatever the run's conclusion
    (a head that adds no kernel is concluded ``neutral`` either way), so a later command reads
    trust from the push and never from an outcome."""
    return "auto" if trusted_push else "auto-untrusted"


class Dispatcher:
    def __init__(self, gh, event: Event, bots: tuple[str, ...], run_ref: str = "", details_url: str = ""):
        self.gh = gh
        self.ev = event
        self.bots = bots
        self.run_ref = run_ref or uuid.uuid4().hex[:12]
        self.details_url = details_url
        self._files: list | None = None  # the pull request's file list, read once
        self._guarded: list[str] | None = None

    def _skip(self, reason: str, **kw) -> DispatchResult:
        log.info("dispatch: no run: %s", reason)
        return DispatchResult(False, reason, concurrency_group=f"agent-d-noop-{self.run_ref}", **kw)

    def run(self) -> DispatchResult:
        ev = self.ev
        if ev.kind == "ignored" or ev.pr_number is None:
            return self._skip(ev.reason or "no pull request in the event")
        self.repo = self.gh.get_repo(ev.repo)
        try:
            self.pr = self.repo.get_pull(ev.pr_number)
        except GithubException as exc:
            if exc.status == 404:
                return self._skip(f"#{ev.pr_number} is not a pull request")
            raise
        if self.pr.state != "open":
            return self._skip(f"pull request #{ev.pr_number} is {self.pr.state}")
        # One dispatch per PR at a time: a concurrent delivery of this event then finds the run
        # this one queued (every "look, then create" below happens under the lock).
        with pr_lock(self.repo, ev.pr_number):
            self.pr = self.repo.get_pull(ev.pr_number)  # the head as of holding the lock
            return self._decide()

    def _decide(self) -> DispatchResult:
        ev = self.ev
        head = self.pr.head.sha
        try:
            self.cfg = load_config(self.repo)
        except ConfigError as exc:
            self.cfg = Config()
            why = render.escape_md(str(exc))
            return self._conclude(head, "config", "failure", "agent-d configuration error", why)
        handler = getattr(self, f"_on_{ev.kind}")
        try:
            return handler(head)
        except Exception as exc:
            self._conclude_after_crash(head, exc)
            raise

    def _conclude_after_crash(self, head: str, exc: Exception) -> None:
        """A check this dispatch queued must not stay queued when dispatch itself fails."""
        try:
            for run in publish.open_check_runs(self.repo, head, self.cfg.check_name):
                if (run.external_id or "").startswith(f"pr{self.ev.pr_number}:{head}:"):
                    why = render.escape_md(redact(f"agent-d dispatch failed: {type(exc).__name__}: {exc}"))
                    publish.conclude(run, "failure", "agent-d error", why)
        except Exception:
            log.exception("could not conclude the check after an error")

    # ------------------------------------------------------------------ event kinds

    def _on_pull_request(self, head: str) -> DispatchResult:
        ev = self.ev
        if ev.head_sha and ev.head_sha != head:
            return self._skip(f"stale event: the head moved from {ev.head_sha[:12]} to {head[:12]}")
        if render.is_bot_message(self.repo.get_commit(head).commit.message):
            return self._skip("the head commit is agent-d's own; its check was concluded when it was pushed")
        # A draft gets its own notice key, so ready_for_review on the same head still queues "auto";
        # the key records whether the push was trusted, for when the draft is marked ready.
        draft_notice = self.pr.draft and not self.cfg.run_drafts
        trust = self._head_trust(head)
        key = _draft_key(trust.allowed) if draft_notice else _auto_key(trust.allowed)
        own = self._external(head, key)
        # Redelivery: the run this event makes already exists, so the first delivery already
        # cancelled what it superseded; anything open now is newer (or is that run) and stays.
        if publish.find_check_run(self.repo, head, self.cfg.check_name, own) is None:
            self._cancel_superseded([ev.before_sha] if ev.before_sha else [], head, keep=own)
        if draft_notice:
            return self._conclude(
                head,
                _draft_key(trust.allowed),
                "neutral",
                "draft pull request",
                "agent-d runs when it is ready for review.",
            )
        try:
            kernels = self._added_ops()
        except UsageError as exc:
            return self._bad_kernel_name(head, key, exc)
        if not kernels:
            ports = host_check.changed_ports(self._pr_files())
            if ports:  # a port's own host code changed: checked as it is, nothing pushed
                return self._host_check(head, key, ports)
            return self._conclude(head, key, "neutral", "no kernel files added", NO_KERNEL_TEXT)
        if not trust.allowed:
            result = self._conclude(head, key, "action_required", "waiting for a maintainer", trust.reason)
            if result.reason != "already handled":
                self._sticky(head, "Waiting for approval", trust.reason)
            return result
        return self._queue(head, key, kernels, commit=self.cfg.auto_commit, why=trust.reason)

    def _host_check(self, head: str, key: str, ports: list[str]) -> DispatchResult:
        """``agent-d check`` of each port whose host code the pull request changes (host_check.py)."""
        done = host_check.publish_check(
            self.repo, self.pr, head, ports, (self.cfg.check_name, self._external(head, key), self.details_url),
            self.bots,
        )  # fmt: skip
        if isinstance(done, str):  # nothing was checked: why
            title = "no kernel files added" if not done else "host code not checked"
            return self._conclude(head, key, "neutral", title, done or NO_KERNEL_TEXT)
        if done is None:
            return self._skip("already handled", pr=self.ev.pr_number, head_sha=head)
        conclusion, title, run_id = done
        return self._skip(
            title, pr=self.ev.pr_number, head_sha=head, check_run_id=run_id, conclusion=conclusion
        )

    def _head_trust(self, head: str) -> Trust:
        """May the head run without an approval of that commit? Decided on who pushed it, on what
        they pushed onto whose pull request, and on whether it edits the tests or the runtime
        (bot/github/head_trust.py)."""
        trust = self._push_trust(head)
        if not trust.allowed:
            return trust
        edits = self._guarded_edits()
        if edits:
            return Trust(False, head_trust.guarded_reason(head, edits), trust.role)
        contracts = self._contracts_without_write_access(trust.role)
        if contracts:
            return Trust(False, head_trust.contract_reason(head, contracts), trust.role)
        return trust

    def _contracts_without_write_access(self, pusher_role: str | None) -> list[str]:
        """The host contracts this pull request adds or changes, when whoever wrote them (the
        pusher of a fork's head, or the pull request's author) has no write access: a contract is
        typed data, but it still steers what agent-d pushes, so a maintainer approves the commit.
        A branch of this repository was pushed with write access; ``pusher_role`` None: judge by
        the author alone (a command's run, long after the push)."""
        if not is_fork(self.pr):
            return []
        files = self._pr_files()
        contracts = head_trust.contract_edits(files, [k.op for k in added_kernels(files)])
        if not contracts:
            return []
        writer = role_of(self.repo, self.pr.user.login) in WRITE_ROLES
        if writer and (pusher_role is None or pusher_role in WRITE_ROLES):
            return []
        return contracts

    def _push_trust(self, head: str) -> Trust:
        """Whether the head's push was trusted.

        Only ``synchronize`` names the pusher. ``opened`` does when its sender owns the fork the
        branch lives in. ``reopened`` and ``ready_for_review`` are clicks by anyone who may make
        them (a maintainer readying an outsider's draft approves no commit): for those, dispatch's
        own record of the push is read back, and without one the commit waits for an approval.
        """
        ev = self.ev
        names_pusher = ev.action == "synchronize" or (
            ev.action == "opened" and self._owns_head_repo(ev.sender)
        )
        if is_fork(self.pr) and not names_pusher and self._push_recorded(head):
            return Trust(True, "dispatch recorded a trusted push of this commit")
        pusher = ev.sender if names_pusher or not is_fork(self.pr) else ""
        trust = check_auto_run(self.gh, self.repo, self.cfg, self.pr, pusher=pusher, event=ev.action)
        if trust.allowed and pusher and is_fork(self.pr):
            return self._onto_outsider(head, pusher, trust)
        return trust

    def _onto_outsider(self, head: str, pusher: str, trust: Trust) -> Trust:
        """A trusted push onto the pull request of someone who is not trusted vouches only for the
        pusher's own plain commits on top of a trusted commit ("Update branch" merges need approval)."""
        author = self.pr.user.login
        if author.lower() == pusher.lower() or check_user(self.gh, self.repo, self.cfg, author).allowed:
            return trust
        why = head_trust.foreign_commits(self.repo, head, pusher, self._trusted_commit)
        return (
            Trust(False, head_trust.foreign_reason(head, pusher, author, why), trust.role) if why else trust
        )

    def _trusted_commit(self, sha: str) -> bool:
        return head_trust.recorded_trusted(self.repo, self.ev.pr_number, sha, self.cfg.check_name)

    def _owns_head_repo(self, login: str) -> bool:
        head_repo = self.pr.head.repo
        return head_repo is not None and login != "" and head_repo.owner.login == login

    def _on_comment(self, head: str) -> DispatchResult:
        ev = self.ev
        cmds = parse_commands(ev.comment_body)
        if not cmds:
            return self._skip("the comment holds no /agent-d command")
        cmd = cmds[0]
        comment = self.repo.get_issue(ev.pr_number).get_comment(ev.comment_id)
        publish.react(comment, "eyes")
        key = f"c{ev.comment_id}"
        if cmd.name == "help":
            self._reply(key, f"@{ev.sender} here is what agent-d understands.", with_help=True)
            return self._skip("help requested")
        if cmd.name == "invalid":
            publish.react(comment, "confused")
            self._reply(
                key,
                f"@{ev.sender} agent-d did not understand {render.code_span(cmd.line)}: "
                f"{render.escape_md(cmd.error)}",
                with_help=True,
            )
            return self._skip(f"invalid command: {cmd.error}")
        return self._command(head, cmd, key, comment)

    def _on_check_rerun(self, head: str) -> DispatchResult:
        # Re-run on a check approves the commit that check is on, and only that one.
        cmd = Command("rerun", sha=self.ev.head_sha)
        # keyed by who asked too: an outsider's refused click must not stand in for a maintainer's
        return self._command(head, cmd, f"r{self.ev.check_run_id}-{self.ev.sender}", None)

    def _on_dispatch(self, head: str) -> DispatchResult:
        # whoever may start a workflow has write access; the sha input still binds what runs
        cmd = Command("rerun", kernels=self.ev.kernels, sha=self.ev.head_sha)
        return self._command(head, cmd, f"d{self.run_ref}", None, trusted=True)

    def _on_push(self, head: str) -> DispatchResult:
        if self.ev.head_sha != head:
            return self._skip(
                f"pull-request/{self.ev.pr_number} is at {self.ev.head_sha[:12]}, the PR head at {head[:12]}"
            )
        if render.is_bot_message(self.repo.get_commit(head).commit.message):
            return self._skip("the head commit is agent-d's own")
        cmd = Command("rerun", sha=self.ev.head_sha)  # the commit copy-pr-bot mirrored, and only it
        return self._command(head, cmd, "push", None, trusted=True)

    # ------------------------------------------------------------------ steps

    def _command(self, head: str, cmd: Command, key: str, comment, trusted: bool = False) -> DispatchResult:
        ev = self.ev
        if not trusted:
            trust = check_user(self.gh, self.repo, self.cfg, ev.sender)
            if not trust.allowed:
                if comment is not None:
                    publish.react(comment, "confused")
                self._reply(
                    key, f"Sorry, agent-d will not run `/agent-d {cmd.name}` for you: {trust.reason}."
                )
                return self._skip(f"refused: {trust.reason}")
        if cmd.sha and not head.startswith(cmd.sha):
            if comment is not None:
                publish.react(comment, "confused")
            self._reply(
                key,
                f"`{cmd.sha}` is not the head of this pull request any more (it is `{head}`); nothing was "
                f"run. To run the head, review it and {self._how_to_approve(head, cmd)}",
            )
            return self._skip("the approved sha is not the head")
        why = self._approval_needed(head) if cmd.sha != head else ""
        if why:
            if comment is not None:
                publish.react(comment, "confused")
            self._reply(
                key,
                f"Nothing was run: {why}, so each commit needs an approval that names it in full. After "
                f"reviewing commit `{head}`, {self._how_to_approve(head, cmd)}",
            )
            return self._skip("approval needs the full sha of the head")
        bad = kernel_name_errors(cmd.kernels)  # comments are checked when parsed; dispatch inputs here
        if bad:
            self._reply(key, f"Nothing was run: {render.escape_md(bad)}.")
            return self._skip(f"invalid kernel name: {bad}")
        try:
            available = self._added_ops()
        except UsageError as exc:
            return self._bad_kernel_name(head, key, exc)
        unknown = sorted(set(cmd.kernels) - set(available))
        if unknown:
            self._reply(
                key,
                f"No added kernel named {', '.join(unknown)}; this PR adds: {', '.join(available) or 'none'}.",
            )
            return self._skip("unknown kernels requested")
        kernels = list(cmd.kernels) or available
        if not kernels:
            ports = host_check.changed_ports(self._pr_files())
            if ports:  # a port's own host code changed: checked as it is, nothing pushed
                return self._host_check(head, key, ports)
            return self._conclude(head, key, "neutral", "no kernel files added", NO_KERNEL_TEXT)
        self._cancel_superseded([], head, keep=self._external(head, key))
        commit = self.cfg.auto_commit or cmd.name == "apply"
        result = self._queue(head, key, kernels, commit=commit, why=f"requested by @{ev.sender}")
        if result.run and comment is not None:
            publish.react(comment, "rocket")
        return result

    def _how_to_approve(self, head: str, cmd: Command) -> str:
        if self.ev.kind == "dispatch":
            return f"start the workflow again with the input `sha` set to `{head}`."
        return f"comment:\n\n{render.fence(approval_command(head, cmd.name))}"

    def _approval_needed(self, head: str) -> str:
        """Why running ``head`` needs a maintainer's approval of that exact commit; "" when it does not."""
        edits = self._guarded_edits()
        if edits:
            return (
                f"this pull request edits the tests, a `conftest.py` or the TileGym runtime "
                f"({render.path_list(edits)}), which agent-d takes from the base branch; whoever pushed it"
            )
        contracts = self._contracts_without_write_access(None)
        if contracts:
            return (
                f"this pull request's host contract ({render.path_list(contracts)}) comes from an author "
                "without write access"
            )
        if not is_fork(self.pr) or self._push_recorded(head):
            return ""
        return "agent-d does not know the head of this pull request to be pushed by a maintainer"

    def _push_recorded(self, head: str) -> bool:
        """Whether dispatch recorded the push of ``head`` (a fork's) as trusted.

        A command is handled long after the push, so the pusher is read back from what dispatch
        recorded for that push: an automatic run or a draft notice under the trusted push's key,
        whatever its conclusion. Nothing else (an untrusted push, a missed event, a run's outcome)
        counts: fail closed.
        """
        name = self.cfg.check_name
        if publish.find_check_run(self.repo, head, name, self._external(head, _draft_key(True))) is not None:
            return True
        auto = publish.find_check_run(self.repo, head, name, self._external(head, _auto_key(True)))
        # a run agent-d recorded under this key before untrusted pushes had a key of their own
        # waited for a maintainer when it concluded `action_required`
        return auto is not None and auto.conclusion != "action_required"

    def _pr_files(self) -> list:
        if self._files is None:
            self._files = list(self.pr.get_files())
        return self._files

    def _guarded_edits(self) -> list[str]:
        """The pull request's edits of the tests, a conftest.py or the runtime (head_trust.py)."""
        if self._guarded is None:
            files = self._pr_files()
            ops = [k.op for k in added_kernels(files)]
            self._guarded = head_trust.guarded_edits(self.repo, self.pr, files, ops, self.cfg.check_name)
        return self._guarded

    def _added_ops(self) -> list[str]:
        """The kernels this PR adds (bot/targets/targets.py's rule); UsageError for a name it refuses."""
        return checked_ops(added_kernels(self._pr_files()))

    def _bad_kernel_name(self, head: str, key: str, exc: UsageError) -> DispatchResult:
        why = f"{render.escape_md(str(exc))}. agent-d ports no kernel of this pull request until the directory is renamed."
        return self._conclude(head, key, "failure", "kernel name not allowed", why)

    def _external(self, head: str, key: str) -> str:
        return f"pr{self.ev.pr_number}:{head}:{key}"

    def _queue(self, head: str, key: str, kernels: list[str], commit: bool, why: str) -> DispatchResult:
        name, external = self.cfg.check_name, self._external(head, key)
        summary = (
            f"Kernels: {', '.join(kernels)}. Commit {head}, built and tested on the files of the base commit "
            f"{self.pr.base.sha} (only each kernel's kernel.rs comes from the pull request). Why: {why}."
        )
        run, created = publish.ensure_check_run(
            self.repo, head, name, external, "queued", summary, self.details_url
        )
        if not created:
            return self._skip("already handled", pr=self.ev.pr_number, head_sha=head, check_run_id=run.id)
        self._sticky(head, "Queued", f"Porting {', '.join(f'`{k}`' for k in kernels)} on a GPU runner.")
        return DispatchResult(
            True,
            why,
            pr=self.ev.pr_number,
            head_sha=head,
            base_sha=self.pr.base.sha,
            check_run_id=run.id,
            kernels=kernels,
            single_job=self.cfg.matrix == "single",
            commit=commit,
            concurrency_group=f"agent-d-pr-{self.ev.pr_number}",
        )

    def _conclude(self, head: str, key: str, conclusion: str, title: str, summary: str) -> DispatchResult:
        name, external = self.cfg.check_name, self._external(head, key)
        run, created = publish.ensure_check_run(
            self.repo, head, name, external, title, summary, self.details_url
        )
        if not created:
            return self._skip("already handled", pr=self.ev.pr_number, head_sha=head)
        publish.conclude(run, conclusion, title, summary)
        return self._skip(
            title, pr=self.ev.pr_number, head_sha=head, check_run_id=run.id, conclusion=conclusion
        )

    def _cancel_superseded(self, shas: list[str], head: str, keep: str) -> None:
        for sha in {*shas, head}:
            for run in publish.open_check_runs(self.repo, sha, self.cfg.check_name):
                if sha == head and (run.external_id or "") == keep:
                    continue
                publish.conclude(
                    run, "cancelled", "superseded", f"Superseded by a newer run for commit {head}."
                )

    def _sticky(self, head: str, state: str, detail: str) -> None:
        if self.cfg.chatlevel == "quiet" and state == "Queued":
            return
        publish.upsert_sticky(self.pr, render.status_comment(head, state, detail), self.bots)

    def _reply(self, key: str, text: str, with_help: bool = False) -> None:
        marker = f"<!-- agent-d:reply {key} -->"
        body = render.reply(marker, text, with_help)
        publish.create_once(
            lambda: publish.find_marked(self.pr.get_issue_comments(), marker, self.bots),
            lambda: self.pr.create_issue_comment(publish.clip(body)),
            f"reply {key}",
        )
