"""The GitHub subcommands of ``agent-d``: dispatch, finalize, port-job, run, and seed-cache (the
trusted job that fills a GPU runner's cargo cache seed, bot/build/runner_cache.py).

``add_subcommands(subparsers)`` registers them on the main parser (bot/cli.py).
Each sets ``func(args) -> int``. Exit status: 0 done (whatever the verdict), 2 usage, 4 an
unexpected error (bot/cli.py prints one redacted line; finalize and dispatch conclude the check
as failure first where they can).  PyGithub (bot.github.client) is imported
by the commands that talk to GitHub, not here, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from bot.cli_args import add_perf, add_sandbox, add_test_jobs, perf_choice
from bot.errors import UsageError
from bot.github import redact
from bot.github.events import load_event

log = logging.getLogger("agent-d")

SEED_BUILD_FAILED = 1
SEED_NO_TOOLCHAIN = 3  # BLOCKED, the status `agent-d port` gives a machine without the toolchain


def add_subcommands(sub) -> None:
    """The GitHub App commands: the trusted dispatch/finalize pair around the untrusted port-job."""
    _add_dispatch(sub)
    _add_finalize(sub)
    _add_conclude(sub)
    _add_port_job(sub)
    _add_seed_cache(sub)
    _add_run(sub)


def _add_dispatch(sub) -> None:
    p = sub.add_parser(
        "dispatch",
        help="(trusted) classify a GitHub event, queue the check, print the job matrix",
        description="Read the event, decide whether and what to port (config from the default branch, "
        "who asked, which kernels), queue the check run and print the GPU job matrix as JSON "
        "(also appended to $GITHUB_OUTPUT). Runs no code from the pull request.",
    )
    _event_args(p)
    p.set_defaults(func=cmd_dispatch)


def _add_finalize(sub) -> None:
    p = sub.add_parser(
        "finalize",
        help="(trusted) validate port artifacts, commit, conclude the check, review",
        description="Check the port job's artifacts as data, apply the patch and prove the tested tree, "
        "push one commit, conclude the check run, post the review and the sticky comment.",
    )
    p.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY", ""), help="owner/name")
    p.add_argument("--pr", type=int, required=True)
    p.add_argument("--head-sha", required=True, help="the commit dispatch approved and the port tested")
    p.add_argument(
        "--base-sha",
        default="",
        help="dispatch's `base_sha` output: the base commit whose files the port built and tested "
        "(default: the pull request's base commit as the API gives it now)",
    )
    p.add_argument("--check-run-id", type=int, required=True)
    p.add_argument("--commit", choices=("true", "false"), default="true", help="dispatch's `commit` output")
    p.add_argument(
        "--artifacts", type=Path, nargs="+", required=True, help="artifact directories (one per kernel)"
    )
    p.add_argument(
        "--port-result", default="success", help="the port job's result (success/failure/cancelled)"
    )
    p.add_argument(
        "--kernels",
        default="",
        help="dispatch's `kernels` output (JSON list or space-separated); artifacts naming others are refused",
    )
    p.set_defaults(func=cmd_finalize)


def _add_conclude(sub) -> None:
    p = sub.add_parser(
        "conclude",
        help="(trusted) conclude a check that finalize left open (its job killed or timed out)",
        description="Conclude the check run as failure, saying finalize ended without concluding it, "
        "unless it is concluded already. The workflow runs it after a finalize job that did not succeed.",
    )
    p.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY", ""), help="owner/name")
    p.add_argument("--check-run-id", type=int, required=True)
    p.add_argument(
        "--finalize-result", default="", help="the finalize job's result (`needs.finalize.result`)"
    )
    p.set_defaults(func=cmd_conclude)


def _add_port_job(sub) -> None:
    p = sub.add_parser(
        "port-job",
        help="(untrusted, no token) port kernels at one commit, write the artifact",
        description="Put the checkout at --head-sha back to the files of --base-sha, except each kernel's "
        "kernel.rs, run the port for each kernel there with every secret removed from the environment, "
        "and write the patch-and-results artifact (docs/artifact.md).",
    )
    p.add_argument(
        "--repo",
        type=Path,
        default=Path("."),
        help="checkout at --head-sha that also holds --base-sha (default: .)",
    )
    p.add_argument("--head-sha", required=True)
    p.add_argument(
        "--base-sha",
        required=True,
        help="the pull request's base commit (the matrix entry's `base_sha`): the build and the tests use its "
        "files, and only each kernel's kernel.rs from --head-sha",
    )
    p.add_argument("--kernel", action="append", required=True, help="kernel name; repeat for several")
    p.add_argument("--artifact", type=Path, required=True, help="directory to write (docs/artifact.md)")
    p.add_argument("--repo-name", default=os.environ.get("GITHUB_REPOSITORY", ""), help="owner/name")
    _port_job_caches(p)
    add_test_jobs(p)
    add_sandbox(p, default=True)
    add_perf(p)
    p.set_defaults(func=cmd_port_job)


def _port_job_caches(p: argparse.ArgumentParser) -> None:
    """The runner's own read-write cargo cache and the read-only seed built from the default branch."""
    p.add_argument(
        "--cargo-cache",
        type=Path,
        default=_env_path("AGENT_D_CARGO_CACHE"),
        help="this runner's cargo cache, read-write and this pull request's alone (default: "
        "$AGENT_D_CARGO_CACHE; unset: build without one). docs/github.md, 'Warm runners'",
    )
    p.add_argument(
        "--cargo-seed",
        type=Path,
        default=_env_path("AGENT_D_CARGO_SEED"),
        help="a cache that `agent-d seed-cache` built from the default branch, only ever read: copied "
        "when --cargo-cache has no target for this crate and toolchain (default: $AGENT_D_CARGO_SEED)",
    )


