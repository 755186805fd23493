"""Print the wall of the PR path for a pull request that adds 1 kernel and one that adds 3, on one
machine, warm, their ratio, and where the time goes.

The PR path is what ``agent-d run`` does for a pull request, step by step, against the local
GitHub of the tests (tests/ghfake: the REST API checked against GitHub's OpenAPI description, git
remotes on disk): dispatch (the check run), a fresh clone of the head, the port job (generation,
one cargo build for the pull request, ABI smoke and tests per kernel, reports and validator, the
artifact), and finalize (the artifact checked, the host files regenerated from the head, the
commit pushed, check, review and comment). The repository is a TileGym checkout from the
tilegym 1.5.1 wheel with silu_and_mul, swiglu and matmul; a pull request adds the kernel.rs of the
first one or of all three (the crate holds all three ops either way).

Where the time goes: generation (discover .. apply, every kernel), build (toolchain and cargo,
counted once: the build is shared), tests (ABI smoke, interpreter, pytest, classification, every
kernel), publishing (reports and validator, the artifact, dispatch and finalize with their GitHub
calls, paced as agent-d paces them on GitHub unless --no-pacing), other (the clone).

"Warm": one unmeasured pull request first, so the cargo target folder holds the compiled cutile
crates, and the machine's caches are filled. On a machine without a GPU each kernel's test stage
ends BLOCKED (env) within a second, so the ratio there covers generation, build and publishing;
run it on a GPU runner for the tests. Figures, not assertions.

    python benchmarks/pr_path.py [--runs 3] [--cargo-target-dir DIR] [--python EXE] [--no-pacing]
                                 [--read-pacing SECONDS]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's bot, not an installed one
from ghfake import GitHubFake, ensure_assets
from ghfake.spec import load_spec

from bot.demo import assemble_checkout
from bot.github import redact
from bot.github.client import ClientSettings, make_github
from bot.github.dispatch import Dispatcher
from bot.github.events import parse_event
from bot.github.finalize import Finalizer, FinalizeRequest
from bot.github.port_job import run_port_job
from bot.github.runner import PipelinePort, prepare_checkout
from bot.pipeline import generate_only
from bot.wheel import default_cache_dir, tilegym_wheel

OPS = ["silu_and_mul", "swiglu", "matmul"]
TOKEN = "ghs_benchmarkTokenValue0123456789abcdef"
BOTS = ("agent-d[bot]",)
REPO = "nvidia/tilegym"
GENERATION = {"discover", "kernel signature", "checkout", "facts", "launch plan", "generate", "apply"}
BUILD = {"toolchain", "build"}  # recorded in every kernel with the same shared seconds
TESTS = {"abi smoke", "interpreter", "test", "classify"}
PHASES = ("generation", "build", "tests", "publishing", "other")
REVIEW = ("finalize to review", "writes before the review")  # from finalize's start, by the fake's clock


class TimedPort(PipelinePort):
    """The real port, keeping each kernel's stage records for the breakdown."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.last: list = []  # the PortResult of each kernel of the last pull request

    def results(self, repo: Path, ops: list[str]) -> list:
        self.last = super().results(repo, ops)
        return self.last


def tree_files(repo: Path, rev: str, only: list[str] | None = None) -> dict[str, bytes]:
    """The files of ``rev`` (or just ``only``) as the fake's commit helper takes them."""
    names = (
        only
        or subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", rev], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.split()
    )
    return {
        name: subprocess.run(
            ["git", "show", f"{rev}:{name}"], cwd=repo, capture_output=True, check=True
        ).stdout
        for name in names
    }


WRITES = ("POST", "PATCH", "PUT", "DELETE")


def to_review(log, since: float) -> tuple[float, int]:
    """When finalize's review reached GitHub, and how many API writes finalize made before it."""
    writes = [e for e in log if e.at >= since and e.method in WRITES]
    for n, e in enumerate(writes):
        if e.method == "POST" and e.path.endswith("/reviews"):
            return e.at, n
    raise SystemExit("finalize posted no review")


