"""``agent-d run``: dispatch, port and finalize in one process, for trusted local use.

This runs the PR's code on this machine (the port builds and tests it), so use it only
on pull requests you trust.  The port function still runs with the token removed from
its environment, and the artifact still goes through the finalizer's checks.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.build import runner_cache
from bot.classify import machine_errors
from bot.github import gitops
from bot.github.credentials import Credentials
from bot.github.dispatch import Dispatcher
from bot.github.dispatch_result import DispatchResult
from bot.github.events import Event
from bot.github.finalize import Finalizer, FinalizeRequest, FinalizeResult
from bot.github.port_job import PortFn, run_port_job
from bot.github.regenerate import Generator

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    dispatch: DispatchResult
    finalize: FinalizeResult | None = None
    artifacts: list[Path] = field(default_factory=list)


def prepare_checkout(
    clone_url: str,
    ref: str,
    sha: str,
    dest: Path,
    token: str | None = None,
    base: tuple[str, str] | None = None,
) -> Path:
    """A fresh work tree of ``sha`` (fetched through ``ref`` of ``clone_url``); ``base``: (clone URL,
    ref) of the pull request's base branch, fetched too, for the base commit the port starts from."""
    dest.mkdir(parents=True, exist_ok=True)
    gitops.git(dest, "init", "--quiet")
    fetches = [(clone_url, f"+{ref}:refs/agent-d/head")]
    if base is not None:
        fetches.append((base[0], f"+{base[1]}:refs/agent-d/base"))
    for url, refspec in fetches:
        gitops.git(dest, "fetch", "--quiet", "--no-tags", url, refspec, env=gitops.auth_env(token))
    gitops.git(dest, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha)
    return dest


class PipelinePort:
    """The real port (``bot.pipeline``) in the shapes ``run_port_job`` expects: one kernel
    (``port(repo, op)``), or every kernel of the change with one cargo build (``port_all``).

    With ``cargo_cache`` the build uses the runner's cargo cache (bot/build/runner_cache.py), prepared
    when the port starts: after ``run_port_job`` checked the commit and inside its scrubbed
    environment, since keying the cache runs ``rustc -vV`` in the checkout, where a
    rust-toolchain.toml picks the binary."""

    def __init__(self, cargo_cache: runner_cache.CacheRoots | None = None, **options) -> None:
        self.cargo_cache = cargo_cache
        self.options = options

    def __call__(self, repo: Path, op: str) -> tuple:
        return self.port_all(repo, [op])[op]

    def port_all(self, repo: Path, ops: list[str]) -> dict[str, tuple]:
        """{op: (kind, klass, reason, validator block, withheld, annotations, perf summary or None)}."""
        return {
            r.target.op: (
                r.verdict.kind.value,
                r.verdict.klass,
                r.verdict.reason,
                r.validator_block,
                r.verdict.withheld,
                r.verdict.annotations,
                None if r.perf is None else r.perf.summary(),  # the perf stage's (bot/perf)
            )
            for r in self.results(repo, ops)
        }

    def results(self, repo: Path, ops: list[str]) -> list:
        """The pipeline's ``PortResult`` of each kernel (its stages and timings too)."""
        from bot.pipeline import PortOptions, port_all
        from bot.targets.targets import check_name
        from bot.targets.types import Target

        targets = [Target(repo, check_name(op)) for op in ops]
        options = dict(self.options)
        options["force"] = True  # the job's own scratch checkout: no person's edit lives in it
        if options.get("sandbox") and options.get("out_root") is None:
            # agent-d's reports outside the checkout the PR's code can write
            options["out_root"] = Path(tempfile.mkdtemp(prefix="agent-d-out-"))
        if self.cargo_cache is not None and targets:
            options.update(cargo_cache_options(self.cargo_cache, targets[0].crate_dir))
        return port_all(targets, PortOptions(repo=repo, **options))


def cargo_cache_options(roots: runner_cache.CacheRoots, crate_dir: Path) -> dict[str, Path]:
    """``cargo_target_dir`` and ``cargo_home`` of the runner's cache for ``crate_dir``, and one log
    line (the job's log and the artifact's) saying which target dir and why. A cache that cannot
    be used says so and the build goes on without it (today's cold build), never a failed port."""
    try:
        prepared = runner_cache.prepare(roots, crate_dir, dict(os.environ))
    except (OSError, runner_cache.CacheUnavailable) as exc:
        log.warning("cargo cache off: %s; building without it", machine_errors.one_line(exc))
        return {}
    log.info("%s", prepared.log_line())
    return {"cargo_target_dir": prepared.target_dir, "cargo_home": prepared.cargo_home}


def pipeline_port_fn(cargo_cache: runner_cache.CacheRoots | None = None, **options) -> PipelinePort:
    """The real port (``bot.pipeline``) in the shape ``run_port_job`` expects; ``options`` are
    ``PortOptions`` fields (``cargo_target_dir``, ``cargo_home``, ...)."""
    return PipelinePort(cargo_cache, **options)


def run_all(
    gh,
    event: Event,
    port_fn: PortFn,
    workdir: Path,
    bots: tuple[str, ...],
    run_ref: str = "local",
    credentials: Credentials | None = None,
    generate: Generator | None = None,
) -> RunSummary:
    decision = Dispatcher(gh, event, bots, run_ref=run_ref).run()
    summary = RunSummary(decision)
    if not decision.run or decision.check_run_id is None or decision.pr is None:
        return summary
    pr = gh.get_repo(event.repo).get_pull(decision.pr)
    head_repo = pr.head.repo
    url = head_repo.clone_url if head_repo is not None else pr.base.repo.clone_url
    ref = f"refs/heads/{pr.head.ref}" if head_repo is not None else f"refs/pull/{decision.pr}/head"
    base = (pr.base.repo.clone_url, f"refs/heads/{pr.base.ref}")
    for entry in decision.matrix:
        token = credentials.git_token() if credentials is not None else None  # asked now: ports take hours
        checkout = prepare_checkout(url, ref, entry.head_sha, workdir / f"checkout-{entry.slug}", token, base)
        artifact = workdir / f"artifact-{entry.slug}"
        run_port_job(
            checkout,
            entry.head_sha,
            entry.kernel.split(),
            artifact,
            port_fn,
            repo_name=event.repo,
            base_sha=entry.base_sha,
        )
        summary.artifacts.append(artifact)
    who = (
        {}
        if credentials is None
        else {"git_token": credentials.git_token, "author": credentials.commit_author(gh)}
    )
    request = FinalizeRequest(
        repo=event.repo,
        pr=decision.pr,
        head_sha=decision.head_sha,
        base_sha=decision.base_sha,
        check_run_id=decision.check_run_id,
        artifact_dirs=summary.artifacts,
        commit=decision.commit,
        run_ref=run_ref,
        kernels=tuple(decision.kernels),
        **who,
    )
    summary.finalize = Finalizer(gh, request, bots, generate).run()
    return summary