def _add_seed_cache(sub) -> None:
    p = sub.add_parser(
        "seed-cache",
        help="(trusted) build the default branch's crate into a GPU runner's cargo cache seed",
        description="Build the checkout's cutile_kernels crate into --cargo-cache with the layout port-job "
        "reads (cargo-home/, target/<key>/), for port jobs to copy read-only. It runs the checkout's build "
        "scripts: give it the default branch (merged code), never a pull request. Build it at the path "
        "the port jobs use (/agent-d-cache in the workflow): cargo's fingerprints hold absolute paths.",
        epilog="exit status: 0 built, 1 the build failed, 3 no toolchain here, 2 usage error",
    )
    p.add_argument("--repo", type=Path, default=Path("."), help="checkout of the default branch (default: .)")
    p.add_argument(
        "--cargo-cache",
        type=Path,
        default=_env_path("AGENT_D_CARGO_CACHE"),
        help="the seed to write (default: $AGENT_D_CARGO_CACHE)",
    )
    p.set_defaults(func=cmd_seed_cache)


def _add_run(sub) -> None:
    p = sub.add_parser(
        "run",
        help="(trusted, local) dispatch + port + finalize in one process",
        description="dispatch, port-job and finalize in one process for a local event payload. It builds "
        "and tests the pull request's code on this machine: use it only on pull requests you trust.",
    )
    _event_args(p)
    p.add_argument("--workdir", type=Path, help="where checkouts and artifacts go (default: a temp dir)")
    p.set_defaults(func=cmd_run)


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name, "")
    return Path(value) if value else None


def _event_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--event-name",
        default=os.environ.get("GITHUB_EVENT_NAME", ""),
        help="webhook event, e.g. pull_request or issue_comment (default: $GITHUB_EVENT_NAME)",
    )
    p.add_argument(
        "--event-path",
        type=Path,
        default=os.environ.get("GITHUB_EVENT_PATH") or None,
        help="the event payload JSON (default: $GITHUB_EVENT_PATH)",
    )


def _setup(repository: str):
    """A client on GitHub as agent-d, and its credentials (a token, or the App's token minted here)."""
    from bot.github.client import ClientSettings, make_github
    from bot.github.credentials import credentials_from_env

    redact.install()
    settings = ClientSettings.from_env()
    # before anything else: no token is a usage error, not a traceback
    credentials = credentials_from_env(repository, settings)
    return make_github(credentials.auth, settings), credentials


def _bots(credentials) -> tuple[str, ...]:
    """The logins whose comments and reviews are agent-d's own: the App's bot user among them."""
    from bot.github.client import bot_logins

    known = bot_logins()
    return known if not credentials.login or credentials.login in known else (credentials.login, *known)


def _run_ref() -> str:
    server = os.environ.get("GITHUB_SERVER_URL", "")
    repo, run_id = os.environ.get("GITHUB_REPOSITORY", ""), os.environ.get("GITHUB_RUN_ID", "")
    return f"{server}/{repo}/actions/runs/{run_id}" if server and run_id else (run_id or "local")


