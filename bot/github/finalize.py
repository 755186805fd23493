"""``agent-d finalize``: the trusted back door. Runs no PR code.

Input: the dispatch decision (trusted job outputs: PR, head sha, check run id, kernels,
whether to commit) and the artifacts of the port jobs (untrusted data).  It validates the
artifacts, computes the tree the port had to start from (the base commit's files plus each
kernel's ``kernel.rs`` from the head, bot/github/base_tree.py), rebuilds the tested tree from
that and the patch, judges git's own diff of it (no deletions, renames or modes other than
100644; only generated and wiring paths of the dispatched kernels), regenerates the host files
itself from the same start and requires the tested tree to equal that.  The pushed content is
always agent-d's own generation, never the artifact's patch: the head with agent-d's files as
tested (bot/github/pushed_tree.py).  It pushes one follow-up commit (fast-forward only) when
there is something to push and it may,
concludes the check on the new head (and the informational ``<check>/perf`` check when the perf
stage ran), posts one COMMENT review, and edits the sticky status comment.  A run whose commit is no longer the PR head ends ``cancelled`` and
posts nothing else.  Every write happens holding the pull request's lock (``pr_lock``)
and only while the check is still open, so two finalizes of one check publish once.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bot.errors import StageStop
from bot.github import base_tree, gitops, job_summary, own_host, publish, regenerate, render, render_perf
from bot.github.artifact import Artifact, ArtifactError, change_refusals, listed_reset, read_artifact
from bot.github.config import Config, ConfigError, load_config
from bot.github.credentials import CommitAuthor
from bot.github.kernels import added_kernels
from bot.github.path_classes import kernel_inputs
from bot.github.perf_check import publish_perf_check
from bot.github.pr_lock import pr_lock
from bot.github.pushed_tree import PushedTree, pushed_tree
from bot.github.redact import redact
from bot.github.trust import is_fork

log = logging.getLogger(__name__)
# who commits when the caller names no one (a test, a library use): the credentials' own author is
# what links the commit to an account (bot/github/credentials.py)
UNNAMED_AUTHOR = CommitAuthor("agent-d[bot]", "agent-d[bot]@users.noreply.github.com")


def _no_token() -> str | None:
    return None


@dataclass(frozen=True)
class FinalizeRequest:
    repo: str
    pr: int
    head_sha: str
    check_run_id: int
    artifact_dirs: list[Path]
    commit: bool = True
    run_ref: str = "local"
    # asked at each fetch and push, so a token minted again meanwhile is the one git uses
    git_token: Callable[[], str | None] = _no_token
    author: CommitAuthor = UNNAMED_AUTHOR
    port_result: str = "success"  # the GPU job's result as Actions reports it
    kernels: tuple[str, ...] = ()  # dispatch's kernels; empty: any kernel the PR adds
    base_sha: str = ""  # dispatch's base commit; empty: the pull request's base as the API gives it now


@dataclass(frozen=True)
class Built:
    """What the port built and tested, as finalize proved it, and what that makes the head."""

    source: base_tree.SourceTree  # the start: the base's files plus the kernels' kernel.rs
    tested: str  # the tested tree: the start plus agent-d's generated files
    pushed: PushedTree  # the head with agent-d's files as tested


@dataclass(frozen=True)
class Committed:
    head: str  # the pull request's head after this finalize
    pushed: bool
    notes: list[str]  # for the check and the status comment
    review_notes: list[str]  # for the review only


@dataclass
class FinalizeResult:
    conclusion: str
    new_head: str = ""
    pushed: bool = False
    review: str = ""  # created | edited | unchanged | ""
    notes: list[str] = field(default_factory=list)
    summary: str = ""  # the job summary's Markdown (bot/github/job_summary.py); not an output

    def outputs(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items() if k != "summary"}


class FinalizeCrash(RuntimeError):
    """Finalize stopped on an error; its text redacted (a GitHub 500 may echo the request's token)."""


class Finalizer:
    def __init__(
        self, gh, req: FinalizeRequest, bots: tuple[str, ...], generate: regenerate.Generator | None = None
    ):
        self.gh, self.req, self.bots = gh, req, bots
        self.generate = generate or _pipeline_generator()

    def run(self) -> FinalizeResult:
        try:
            return self._run()
        except Exception as exc:
            if getattr(self, "check", None) is not None:  # set once it is known to be this commit's
                self._conclude_after_crash(exc)
            said = f"{type(exc).__name__}: {exc}"
            if redact(said) == said:
                raise
            # the original (its text, its traceback's locals) stays out of every log that prints this one
            raise FinalizeCrash(redact(said)) from None

    def _run(self) -> FinalizeResult:
        req = self.req
        self.repo = self.gh.get_repo(req.repo)
        check = self.repo.get_check_run(req.check_run_id)
        if check.status == "completed":
            return FinalizeResult(
                check.conclusion or "cancelled", notes=["the check run was already concluded"]
            )
        if check.head_sha != req.head_sha:
            raise ValueError(f"check run {req.check_run_id} belongs to {check.head_sha}, not {req.head_sha}")
        self.check = check
        try:
            self.cfg = load_config(self.repo)
        except ConfigError as exc:
            self.cfg = Config()
            return self._locked(self._fail, "agent-d configuration error", render.escape_md(str(exc)))
        self.pr = self.repo.get_pull(req.pr)
        self.base_sha = req.base_sha or self.pr.base.sha
        if req.port_result == "cancelled":
            return self._locked(self._cancel, "the GPU job was cancelled")
        if self.pr.head.sha != req.head_sha:
            return self._locked(
                self._cancel,
                f"the pull request head moved to {self.pr.head.sha} while {req.head_sha} was tested",
            )
        try:
            artifacts = [read_artifact(d) for d in req.artifact_dirs]
            self._check_origin(artifacts)
        except ArtifactError as exc:
            why = f"The port job's artifact was rejected: {render.escape_md(str(exc))}"
            return self._locked(self._fail, "artifact rejected", why)
        with tempfile.TemporaryDirectory(prefix="agent-d-finalize-") as tmp:
            return self._publish(artifacts, Path(tmp) / "repo.git")

    def _locked(self, write: Callable[..., FinalizeResult], *args) -> FinalizeResult:
        """Run ``write`` holding the pull request's lock, and only while the check is still open.

        Everything before is reading and computing; every write to GitHub happens here.  Of two
        finalizes of one check, the second finds the check concluded and publishes nothing.
        """
        with pr_lock(self.repo, self.req.pr):
            check = self.repo.get_check_run(self.req.check_run_id)
            if check.status == "completed":
                return FinalizeResult(
                    check.conclusion or "cancelled", notes=["the check run was already concluded"]
                )
            self.check = check
            return write(*args)

    def _conclude_after_crash(self, exc: Exception) -> None:
        """Never leave the check queued: conclude it as failure, unless something already did."""
        try:
            check = self.repo.get_check_run(self.req.check_run_id)
            if check.status != "completed":
                why = render.escape_md(
                    redact(f"agent-d failed while publishing: {type(exc).__name__}: {exc}")
                )
                publish.conclude(check, "failure", "agent-d error", why)
        except Exception:
            log.exception("could not conclude the check after an error")

    # ------------------------------------------------------------------ checks

    def _check_origin(self, artifacts: list[Artifact]) -> None:
        if not artifacts:
            raise ArtifactError("no artifact was produced")
        added = {k.op for k in added_kernels(self.pr.get_files())}
        dispatched = set(self.req.kernels) or added
        for art in artifacts:
            if art.repo != self.req.repo:
                raise ArtifactError(f"artifact is for {art.repo}, not {self.req.repo}")
            if art.head_sha != self.req.head_sha:
                raise ArtifactError(f"artifact tested {art.head_sha}, not the dispatched {self.req.head_sha}")
            if art.base_sha != self.base_sha:
                raise ArtifactError(f"artifact was built on base {art.base_sha}, not {self.base_sha}")
            extra = sorted(set(art.ops) - (dispatched & added))
            if extra:
                raise ArtifactError(
                    f"artifact names {', '.join(extra)}, not among the dispatched kernels "
                    f"({', '.join(sorted(dispatched & added)) or 'none'})"
                )

    def _fetch(self, gitdir: Path) -> str:
        gitops.init_bare(gitdir)
        head_repo = self.pr.head.repo
        token = self.req.git_token()
        if head_repo is not None:
            gitops.fetch(
                gitdir, head_repo.clone_url, f"+refs/heads/{self.pr.head.ref}:refs/agent-d/head", token
            )
        if not gitops.has_commit(gitdir, self.req.head_sha):
            gitops.fetch(
                gitdir, self.repo.clone_url, f"+refs/pull/{self.req.pr}/head:refs/agent-d/pull", token
            )
        if not gitops.has_commit(gitdir, self.req.head_sha):
            raise ArtifactError(f"commit {self.req.head_sha} could not be fetched")
        for refspec in (f"+refs/heads/{self.pr.base.ref}:refs/agent-d/base", self.base_sha):
            if gitops.has_commit(gitdir, self.base_sha):
                break
            try:
                gitops.fetch(gitdir, self.repo.clone_url, refspec, token)
            except gitops.GitError as exc:
                log.info("fetching the base %s: %s", refspec, exc.stderr[-300:])
        if not gitops.has_commit(gitdir, self.base_sha):
            raise ArtifactError(f"the base commit {self.base_sha} could not be fetched")
        return gitops.tree_of(gitdir, self.req.head_sha)

    def _tested_tree(self, gitdir: Path, art: Artifact, source: base_tree.SourceTree) -> str:
        """The artifact's tested tree, rebuilt from its start and patch and judged on git's own diff."""
        if art.base_tree != source.tree:
            raise ArtifactError(
                f"artifact base tree {art.base_tree} is not {source.tree}, the files of the base "
                f"{source.base_sha[:12]} with the kernel.rs of {', '.join(source.ops)} from {source.head_sha[:12]}"
            )
        if (art.reset, art.reset_count) != listed_reset(source.reset):
            raise ArtifactError(
                "result.json: reset_paths are not the files where the head differs from that tree"
            )
        try:
            tree = gitops.apply_patch_to_tree(gitdir, source.tree, art.patch)
        except gitops.GitError as exc:
            raise ArtifactError(
                f"the patch does not apply to the start tree {source.tree}: {exc.stderr[-300:]}"
            ) from None
        if tree != art.tested_tree:
            raise ArtifactError(
                f"patch + start tree {source.tree[:12]} gives tree {tree}, not the tested {art.tested_tree}"
            )
        refusals = change_refusals(gitops.tree_changes(gitdir, source.tree, tree), art.ops)
        if refusals:
            raise ArtifactError("the tested tree makes changes agent-d never makes: " + "; ".join(refusals))
        return tree

    def _source(self, gitdir: Path, ops: list[str]) -> base_tree.SourceTree:
        return base_tree.source_tree(gitdir, self.base_sha, self.req.head_sha, sorted(ops))

    def _combined_tree(
        self, gitdir: Path, artifacts: list[Artifact], source: base_tree.SourceTree, patch: str
    ) -> str:
        """The one tested tree: agent-d's own generation on ``source`` (every kernel's), equal to
        what was tested.

        ``patch``: the artifacts' non-empty patches, joined; they only rebuild the tested trees.
        """
        for art in artifacts:
            own = source if sorted(art.ops) == list(source.ops) else self._source(gitdir, art.ops)
            self._tested_tree(gitdir, art, own)
        if all(a.tested_tree == a.base_tree for a in artifacts):
            return source.tree
        if len(artifacts) == 1:
            tested = artifacts[0].tested_tree
        else:
            try:
                tested = gitops.apply_patch_to_tree(gitdir, source.tree, patch)
            except gitops.GitError as exc:
                raise ArtifactError(
                    "the kernels were ported in separate jobs and their patches conflict (set `matrix: single` "
                    f"in .github/agent-d.yml to port them in one tree): {exc.stderr[-300:]}"
                ) from None
        # a kernel whose generated code faulted (agent-d's own bug) was tested without its files
        ops = sorted({op for a in artifacts for op in a.ops if not a.verdicts[op].withheld})
        try:
            ours, notes = regenerate.regenerated_tree(gitdir, source.tree, ops, self.generate)
        except (StageStop, regenerate.RegenerationError) as exc:
            raise ArtifactError(f"agent-d could not regenerate the host files itself: {exc}") from None
        if ours != tested:
            differ = sorted(c.path for c in gitops.tree_changes(gitdir, ours, tested))
            why = "; ".join(notes)
            raise ArtifactError(
                f"the tested tree is not what agent-d generates from the files of the base "
                f"{self.base_sha[:12]} with the kernel.rs of {self.req.head_sha[:12]}: "
                f"{', '.join(differ)} differ" + (f" (generation: {why})" if why else "")
            )
        return ours

    # ------------------------------------------------------------------ publication

    def _publish(self, artifacts: list[Artifact], gitdir: Path) -> FinalizeResult:
        try:
            head_tree = self._fetch(gitdir)
            source = self._source(gitdir, [op for a in artifacts for op in a.ops])
            joined = "".join(a.patch for a in artifacts if not a.empty)
            tested = self._combined_tree(gitdir, artifacts, source, joined)
            built = Built(source, tested, pushed_tree(gitdir, source, tested))
        except (ArtifactError, gitops.GitError, base_tree.BaseTreeError) as exc:
            why = f"The tested result cannot be reproduced: {render.escape_md(str(exc))}"
            return self._locked(self._fail, "artifact rejected", why)
        return self._locked(self._publish_tree, artifacts, gitdir, head_tree, built)

    def _publish_tree(
        self, artifacts: list[Artifact], gitdir: Path, head_tree: str, built: Built
    ) -> FinalizeResult:
        """Commit, conclude, review, status comment (called holding the lock)."""
        verdicts = render.merged_verdicts(artifacts)
        conclusion = render.CONCLUSION[render.overall(verdicts)]
        done = self._commit(gitdir, head_tree, built, sorted(verdicts))
        if done is None:
            return self._cancel("the branch moved while agent-d was pushing")
        title = render.check_title(verdicts)
        summary = render.check_summary(verdicts, done.notes)
        # on the run that carries the results (agent-d never edits kernel.rs: its lines stay put)
        places = render.annotations(verdicts)
        own = own_host.check_and_suggest(
            self.repo,
            self.pr,
            gitdir,
            self.req.head_sha,
            self.base_sha,
            built.tested,
            built.pushed.overwritten,
        )
        if own is not None:  # the pull request's own host files: checked, never pushed over
            places += own.annotations()
            summary += "\n\n" + own.section()
            if not own.holds:
                conclusion, title = "failure", f"{title}; own host code: findings"
        # The writes on the way to the review: the check that gates the merge, then the review.
        # GitHub paces writes a second apart, so the rest (the status comment, the tested head's
        # run, the perf check) follow it.
        if done.pushed:  # created concluded: one write (a run found from an earlier try is concluded)
            target, created = publish.ensure_check_run(
                self.repo, done.head, self.cfg.check_name, f"{self.check.external_id}+commit", title, summary,
                conclusion=conclusion, annotations=places,
            )  # fmt: skip
            if created:
                publish.append_annotations(target, title, summary, places)
            else:
                publish.conclude(target, conclusion, title, summary, annotations=places)
        else:
            publish.conclude(self.check, conclusion, title, summary, annotations=places)
        perfs = render_perf.merged(artifacts)
        unused = render.unused_edits(built.pushed.unused)
        contracts = render.contract_section(self._changed_contracts(gitdir, built.tested, sorted(verdicts)))
        body = render.review_body(
            artifacts,
            done.head,
            built.tested,
            [*contracts, *unused, *([own.section()] if own else []), *done.review_notes],
            render_perf.section(perfs),
        )
        comments = own.suggested.comments if own else []
        _, action = publish.post_review(self.repo, self.pr, done.head, body, self.bots, comments)
        state = f"{title} ({conclusion})"
        publish.upsert_sticky(
            self.pr, render.status_comment(done.head, state, "\n\n".join(done.notes)), self.bots
        )
        if done.pushed:  # the tested head's run points at the commit that carries the results
            publish.conclude(
                self.check, conclusion, title, f"Results are published on {done.head}.\n\n{summary}"
            )
        publish_perf_check(self.repo, done.head, self.cfg.check_name, self.check.external_id or "", perfs)
        perf = render_perf.table(perfs) if render_perf.measured(perfs) else []
        tables = [render.verdict_table(verdicts), *(["", "### Performance", "", *perf] if perf else [])]
        summary = job_summary.finalize(conclusion, title, tables, done.notes)
        return FinalizeResult(
            conclusion, done.head, done.pushed, action, done.notes + done.review_notes, summary
        )

    def _changed_contracts(self, gitdir: Path, tested: str, ops: list[str]) -> dict[str, str]:
        """The host contracts of ``ops`` in the tested tree that the base does not have as they are."""
        paths = [kernel_inputs(op)[1] for op in ops]
        ours = gitops.tree_entries(gitdir, tested, paths)
        base = gitops.tree_entries(gitdir, self.base_sha, paths)
        changed = {p: e.sha for p, e in ours.items() if base.get(p) is None or base[p].sha != e.sha}
        blobs = gitops.read_blobs(gitdir, list(changed.values()))
        return {p: blobs[sha].decode("utf-8", "replace") for p, sha in changed.items()}

    def _commit(self, gitdir: Path, head_tree: str, built: Built, ops: list[str]) -> Committed | None:
        """Push the head with agent-d's tested files, or say why not (the review then holds the
        patch); None when the branch moved meanwhile."""
        req, tree = self.req, built.pushed.tree
        if tree == head_tree:
            return Committed(
                req.head_sha, False, ["The generated files already match this commit: nothing to commit."], []
            )
        if built.pushed.overwritten:
            why = render.overwrite_refusal(built.pushed.overwritten)
            patch = gitops.tree_diff(gitdir, built.source.tree, built.tested)
            take_back = (self.base_sha, list(built.pushed.overwritten))
            return Committed(
                req.head_sha,
                False,
                [f"Not committed: {why}."],
                [render.patch_instructions(patch, req.pr, why, take_back)],
            )
        patch = gitops.tree_diff(gitdir, head_tree, tree)  # what agent-d generated, as git writes it
        refusal = self._why_not_push()
        if refusal:
            return Committed(
                req.head_sha,
                False,
                [f"Not committed: {refusal}."],
                [render.patch_instructions(patch, req.pr, refusal)],
            )
        message = render.commit_message(ops, built.tested, req.run_ref)
        sha = gitops.commit_tree(gitdir, tree, req.head_sha, message, req.author.name, req.author.email)
        ok, err = gitops.push(gitdir, self._push_url(), sha, self.pr.head.ref, req.git_token())
        if ok:
            self._wait_for_head(sha)
            return Committed(sha, True, [f"Committed the generated files as `{sha}`."], [])
        if "non-fast-forward" in err or "fetch first" in err or "stale info" in err:
            return None
        why = f"the push was refused: {render.escape_md(err[-500:])}"
        return Committed(
            req.head_sha,
            False,
            ["Not committed: the push was refused; the review holds the patch."],
            [render.patch_instructions(patch, req.pr, why)],
        )

    def _why_not_push(self) -> str:
        if not self.req.commit:
            return (
                "automatic commits are off (`auto_commit: false`); a maintainer can comment `/agent-d apply`"
            )
        if is_fork(self.pr) and not self.pr.maintainer_can_modify:
            return "the pull request comes from a fork that does not allow edits by maintainers"
        streak = 0
        for commit in reversed(list(self.pr.get_commits())):
            if not render.is_bot_message(commit.commit.message):
                break
            streak += 1
        if streak >= self.cfg.max_bot_commits:
            return f"the last {streak} commits are agent-d's own (limit max_bot_commits={self.cfg.max_bot_commits})"
        return ""

    def _wait_for_head(self, sha: str, tries: int = 10) -> None:
        """Wait until the PR lists the pushed commit (GitHub updates pull refs asynchronously)."""
        for attempt in range(tries):
            commits = list(self.repo.get_pull(self.req.pr).get_commits())
            if commits and commits[-1].sha == sha:
                return
            time.sleep(min(0.5 * (attempt + 1), 3))
        log.warning("the pull request does not list %s yet; publishing anyway", sha)

    def _push_url(self) -> str:
        head_repo = self.pr.head.repo
        return head_repo.clone_url if head_repo is not None else self.repo.clone_url

    def _cancel(self, why: str) -> FinalizeResult:
        log.info("finalize: cancelled: %s", why)
        publish.conclude(self.check, "cancelled", "superseded", why)
        return FinalizeResult(
            "cancelled", notes=[why], summary=job_summary.finalize("cancelled", "superseded", [], [why])
        )

    def _fail(self, title: str, why: str) -> FinalizeResult:
        log.warning("finalize: %s: %s", title, why)
        publish.conclude(self.check, "failure", title, why)
        pr = getattr(self, "pr", None)
        if pr is not None:
            publish.upsert_sticky(pr, render.status_comment(self.req.head_sha, title, why), self.bots)
        return FinalizeResult(
            "failure", notes=[why], summary=job_summary.finalize("failure", title, [], [why])
        )


def _pipeline_generator() -> regenerate.Generator:
    """The port's own generation stages (imported late: the planner is heavy and needs no GitHub)."""

    def generate(repo: Path, op: str) -> str:
        from bot import time_limit
        from bot.pipeline import generate_only

        what = f"regenerating {op}"
        try:  # the same limits as the port's: a contract that makes planning run on ends in a reason
            with (
                time_limit.within(time_limit.seconds(), what),
                time_limit.memory_within(time_limit.memory_mb(), what),
            ):
                return generate_only(repo, op)
        except (time_limit.Expired, time_limit.OutOfMemory) as exc:
            return str(exc)

    return generate
