"""The untrusted side: run the port for each kernel at one exact commit, emit the artifact.

The port function runs in an allow-listed environment (bot/github/pr_env.py): every
variable a build and a test do not need, tokens and ``ACTIONS_*`` credentials first among
them, is removed from ``os.environ`` for the duration (and restored afterwards, for
``agent-d run``), and the job refuses to start if a secret-looking one is still visible.

Before the port, the checkout is made to hold the base commit's files plus each ported
kernel's ``kernel.rs`` (bot/github/base_tree.py): no other file of the pull request reaches the
build or the tests. The patch and the tested tree are computed from that tree with a temporary
index, so the checkout's own index is never touched.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from bot.build import annotations
from bot.build.types import Annotation
from bot.classify import machine_errors
from bot.errors import UsageError
from bot.github import base_tree, gitops, pr_env
from bot.github.artifact import ArtifactError, KernelVerdict, is_allowed, perf_summary, write_artifact
from bot.github.artifact_schema import MAX_REASON, MAX_VALIDATOR_BLOCK, VERDICT_KINDS
from bot.github.redact import REDACTOR, RedactFilter, is_secret_name
from bot.targets.targets import check_name

_SHA_RE = re.compile(r"[0-9a-f]{40}")

log = logging.getLogger(__name__)

# port_fn(repo, op) -> (verdict kind, klass, reason, validator block[, withheld[, annotations[, perf
# summary]]]). A port function that also has ``port_all(repo, ops) -> {op: that tuple}`` gets every
# kernel of the change in one call, so the crate is built once for the pull request
# (bot/pipeline.py ``port_all``).
PortFn = Callable[[Path, str], tuple]


class PortJobError(RuntimeError):
    pass


def _secret_keys(env: dict[str, str] | os._Environ) -> list[str]:
    return sorted(k for k in env if is_secret_name(k) or k.startswith("ACTIONS_"))


@contextlib.contextmanager
def tokenless_environ() -> Iterator[None]:
    """Keep only the allow-listed variables in ``os.environ`` for the block; restore the rest after."""
    saved = {k: os.environ[k] for k in list(os.environ) if not pr_env.kept(k)}
    for key, value in saved.items():
        if is_secret_name(key) or key.startswith("ACTIONS_"):
            REDACTOR.add(value)
        del os.environ[key]
    try:
        left = _secret_keys(os.environ)
        if left:
            raise PortJobError(f"secrets still visible to the port job: {', '.join(left)}")
        yield
    finally:
        os.environ.update(saved)


@contextlib.contextmanager
def _captured_log() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactFilter(REDACTOR))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield buf
    finally:
        root.removeHandler(handler)


def snapshot(repo: Path, ops: list[str], start: str = "HEAD") -> tuple[str, str, list[str], list[str]]:
    """(patch, tested tree, changed allowed paths, changed paths left out) for the work tree vs ``start``.

    ``start``: the tree the port began from (a tree-ish). Kept: the generated files of ``ops``
    and the wiring, exactly what finalize regenerates.
    """
    with gitops.temp_index() as env:
        gitops.git(repo, "read-tree", start, env=env)
        gitops.git(repo, "add", "-A", "--", ".", env=env)
        changed = [
            p
            for p in gitops.git(repo, "diff", "--cached", "--name-only", "-z", start, env=env).split("\0")
            if p
        ]
        dropped = [p for p in changed if not is_allowed(p, ops=ops)]
        for path in dropped:
            gitops.git(repo, "reset", "-q", start, "--", path, env=env)
        kept = [p for p in changed if is_allowed(p, ops=ops)]
        patch = gitops.git(
            repo,
            "diff",
            "--cached",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            start,
            env=env,
        )
        tree = gitops.git(repo, "write-tree", env=env).strip()
    return patch, tree, sorted(kept), sorted(dropped)


def _normalise(result: tuple) -> KernelVerdict:
    # a fifth: the kernel's generated files were withheld; a sixth: its annotations (bot/build/annotations.py)
    kind, klass, reason, block, *rest = result
    kind = getattr(kind, "value", kind)
    if kind not in VERDICT_KINDS:
        raise PortJobError(f"port_fn returned an unknown verdict kind {kind!r}")
    return KernelVerdict(
        kind=str(kind),
        klass=str(klass or ""),
        reason=REDACTOR.redact(str(reason))[:MAX_REASON],
        validator_block=REDACTOR.redact(str(block or ""))[:MAX_VALIDATOR_BLOCK],
        withheld=bool(rest and rest[0]),
        annotations=_redacted_places(rest[1] if len(rest) > 1 else ()),
    )


def _redacted_places(places: tuple[Annotation, ...]) -> tuple[Annotation, ...]:
    """The annotations with their text redacted like the reason, within the artifact's bounds."""
    return annotations.bounded(
        replace(
            a,
            title=annotations.clip(REDACTOR.redact(a.title), annotations.MAX_TITLE),
            message=annotations.clip(REDACTOR.redact(a.message), annotations.MAX_MESSAGE),
        )
        for a in places
    )


