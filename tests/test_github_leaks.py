"""The runner's secrets never reach GitHub, end to end: dispatch, the port job, finalize.

The port function stands in for the pull request's code (a build script or a test): it reads
the environment of a child process and prints all of it into its log and its reason, the
parts of the verdict that finalize posts. Only the allow-listed variables may be there.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from ghfake.fixtures import ghfake_assets, ghfake_spec, github_fake  # noqa: F401
from ghfake.server import DOCS
from github_world import BOTS, CANARY, REPO, world  # noqa: F401
from test_github_artifact import LEAKY
from test_github_support import VALIDATOR, fake_generate

from bot.github.credentials import TokenCredentials
from bot.github.dispatch import Dispatcher
from bot.github.finalize import Finalizer, FinalizeRequest
from bot.github.runner import run_all


def test_pr_code_prints_its_environment_and_no_runner_secret_reaches_github(
    world,  # noqa: F811
    monkeypatch,
    caplog,
    tmp_path,
):
    caplog.set_level(logging.DEBUG)
    for name, value in LEAKY.items():
        monkeypatch.setenv(name, value)
    seen: dict[str, str] = {}

    def pr_code_prints_env(repo: Path, op: str):
        out = subprocess.run(["env", "-0"], capture_output=True, text=True, check=True).stdout
        seen.update(line.split("=", 1) for line in out.split("\0") if "=" in line)
        fake_generate(repo, op)  # honest files: only the printed environment is at stake
        dump = "\n".join(f"{k}={v}" for k, v in sorted(seen.items()))
        block = VALIDATOR.format(op=op).replace("exit=0\n\n$ validate", f"{dump}\nexit=0\n\n$ validate", 1)
        return "ALL_PASS", "", f"the test saw {dump}", block

    pr = world.open_kernel_pr()
    event = world.event("pull_request", "opened", pr=pr.number)
    s = run_all(
        world.gh,
        event,
        pr_code_prints_env,
        tmp_path / "run",
        BOTS,
        "env",
        TokenCredentials(CANARY),
        fake_generate,
    )
    assert s.dispatch.run and s.finalize.pushed and s.finalize.conclusion == "success"
    assert "PATH" in seen and "HOME" in seen
    [review] = world.reviews(pr.number)
    assert "PATH=" in review.body  # the printed environment is posted: only its secrets are not
    traffic = [json.dumps(ex.request_body) + json.dumps(ex.response_body) for ex in world.fake.exchanges]
    texts = [*traffic, caplog.text]
    texts += [p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*") if p.is_file()]
    leaked = sorted({k for k, v in LEAKY.items() for t in texts if v in t})
    assert leaked == [], f"runner secrets on GitHub or in the artifact: {leaked}"
    assert not set(LEAKY) & set(seen), sorted(set(LEAKY) & set(seen))
    assert CANARY not in "\n".join(texts)


def test_a_github_error_echoing_the_token_leaves_it_out_of_finalize_s_exception(world):  # noqa: F811
    pr = world.open_kernel_pr()
    d = Dispatcher(world.gh, world.event("pull_request", "opened", pr=pr.number), BOTS).run()
    echoed = {"message": f"upstream failed for 'Authorization: token {CANARY}'", "documentation_url": DOCS}
    world.fake.inject("POST", r"/issues/\d+/reactions$", 500, body=echoed)  # finalize's lock, not retried
    request = FinalizeRequest(REPO, pr.number, d.head_sha, d.check_run_id, [])
    with pytest.raises(Exception) as crash:
        Finalizer(world.gh, request, BOTS, fake_generate).run()
    assert any(i.hits for i in world.fake.injections)  # GitHub did echo it
    shown = "".join(traceback.format_exception(crash.value))
    assert CANARY not in shown and "***" in shown and "upstream failed" in shown
    # and the check is still concluded, with no token either
    check = world.repo.get_check_run(d.check_run_id)
    assert check.status == "completed" and CANARY not in f"{check.output.title} {check.output.summary}"


def test_pr_code_in_the_sandbox_finds_no_runner_variable_in_proc_and_none_reaches_github(
    world,  # noqa: F811
    tmp_path,
):
    """Finding 2 of issue 21: PR code read ``/proc/<ancestor>/environ``, and a variable of the runner
    with an innocent name reached GitHub in the verdict. The port function stands in for the PR's
    code as above, started the way the port starts it (bot/sandbox.py) by a process whose own
    environment holds the runner's variable: it scans every ``/proc/*/environ`` it can see and
    prints what it found into the verdict that finalize posts."""
    from test_sandbox import PROBE_PY, ROOT, Listener, _require_sandbox

    _require_sandbox(tmp_path)
    planted = "kube-config-of-the-runner-0123456789"
    secret = tmp_path / "runner-credentials"
    secret.write_text("runner-file-content-0123456789")
    listener = Listener()
    checkout = tmp_path / "pr-code"
    checkout.mkdir()
    probe = checkout / "probe.py"
    probe.write_text(
        PROBE_PY
        + f"print(_sandbox_probe({str(secret)!r}, {planted!r}, {listener.port}, {str(checkout / 'late')!r}))\n"
    )
    driver = (
        "import subprocess, sys\nfrom pathlib import Path\nfrom bot import sandbox\n"
        f"box = sandbox.make([Path({str(checkout)!r})], [])\n"
        "with sandbox.active(box):\n"
        f"    argv = sandbox.wrap([sys.executable, {str(probe)!r}], Path({str(checkout)!r}))\n"
        "print(subprocess.run(argv, capture_output=True, text=True).stdout.strip())\n"
    )
    found: list[str] = []

    def pr_code_reads_proc(repo: Path, op: str):
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "KUBECONFIG": planted}  # the runner's
        out = subprocess.run(
            [sys.executable, "-c", driver], env=env, capture_output=True, text=True, timeout=60
        )
        found.append(out.stdout.strip() or out.stderr.strip())
        fake_generate(repo, op)
        return "ALL_PASS", "", f"the PR's code found: {found[-1]}", VALIDATOR.format(op=op)

    try:
        pr = world.open_kernel_pr()
        event = world.event("pull_request", "opened", pr=pr.number)
        s = run_all(
            world.gh,
            event,
            pr_code_reads_proc,
            tmp_path / "run",
            BOTS,
            "proc",
            TokenCredentials(CANARY),
            fake_generate,
        )
    finally:
        listener.close()
    assert s.finalize.conclusion == "success", found
    assert "environ: not found in any /proc/*/environ" in found[0], found
    assert "file: No such file or directory" in found[0] and "net: connected" not in found[0]
    [review] = world.reviews(pr.number)
    traffic = "".join(
        json.dumps(ex.request_body) + json.dumps(ex.response_body) for ex in world.fake.exchanges
    )
    assert "environ: not found" in traffic  # the verdict text was posted...
    assert planted not in traffic and "runner-file-content" not in traffic  # ...and nothing of the runner
    assert listener.accepted == 0
