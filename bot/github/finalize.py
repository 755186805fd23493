"""``agent-d finalize``: the trusted back door. Runs no PR code.

Input: the dispatch decision (trusted job outputs: PR, head sha, check run id, kernels,
whether to commit) and the artifacts of the port jobs (untrusted data).  It validates the
artifacts, rebuilds the tested tree from the patch, judges git's own diff of that tree
(no deletions, renames or modes other than 100644; only generated and wiring paths of the
dispatched kernels), regenerates the host files itself from the head and requires the
tested tree to equal that.  The pushed content is always agent-d's own generation, never
the artifact's patch.  It pushes one follow-up commit (fast-forward only) when there is
something to push and it may,
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
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import StageStop
from bot.github import gitops, publish, regenerate, render, render_perf
from bot.github.artifact import Artifact, ArtifactError, change_refusals, read_artifact
from bot.github.config import Config, ConfigError, load_config
from bot.github.kernels import added_kernels
from bot.github.perf_check import publish_perf_check
from bot.github.pr_lock import pr_lock
from bot.github.redact import redact
from bot.github.trust import is_fork

log = logging.getLogger(__name__)
BOT_NAME, BOT_EMAIL = "agent-d[bot]", "agent-d[bot]@users.noreply.github.com"


@dataclass(frozen=True)
class FinalizeRequest:
    repo: str
    pr: int
    head_sha: str
    check_run_id: int
    artifact_dirs: list[Path]
    commit: bool = True
    run_ref: str = "local"
    push_token: str | None = None
    port_result: str = "success"  # the GPU job's result as Actions reports it
    kernels: tuple[str, ...] = ()  # dispatch's kernels; empty: any kernel the PR adds


@dataclass
class FinalizeResult:
    conclusion: str
    new_head: str = ""
    pushed: bool = False
    review: str = ""  # created | edited | unchanged | ""
    notes: list[str] = field(default_factory=list)


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
            extra = sorted(set(art.ops) - (dispatched & added))
            if extra:
                raise ArtifactError(
                    f"artifact names {', '.join(extra)}, not among the dispatched kernels "
                    f"({', '.join(sorted(dispatched & added)) or 'none'})"
                )

    def _fetch(self, gitdir: Path) -> str:
        gitops.init_bare(gitdir)
        head_repo = self.pr.head.repo
        token = self.req.push_token
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
        return gitops.tree_of(gitdir, self.req.head_sha)

    def _tested_tree(self, gitdir: Path, art: Artifact, head_tree: str) -> str:
        """The artifact's tested tree, rebuilt from its patch and judged on git's own diff."""
        if art.base_tree != head_tree:
            raise ArtifactError(f"artifact base tree {art.base_tree} is not the tree of {self.req.head_sha}")
        try:
            tree = gitops.apply_patch_to_tree(gitdir, self.req.head_sha, art.patch)
        except gitops.GitError as exc:
            raise ArtifactError(
                f"the patch does not apply to {self.req.head_sha}: {exc.stderr[-300:]}"
            ) from None
        if tree != art.tested_tree:
            raise ArtifactError(
                f"patch + {self.req.head_sha[:12]} gives tree {tree}, not the tested {art.tested_tree}"
            )
        refusals = change_refusals(gitops.tree_changes(gitdir, head_tree, tree), art.ops)
        if refusals:
            raise ArtifactError("the tested tree makes changes agent-d never makes: " + "; ".join(refusals))
        return tree

    def _combined_tree(self, gitdir: Path, artifacts: list[Artifact], head_tree: str, patch: str) -> str:
        """The one tree to publish: agent-d's own generation on the head, equal to what was tested.

        ``patch``: the artifacts' non-empty patches, joined; they only rebuild the tested trees.
        """
        for art in artifacts:
            self._tested_tree(gitdir, art, head_tree)
        if all(a.tested_tree == head_tree for a in artifacts):
            return head_tree
        if len(artifacts) == 1:
            tested = artifacts[0].tested_tree
        else:
            try:
                tested = gitops.apply_patch_to_tree(gitdir, self.req.head_sha, patch)
            except gitops.GitError as exc:
                raise ArtifactError(
                    "the kernels were ported in separate jobs and their patches conflict (set `matrix: single` "
                    f"in .github/agent-d.yml to port them in one tree): {exc.stderr[-300:]}"
                ) from None
        # a kernel whose generated code faulted (agent-d's own bug) was tested without its files
        ops = sorted({op for a in artifacts for op in a.ops if not a.verdicts[op].withheld})
        try:
            ours, notes = regenerate.regenerated_tree(gitdir, self.req.head_sha, ops, self.generate)
        except (StageStop, regenerate.RegenerationError) as exc:
            raise ArtifactError(f"agent-d could not regenerate the host files itself: {exc}") from None
        if ours != tested:
            differ = sorted(c.path for c in gitops.tree_changes(gitdir, ours, tested))
            why = "; ".join(notes)
            raise ArtifactError(
                f"the tested tree is not what agent-d generates from {self.req.head_sha[:12]}: "
                f"{', '.join(differ)} differ" + (f" (generation: {why})" if why else "")
            )
        return ours

    # ------------------------------------------------------------------ publication

    def _publish(self, artifacts: list[Artifact], gitdir: Path) -> FinalizeResult:
        try:
            head_tree = self._fetch(gitdir)
            joined = "".join(a.patch for a in artifacts if not a.empty)
            tree = self._combined_tree(gitdir, artifacts, head_tree, joined)
        except (ArtifactError, gitops.GitError) as exc:
            why = f"The tested result cannot be reproduced: {render.escape_md(str(exc))}"
            return self._locked(self._fail, "artifact rejected", why)
        return self._locked(self._publish_tree, artifacts, gitdir, head_tree, tree)

    def _publish_tree(
        self, artifacts: list[Artifact], gitdir: Path, head_tree: str, tree: str
    ) -> FinalizeResult:
        """Commit, conclude, review, status comment (called holding the lock)."""
        req = self.req
        patch = gitops.tree_diff(gitdir, head_tree, tree)  # what agent-d generated, as git writes it
        verdicts = render.merged_verdicts(artifacts)
        verdict = render.overall(verdicts)
        conclusion = render.CONCLUSION[verdict]
        notes: list[str] = []  # for the check and the status comment
        review_notes: list[str] = []  # only what the review must carry (deterministic across reruns)
        new_head, pushed = req.head_sha, False
        if tree == head_tree:
            notes.append("The generated files already match this commit: nothing to commit.")
        else:
            refusal = self._why_not_push()
            if refusal:
                review_notes.append(render.patch_instructions(patch, req.pr, refusal))
                notes.append(f"Not committed: {refusal}.")
            else:
                message = render.commit_message(sorted(verdicts), tree, req.run_ref)
                sha = gitops.commit_tree(gitdir, tree, req.head_sha, message, BOT_NAME, BOT_EMAIL)
                ok, err = gitops.push(gitdir, self._push_url(), sha, self.pr.head.ref, req.push_token)
                if ok:
                    self._wait_for_head(sha)
                    new_head, pushed = sha, True
                    notes.append(f"Committed the generated files as `{sha}`.")
                elif "non-fast-forward" in err or "fetch first" in err or "stale info" in err:
                    return self._cancel("the branch moved while agent-d was pushing")
                else:
                    why = f"the push was refused: {render.escape_md(err[-500:])}"
                    review_notes.append(render.patch_instructions(patch, req.pr, why))
                    notes.append("Not committed: the push was refused; the review holds the patch.")
        title = render.check_title(verdicts)
        summary = render.check_summary(verdicts, notes)
        # on the run that carries the results (agent-d never edits kernel.rs: its lines stay put)
        places = render.annotations(verdicts)
        if pushed:  # created concluded: one write (a run found from an earlier try is concluded)
            target, created = publish.ensure_check_run(
                self.repo, new_head, self.cfg.check_name, f"{self.check.external_id}+commit", title, summary,
                conclusion=conclusion, annotations=places,
            )  # fmt: skip
            if created:
                publish.append_annotations(target, title, summary, places)
            else:
                publish.conclude(target, conclusion, title, summary, annotations=places)
            publish.conclude(
                self.check, conclusion, title, f"Results are published on {new_head}.\n\n{summary}"
            )
        else:
            publish.conclude(self.check, conclusion, title, summary, annotations=places)
        perfs = render_perf.merged(artifacts)
        publish_perf_check(self.repo, new_head, self.cfg.check_name, self.check.external_id or "", perfs)
        body = render.review_body(artifacts, new_head, tree, review_notes, render_perf.section(perfs))
        _, action = publish.post_review(self.repo, self.pr, new_head, body, self.bots)
        state = f"{title} ({conclusion})"
        publish.upsert_sticky(self.pr, render.status_comment(new_head, state, "\n\n".join(notes)), self.bots)
        return FinalizeResult(conclusion, new_head, pushed, action, notes + review_notes)

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
        return FinalizeResult("cancelled", notes=[why])

    def _fail(self, title: str, why: str) -> FinalizeResult:
        log.warning("finalize: %s: %s", title, why)
        publish.conclude(self.check, "failure", title, why)
        pr = getattr(self, "pr", None)
        if pr is not None:
            publish.upsert_sticky(pr, render.status_comment(self.req.head_sha, title, why), self.bots)
        return FinalizeResult("failure", notes=[why])


def _pipeline_generator() -> regenerate.Generator:
    """The port's own generation stages (imported late: the planner is heavy and needs no GitHub)."""

    def generate(repo: Path, op: str) -> str:
        from bot.pipeline import generate_only

        return generate_only(repo, op)

    return generate