def _crashed(exc: Exception, what: str) -> KernelVerdict:
    """A crash in the pipeline is a host-side block, not a lost run; a full or read-only disk says so."""
    log.exception("port of %s crashed", what)
    stop = machine_errors.explain(exc)
    kind, klass = (stop.kind, stop.klass) if stop else ("BLOCKED", "host")
    why = REDACTOR.redact(f"the port stopped: {machine_errors.one_line(exc)}")
    return KernelVerdict(kind, klass, why[:MAX_REASON])


def _keep_perf(perf: dict[str, dict], op: str, result: tuple) -> None:
    """The perf stage's summary, a seventh element of ``result`` where the port ran it (bot/perf),
    redacted and checked against its schema; one that does not fit is left out and logged."""
    summary = result[6] if len(result) > 6 else None
    if summary is None:
        return
    try:
        perf[op] = perf_summary(_redacted(summary))
    except ArtifactError as exc:
        log.warning("the perf summary of %s is left out of the artifact: %s", op, exc)


def _redacted(value: object) -> object:
    if isinstance(value, str):
        return REDACTOR.redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def _port_each(port_fn: PortFn, repo: Path, op: str, perf: dict[str, dict]) -> KernelVerdict:
    try:
        result = port_fn(repo, op)
        _keep_perf(perf, op, result)
        return _normalise(result)
    except Exception as exc:
        return _crashed(exc, op)


def _port_together(
    port_all, repo: Path, kernels: list[str], perf: dict[str, dict]
) -> dict[str, KernelVerdict]:
    """Every kernel in one call (one build); a crash, or a kernel left unanswered, is BLOCKED host."""
    try:
        results = port_all(repo, kernels)
        for op, result in results.items():
            _keep_perf(perf, op, result)
        answered = {op: _normalise(result) for op, result in results.items()}
    except Exception as exc:
        crashed = _crashed(exc, ", ".join(kernels))
        return {op: crashed for op in kernels}
    missing = KernelVerdict("BLOCKED", "host", "the port gave no verdict for this kernel")
    return {op: answered.get(op, missing) for op in kernels}


def _source_tree(repo: Path, head_sha: str, base_sha: str, kernels: list[str]) -> base_tree.SourceTree:
    """Check the commits, then make the checkout hold the base's files plus the kernels' kernel.rs."""
    actual = gitops.worktree_head(repo)
    if actual != head_sha:
        raise PortJobError(f"the checkout is at {actual}, not the approved commit {head_sha}")
    if (
        not _SHA_RE.fullmatch(base_sha)
        or gitops.git(repo, "cat-file", "-t", base_sha, check=False).strip() != "commit"
    ):
        raise PortJobError(f"the base commit {base_sha!r} is not in the checkout (fetch it with the head)")
    try:
        source = base_tree.source_tree(repo, base_sha, head_sha, kernels, bare=False)
        base_tree.reset_worktree(repo, source)
    except (base_tree.BaseTreeError, gitops.GitError, OSError) as exc:
        raise PortJobError(f"cannot put the base's files in the checkout: {exc}") from None
    if source.reset:
        every = source.reset.all()
        log.info("%d files put back to the base's bytes: %s", len(every), ", ".join(every[:20]))
    return source


def run_port_job(
    repo: Path,
    head_sha: str,
    kernels: list[str],
    artifact_dir: Path,
    port_fn: PortFn,
    repo_name: str = "",
    *,
    base_sha: str,
) -> Path:
    """Port ``kernels`` in the checkout ``repo`` (at ``head_sha``) on the files of ``base_sha`` plus
    the kernels' ``kernel.rs``; write the artifact."""
    repo = Path(repo)
    for op in kernels:
        try:
            check_name(op)
        except UsageError as exc:
            raise PortJobError(str(exc)) from None
    source = _source_tree(repo, head_sha, base_sha, kernels)
    repo_name = repo_name or os.environ.get("GITHUB_REPOSITORY", "local/repo")
    verdicts: dict[str, KernelVerdict] = {}
    perf: dict[str, dict] = {}
    logs: dict[str, str] = {}
    with tokenless_environ():
        together = getattr(port_fn, "port_all", None)
        if together is not None and len(kernels) > 1:
            with _captured_log() as buf:
                verdicts.update(_port_together(together, repo, kernels, perf))
            logs["port.txt"] = REDACTOR.redact(buf.getvalue())
        else:
            for op in kernels:
                with _captured_log() as buf:
                    verdicts[op] = _port_each(port_fn, repo, op, perf)
                logs[f"{op}.txt"] = REDACTOR.redact(buf.getvalue())
        patch, tree, kept, dropped = snapshot(repo, kernels, source.tree)
    if source.reset:
        logs["reset-paths.txt"] = "put back to the base's bytes before the port:\n" + "\n".join(
            source.reset.all()
        )
    if dropped:
        logs["left-out-paths.txt"] = (
            "changed but not part of the patch (outside the generated paths):\n" + "\n".join(dropped)
        )
    write_artifact(
        Path(artifact_dir),
        repo=repo_name,
        head_sha=head_sha,
        base_sha=base_sha,
        base_tree=source.tree,
        tested_tree=tree,
        verdicts=verdicts,
        patch=patch,
        changed_paths=kept,
        reset=source.reset,
        logs=logs,
        perf=perf,
    )
    return Path(artifact_dir)