def one_pr(spec, assets, work: Path, kernels: list[str], port: TimedPort, settings_for) -> dict[str, float]:
    """One pull request adding ``kernels`` through the whole PR path; seconds per phase and the wall."""
    checkout = assemble_checkout(work / "source", tilegym_wheel(), OPS, kernels)
    added = subprocess.run(
        ["git", "diff", "--name-only", checkout.base_sha, checkout.head_sha],
        cwd=checkout.repo, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    fake = GitHubFake(spec, assets, work / "ghfake").start()
    try:
        fake.set_token(TOKEN, BOTS[0])
        fake.create_repo(*REPO.split("/"), files=tree_files(checkout.repo, checkout.base_sha))
        fake.add_collaborator("maint", "maintain", REPO)
        fake.commit(
            REPO, "add-kernels", tree_files(checkout.repo, checkout.head_sha, added), "add kernels", "maint"
        )
        pr = fake.open_pr(REPO, None, "add-kernels", "Add kernels", "maint")
        gh = make_github(TOKEN, settings_for(fake.base_url))
        event = parse_event("pull_request", fake.webhook("pull_request", "opened", pr=pr.number))
        start = time.monotonic()
        decision = Dispatcher(gh, event, BOTS, run_ref="bench").run()
        dispatched = time.monotonic()
        if not decision.run:
            raise SystemExit(f"dispatch did not run the port: {decision.reason}")
        (entry,) = decision.matrix  # matrix: single, every kernel in one job
        clone = prepare_checkout(
            fake.clone_url(REPO), "refs/heads/add-kernels", entry.head_sha, work / "clone"
        )
        cloned = time.monotonic()
        artifact = run_port_job(
            clone, entry.head_sha, entry.kernel.split(), work / "artifact", port, repo_name=REPO,
            base_sha=entry.base_sha,
        )  # fmt: skip
        ported = time.monotonic()
        request = FinalizeRequest(
            repo=REPO, pr=decision.pr, head_sha=decision.head_sha, check_run_id=decision.check_run_id,
            artifact_dirs=[artifact], commit=decision.commit, run_ref="bench", git_token=lambda: TOKEN,
            kernels=tuple(decision.kernels), base_sha=decision.base_sha,
        )  # fmt: skip
        finalizing = time.monotonic()
        result = Finalizer(gh, request, BOTS, generate_only).run()
        end = time.monotonic()
        reviewed, writes_before = to_review(fake.log, finalizing)
    finally:
        fake.stop()
    if not result.pushed:
        print(f"  note: finalize concluded {result.conclusion} without a push: {'; '.join(result.notes)}")
    phases: dict = {name: 0.0 for name in PHASES}
    kernel_stages = [r.stages for r in port.last]
    for stages in kernel_stages:
        for s in stages:
            if s.name in GENERATION:
                phases["generation"] += s.seconds
            elif s.name in TESTS:
                phases["tests"] += s.seconds
    phases["build"] = max(
        (sum(s.seconds for s in stages if s.name in BUILD) for stages in kernel_stages), default=0.0
    )
    in_port = phases["generation"] + phases["build"] + phases["tests"]
    phases["publishing"] = (dispatched - start) + (ported - cloned - in_port) + (end - ported)
    phases["other"] = cloned - dispatched
    phases["wall"] = end - start
    phases["finalize to review"] = reviewed - finalizing
    phases["writes before the review"] = writes_before
    phases["verdicts"] = ", ".join(f"{r.target.op}: {r.verdict.headline}" for r in port.last)
    phases["pytest_ran"] = any(s.name == "test" and s.status == "ok" for st in kernel_stages for s in st)
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="pull requests of each size (the median is printed)")
    ap.add_argument("--cargo-target-dir", type=Path, default=default_cache_dir() / "cargo-target")
    ap.add_argument("--python", default="", help="interpreter that runs pytest (default: this one)")
    ap.add_argument("--no-pacing", action="store_true", help="no pause between GitHub requests")
    ap.add_argument(
        "--read-pacing",
        type=float,
        default=None,
        help="seconds between any two requests, reads too (before issue 35: 0.25; now: none, writes 1 s apart)",
    )
    args = ap.parse_args()
    assets = ensure_assets()  # the download, if any, stays outside the timings
    spec = load_spec(assets.spec_path)
    redact.install()
    os.environ.setdefault("GITHUB_API_URL", "http://127.0.0.1")

    def settings_for(url: str) -> ClientSettings:
        pacing = {"seconds_between_requests": None, "seconds_between_writes": None} if args.no_pacing else {}
        if args.read_pacing is not None and not args.no_pacing:
            pacing["seconds_between_requests"] = args.read_pacing or None
        return ClientSettings(api_url=url, **pacing)

    quiet = {"echo": lambda _: None, "answer": lambda _: None}  # no progress lines, no validator blocks
    port = TimedPort(cargo_target_dir=args.cargo_target_dir.resolve(), python=args.python, **quiet)
    print(
        f"machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}; {time.strftime('%Y-%m-%d')}"
    )
    figures: dict[int, list[dict]] = {1: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="agent-d-pr-path-") as tmp:
        work = Path(tmp)
        print("warm-up: one pull request with 3 kernels (not measured)")
        one_pr(spec, assets, work / "warm", OPS, port, settings_for)
        for run in range(args.runs):
            for size in (1, 3):  # alternated, so a slow moment of the machine hits both sizes
                got = one_pr(spec, assets, work / f"r{run}-{size}", OPS[:size], port, settings_for)
                figures[size].append(got)
                print(
                    f"  run {run + 1}, {size} kernel{'s' if size > 1 else ''}: wall {got['wall']:.1f} s ({got['verdicts']})"
                )
    median = {
        size: {k: statistics.median(f[k] for f in runs) for k in (*PHASES, "wall", *REVIEW)}
        for size, runs in figures.items()
    }
    print()
    print(f"{'phase (median seconds)':<26}{'1 kernel':>10}{'3 kernels':>11}")
    for phase in (*PHASES, "wall", *REVIEW):
        print(f"{phase:<26}{median[1][phase]:>10.1f}{median[3][phase]:>11.1f}")
    ratio = median[3]["wall"] / median[1]["wall"]
    print(f"\nwall ratio, 3 kernels / 1 kernel: {ratio:.2f} (goal: at most 1.5; median of {args.runs} each)")
    if not any(f["pytest_ran"] for runs in figures.values() for f in runs):
        print(
            "no kernel's pytest ran here (each test stage ended BLOCKED env: no GPU), so the tests phase is "
            "the ABI smoke and the environment probe only; run this on a GPU runner for the test time"
        )


if __name__ == "__main__":
    main()
