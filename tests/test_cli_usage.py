"""Usage errors are usage errors: exit 2, one line on stderr that says what to do, no traceback,
nothing written to disk; a reader that closes stdout early ends the command quietly.

Each case runs ``python -m bot.cli`` as a separate process, as a user would, with the working
directory set to an empty folder that must stay empty.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.targets.targets import kernels_in, unknown_kernel

ROOT = Path(__file__).resolve().parent.parent
OPS = "src/tilegym/ops/cutile_rs"
TOKENS = ("AGENT_D_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH")


def agent_d(args: list[str], cwd: Path, **popen) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in TOKENS}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's bot, not an installed one
    env["CUTILE_KERNEL_OUT_ROOT"] = ""  # reports would default into the checkout
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, **popen
    )


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture()
def kernels_repo(tmp_path) -> Path:
    """A git checkout with two kernel folders (nothing else is needed before the name check)."""
    repo = tmp_path / "repo"
    for op in ("silu_and_mul", "swiglu"):
        (repo / OPS / f"{op}_kernel").mkdir(parents=True)
        (repo / OPS / f"{op}_kernel" / "kernel.rs").write_text("#[cutile::module]\npub mod m {}\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def assert_usage_error(proc: subprocess.CompletedProcess, *expected: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr  # one line, no usage dump, no traceback
    assert "Traceback" not in proc.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_missing_repo_is_a_usage_error_and_creates_nothing(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    missing = tmp_path / "no-such-checkout"
    for args in (
        ["port", "--repo", str(missing)],
        ["port", "--repo", str(missing), "--kernel", "silu_and_mul"],
        ["verify", "--repo", str(missing), "--kernel", "silu_and_mul"],
        ["plan", "--repo", str(missing), "--kernel", "silu_and_mul"],
        ["validate", "silu_and_mul", "--repo", str(missing)],
        ["port-job", "--repo", str(missing), "--head-sha", "0" * 40, "--base-sha", "1" * 40, "--kernel", "x"]
        + ["--artifact", "a"],
    ):
        proc = agent_d(args, cwd)
        assert_usage_error(proc, "--repo", "no such directory")
    assert not missing.exists()
    assert tree(cwd) == []


def test_a_demo_workdir_that_is_a_file_is_a_usage_error_and_the_file_is_kept(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    proc = agent_d(["demo", "--workdir", str(a_file)], tmp_path)
    assert_usage_error(proc, "--workdir", "a file, not a folder")
    assert a_file.read_text() == "mine\n"


def test_a_wrong_python_is_a_usage_error_before_any_build(kernels_repo, tmp_path):
    not_python = tmp_path / "not-python"
    not_python.write_text("#!/bin/sh\nexit 3\n")
    not_python.chmod(0o755)
    before = tree(kernels_repo)
    for python, why in (
        ("python3.0-nowhere", "no such program"),
        (str(not_python), "does not run Python (exit 3)"),
    ):
        for command in ("port", "verify"):
            args = [command, "--repo", str(kernels_repo), "--kernel", "silu_and_mul", "--python", python]
            proc = agent_d(args, tmp_path)
            assert_usage_error(proc, "--python", why)
    assert tree(kernels_repo) == before  # nothing built, nothing written


def test_unknown_kernel_suggests_the_closest_names_and_creates_nothing(kernels_repo, tmp_path):
    before = tree(kernels_repo)
    for command in ("port", "verify", "plan"):
        proc = agent_d([command, "--repo", str(kernels_repo), "--kernel", "silu_and_mull"], tmp_path)
        assert_usage_error(proc, "unknown kernel 'silu_and_mull'", "did you mean silu_and_mul?")
    assert tree(kernels_repo) == before  # no cutile_kernel_out, no reports


def test_unknown_kernel_far_from_any_name_lists_what_the_checkout_has(kernels_repo):
    assert kernels_in(kernels_repo) == ["silu_and_mul", "swiglu"]
    message = str(unknown_kernel(kernels_repo, "matmul"))
    assert "this checkout has: silu_and_mul, swiglu" in message


def test_event_file_problems_are_usage_errors(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"action": ')
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    cases = {
        str(tmp_path / "missing.json"): "does not exist",
        str(broken): "is not a webhook payload",
        str(listed): "not an object",
    }
    for command in ("run", "dispatch"):
        for path, expected in cases.items():
            proc = agent_d([command, "--event-name", "pull_request", "--event-path", path], tmp_path)
            assert_usage_error(proc, path, expected)
        proc = agent_d([command], tmp_path)
        assert_usage_error(proc, "--event-name and --event-path")


def test_no_token_is_a_usage_error_before_anything_is_created(tmp_path):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "opened", "repository": {"full_name": "o/r"}}))
    workdir = tmp_path / "work"
    proc = agent_d(
        ["run", "--event-name", "pull_request", "--event-path", str(event), "--workdir", str(workdir)],
        tmp_path,
    )
    assert_usage_error(proc, "no GitHub token", "AGENT_D_TOKEN")
    assert not workdir.exists()
    proc = agent_d(
        ["finalize", "--repo", "o/r", "--pr", "1", "--head-sha", "a" * 40, "--check-run-id", "1",
         "--artifacts", str(tmp_path)],
        tmp_path,
    )  # fmt: skip
    assert_usage_error(proc, "no GitHub token")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["port", "--bogus"], "unrecognized arguments: --bogus"),
        (["verify"], "the following arguments are required: --kernel"),
        (["port", "--kernel", "a", "--base", "HEAD~2"], "not allowed with argument"),
        (["port", "--test-timeout", "soon"], "'soon' is not a number of seconds"),
        (["port", "--test-timeout", "0"], "give a positive number of seconds"),
        (["port", "--test-jobs", "0"], "argument --test-jobs: '0': give 1 or more kernels at a time"),
        (["port", "--test-jobs", "-1"], "'-1': give 1 or more kernels at a time"),
        (["verify", "--kernel", "x", "--test-jobs", "x"], "'x' is not a whole number of kernels"),
        (["verify", "--kernel", "x", "--test-jobs", "1.5"], "'1.5' is not a whole number of kernels"),
        (
            ["port-job", "--head-sha", "0" * 40, "--base-sha", "1" * 40, "--kernel", "x", "--artifact", "a"]
            + ["--test-jobs", "0"],
            "give 1 or more kernels at a time",
        ),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "name a command: port, verify"),
        (["port", "--kernel", "Bad-Name"], "is not a plain identifier"),
    ],
)
def test_bad_flags_end_in_one_line_that_points_at_help(args, expected, tmp_path):
    proc = agent_d(args, tmp_path)
    assert_usage_error(proc, expected)
    if args and args[0] != "frobnicate" and "Bad-Name" not in args:
        assert "--help" in proc.stderr
    assert tree(tmp_path) == []


def test_test_jobs_reaches_the_port_of_port_verify_and_port_job(tmp_path, monkeypatch):
    from bot import cli
    from bot.classify.types import Verdict, VerdictKind
    from bot.github import port_job, runner
    from bot.report.types import PortResult
    from bot.targets.types import Target

    given: list[int] = []
    named: list = []

    def port(options):
        given.append(options.test_jobs)
        named.append(options.kernel)
        return [PortResult(Target(tmp_path, "x"), Verdict(VerdictKind.ALL_PASS, "", "passed"), [], "")]

    monkeypatch.setattr(cli, "port", port)
    for args in (["port", "--repo", str(tmp_path)], ["verify", "--repo", str(tmp_path), "--kernel", "x"]):
        assert cli.main([*args, "--quiet", "--test-jobs", "3"]) == 0
        assert cli.main([*args, "--quiet"]) == 0
    assert given == [3, 1, 3, 1]
    # verify takes several kernels, so that --test-jobs has kernels to test side by side
    assert cli.main(["verify", "--repo", str(tmp_path), "--kernel", "x", "--kernel", "y", "--quiet"]) == 0
    assert named[-1] == ["x", "y"] and named[2] == ["x"]
    ported: list[dict] = []
    monkeypatch.setattr(runner, "pipeline_port_fn", lambda **options: ported.append(options))
    monkeypatch.setattr(port_job, "run_port_job", lambda *args, **kwargs: tmp_path / "artifact")
    job = ["port-job", "--repo", str(tmp_path), "--head-sha", "0" * 40, "--base-sha", "1" * 40]
    job += ["--kernel", "x", "--artifact", "a"]
    assert cli.main([*job, "--test-jobs", "2"]) == 0 and cli.main(job) == 0
    assert [p["test_jobs"] for p in ported] == [2, 1]


def test_the_workflows_port_step_hands_its_test_jobs_input_to_port_job():
    import shlex

    import yaml

    from bot.cli import build_parser

    workflow = yaml.safe_load((ROOT / ".github/workflows/agent-d.yml").read_text())
    given = workflow[True]["workflow_call"]["inputs"]["test-jobs"]  # YAML 1.1 reads `on` as True
    assert (given["type"], given["default"]) == ("number", 1)
    [step] = [s for s in workflow["jobs"]["port"]["steps"] if "agent-d port-job" in s.get("run", "")]
    assert step["env"]["TEST_JOBS"] == "${{ inputs.test-jobs }}"
    env = {"HEAD_SHA": "0" * 40, "BASE_SHA": "1" * 40, "KERNEL": "silu_and_mul swiglu", "ARTIFACT": "a"}
    env["TEST_JOBS"] = "2"
    line = step["run"]
    for name, value in env.items():
        line = line.replace(f'"${name}"', shlex.quote(value))
    argv = shlex.split(line)
    assert argv[:2] == ["agent-d", "port-job"]
    parsed = build_parser().parse_args(argv[1:])
    assert parsed.test_jobs == 2 and parsed.base_sha == "1" * 40


def test_closed_stdout_ends_quietly(tmp_path):
    """`agent-d validate ... | head -0`: the reader is gone before the result is written."""
    (tmp_path / "out" / "x").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for args in (
        ["validate", "x", "--repo", str(tmp_path), "--out", str(tmp_path / "out")],
        ["port", "--help"],
    ):
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.close()  # nobody reads: every write to stdout fails with EPIPE
        err = proc.stderr.read().decode()
        # validate: 128 + SIGPIPE, as a shell tool killed by the pipe; --help: argparse's own quiet exit
        assert proc.wait() == (141 if args[0] == "validate" else 0), err
        assert err == "", err  # no BrokenPipeError, no "Exception ignored"


def test_every_subcommand_help_says_what_it_does():
    from bot.cli import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(COMMANDS)
    for name, command in sub.choices.items():
        assert command.description and len(command.description) > 40, name