def write_outputs(outputs: dict[str, str]) -> None:
    """Append ``outputs`` to $GITHUB_OUTPUT (when set) and print them as JSON."""
    text = json.dumps(outputs, indent=2, sort_keys=True)
    print(redact.redact(text))
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.writelines(
                f"{key}<<AGENT_D_EOF\n{redact.redact(value)}\nAGENT_D_EOF\n" for key, value in outputs.items()
            )


def _event(args):
    if not args.event_name or not args.event_path:
        raise UsageError(
            "--event-name and --event-path (or $GITHUB_EVENT_NAME and $GITHUB_EVENT_PATH) are required"
        )
    try:
        return load_event(args.event_name, args.event_path)
    except FileNotFoundError:
        raise UsageError(
            f"event file {args.event_path} does not exist: pass the webhook payload JSON"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot read the event file {args.event_path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # json.JSONDecodeError, or a payload that is not an object
        raise UsageError(f"event file {args.event_path} is not a webhook payload: {exc}") from None


def cmd_dispatch(args) -> int:
    from bot.github import job_summary
    from bot.github.client import log_rate_limit
    from bot.github.dispatch import Dispatcher

    event = _event(args)
    gh, credentials = _setup(event.repo)
    log_rate_limit(gh)
    details = os.environ.get("GITHUB_SERVER_URL", "") and _run_ref()
    result = Dispatcher(
        gh, event, _bots(credentials), run_ref=os.environ.get("GITHUB_RUN_ID", ""), details_url=details
    ).run()
    job_summary.append(job_summary.dispatch(result.run, result.reason, result.kernels, result.check_run_id))
    write_outputs(result.outputs())
    return 0


def cmd_finalize(args) -> int:
    from bot.github import job_summary
    from bot.github.client import log_rate_limit
    from bot.github.finalize import Finalizer, FinalizeRequest

    if not args.repo:
        raise UsageError("--repo owner/name (or $GITHUB_REPOSITORY) is required")
    gh, credentials = _setup(args.repo)
    push_token = os.environ.get("AGENT_D_PUSH_TOKEN", "")
    redact.REDACTOR.add(push_token)
    request = FinalizeRequest(
        repo=args.repo,
        pr=args.pr,
        head_sha=args.head_sha,
        base_sha=args.base_sha.strip().lower(),
        check_run_id=args.check_run_id,
        artifact_dirs=list(args.artifacts),
        commit=args.commit == "true",
        run_ref=_run_ref(),
        git_token=(lambda: push_token) if push_token else credentials.git_token,
        author=credentials.commit_author(gh),
        port_result=args.port_result,
        kernels=_kernel_list(args.kernels),
    )
    result = Finalizer(gh, request, _bots(credentials)).run()
    log_rate_limit(gh)
    job_summary.append(
        result.summary or job_summary.finalize(result.conclusion, "nothing published", [], result.notes)
    )
    outputs = asdict(result)
    del outputs["summary"]
    write_outputs({k: json.dumps(v) if isinstance(v, list) else str(v) for k, v in outputs.items()})
    return 0


def cmd_conclude(args) -> int:
    from bot.github import job_summary, publish

    if not args.repo:
        raise UsageError("--repo owner/name (or $GITHUB_REPOSITORY) is required")
    gh, _ = _setup(args.repo)
    check = gh.get_repo(args.repo).get_check_run(args.check_run_id)
    if check.status == "completed":
        print(f"check run {args.check_run_id} is concluded already ({check.conclusion}): nothing to do")
        write_outputs({"conclusion": check.conclusion or ""})
        return 0
    ended = f" ({args.finalize_result})" if args.finalize_result in FINALIZE_RESULTS else ""
    why = (
        f"agent-d's finalize job ended{ended} without concluding this check, so no verdict was "
        f"published: see the workflow run {_run_ref()}. Re-run the workflow, or comment `/agent-d rerun`."
    )
    publish.conclude(check, "failure", "agent-d error", why)
    job_summary.append(job_summary.conclude(args.check_run_id, "failure", why))
    print(f"check run {args.check_run_id} concluded as failure: finalize ended{ended} without concluding it")
    write_outputs({"conclusion": "failure"})
    return 0


FINALIZE_RESULTS = ("failure", "cancelled", "skipped")  # GitHub's words for a job that did not succeed


def _kernel_list(text: str) -> tuple[str, ...]:
    text = text.strip()
    if text.startswith("["):
        return tuple(str(k) for k in json.loads(text))
    return tuple(text.split())


def cmd_run(args) -> int:
    from bot.github.runner import pipeline_port_fn, run_all

    event = _event(args)
    gh, credentials = _setup(event.repo)
    with tempfile.TemporaryDirectory(prefix="agent-d-run-") as tmp:
        workdir = args.workdir or Path(tmp)
        summary = run_all(gh, event, pipeline_port_fn(), workdir, _bots(credentials), _run_ref(), credentials)
    outputs = summary.dispatch.outputs()
    if summary.finalize is not None:
        outputs.update({f"finalize_{k}": v for k, v in summary.finalize.outputs().items()})
    write_outputs(outputs)
    return 0


def cmd_port_job(args) -> int:
    from bot.build.runner_cache import CacheRoots
    from bot.github import job_summary
    from bot.github.artifact import read_artifact
    from bot.github.port_job import PortJobError, run_port_job
    from bot.github.runner import pipeline_port_fn
    from bot.targets.targets import existing_dir

    repo = existing_dir(args.repo, "--repo")
    perf = perf_choice(args.perf, dict(os.environ))
    if args.cargo_seed is not None and args.cargo_cache is None:
        raise UsageError("--cargo-seed is copied into --cargo-cache: give --cargo-cache too")
    # as given, not resolved: the seed was built at this same absolute path (bot/build/runner_cache.py)
    cache = None
    if args.cargo_cache is not None:
        seed = args.cargo_seed.absolute() if args.cargo_seed is not None else None
        cache = CacheRoots(args.cargo_cache.absolute(), seed)
    redact.install()
    try:
        artifact = run_port_job(
            repo,
            args.head_sha,
            [k for arg in args.kernel for k in arg.split()],
            args.artifact,
            pipeline_port_fn(
                cargo_cache=cache,
                test_jobs=args.test_jobs,
                dry_run_first=args.dry_run_first,
                perf=perf,
                perf_timeout=args.perf_timeout,
                perf_configs=args.perf_configs,
                sandbox=args.sandbox,
            ),
            repo_name=args.repo_name,
            base_sha=args.base_sha.strip().lower(),
        )
    except PortJobError as exc:  # a wrong commit or kernel name: said before any port ran
        raise UsageError(str(exc)) from None
    if job_summary.wanted():
        job_summary.append(job_summary.port_job([read_artifact(artifact)]))
    print(f"agent-d: artifact written to {artifact}")
    return 0


def cmd_seed_cache(args) -> int:
    from bot import progress
    from bot.build import build, runner_cache, toolchain
    from bot.errors import StageStop
    from bot.targets.targets import existing_dir
    from bot.targets.types import KERNELS_CRATE

    repo = existing_dir(args.repo, "--repo")
    if args.cargo_cache is None:
        raise UsageError("--cargo-cache DIR (or $AGENT_D_CARGO_CACHE) is required: the seed to write")
    crate = repo / KERNELS_CRATE
    if not (crate / "Cargo.toml").is_file():
        raise UsageError(f"--repo {repo}: no {KERNELS_CRATE}/Cargo.toml; pass a TileGym checkout")
    try:
        tools = toolchain.resolve()
        prepared, built = runner_cache.build_seed(
            args.cargo_cache.absolute(),
            crate,
            tools.env(),
            lambda target_dir, cargo_home: build.compile_crate(
                crate, tools, target_dir, progress.to_stderr, cargo_home=cargo_home
            ),
        )
    except StageStop as stop:  # no cargo, libclang or CUDA headers on this machine
        print(f"agent-d: BLOCKED ({stop.klass}): {stop.reason}", file=sys.stderr)
        return SEED_NO_TOOLCHAIN
    except runner_cache.CacheUnavailable as exc:
        print(f"agent-d: BLOCKED (env): {exc}", file=sys.stderr)
        return SEED_NO_TOOLCHAIN
    print(f"agent-d: seed {prepared.log_line()}", file=sys.stderr)
    if not built.ok:
        tail = "\n".join(built.log_text().strip().splitlines()[-build.LOG_TAIL :])
        print(f"{tail}\nagent-d: the seed's build failed; port jobs will build cold", file=sys.stderr)
        return SEED_BUILD_FAILED
    print(f"agent-d: seed ready: {prepared.target_dir} ({built.seconds:.0f} s)")
    return 0
