"""``--perf`` / ``--no-perf`` (and ``$AGENT_D_PERF``, the workflow's ``perf`` input) reach the port of
``port``, ``verify`` and ``port-job``; a bad value is a usage error before anything runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from bot import cli
from bot.classify.types import Verdict, VerdictKind
from bot.cli_args import PERF_ENV, perf_choice
from bot.errors import UsageError
from bot.github import port_job, runner
from bot.report.types import PortResult
from bot.targets.types import Target

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "given, env, wanted",
    [
        (None, "", None),
        (None, "auto", None),
        (None, "on", True),
        (None, "OFF", False),
        (True, "off", True),
        (False, "on", False),
    ],
)
def test_the_flag_wins_over_the_environment(given, env, wanted):
    assert perf_choice(given, {PERF_ENV: env}) is wanted


def test_a_bad_environment_value_is_a_usage_error(tmp_path, monkeypatch, capsys):
    with pytest.raises(UsageError, match="AGENT_D_PERF='maybe': give on, off or auto"):
        perf_choice(None, {PERF_ENV: "maybe"})
    monkeypatch.setenv(PERF_ENV, "maybe")
    assert cli.main(["port", "--repo", str(tmp_path), "--quiet"]) == 2
    assert "give on, off or auto" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_perf_reaches_the_port_of_port_verify_and_port_job(tmp_path, monkeypatch):
    seen: list[tuple] = []

    def port(options):
        seen.append((options.perf, options.perf_timeout))
        return [PortResult(Target(tmp_path, "x"), Verdict(VerdictKind.ALL_PASS, "", "passed"), [], "")]

    monkeypatch.setattr(cli, "port", port)
    monkeypatch.delenv(PERF_ENV, raising=False)
    for args in (["port", "--repo", str(tmp_path)], ["verify", "--repo", str(tmp_path), "--kernel", "x"]):
        assert cli.main([*args, "--quiet", "--no-perf"]) == 0
        assert cli.main([*args, "--quiet", "--perf", "--perf-timeout", "60"]) == 0
        assert cli.main([*args, "--quiet"]) == 0
    assert seen == [(False, 1800.0), (True, 60.0), (None, 1800.0)] * 2
    ported: list[dict] = []
    monkeypatch.setattr(runner, "pipeline_port_fn", lambda **options: ported.append(options))
    monkeypatch.setattr(port_job, "run_port_job", lambda *args, **kwargs: tmp_path / "artifact")
    job = [
        "port-job",
        "--repo",
        str(tmp_path),
        "--head-sha",
        "0" * 40,
        "--base-sha",
        "1" * 40,
        "--kernel",
        "x",
        "--artifact",
        "a",
    ]
    monkeypatch.setenv(PERF_ENV, "off")
    assert cli.main(job) == 0 and cli.main([*job, "--perf"]) == 0
    assert [p["perf"] for p in ported] == [False, True]
    with pytest.raises(SystemExit) as stop:  # argparse's own usage error
        cli.main([*job, "--perf-timeout", "0"])
    assert stop.value.code == 2


def test_the_workflows_perf_input_reaches_port_job_through_the_environment():
    workflow = yaml.safe_load((ROOT / ".github/workflows/agent-d.yml").read_text())
    given = workflow[True]["workflow_call"]["inputs"]["perf"]  # YAML 1.1 reads `on` as True
    assert (given["type"], given["default"]) == ("boolean", True)
    [step] = [s for s in workflow["jobs"]["port"]["steps"] if "agent-d port-job" in s.get("run", "")]
    assert step["env"][PERF_ENV] == "${{ inputs.perf && 'on' || 'off' }}"
    assert "--perf" not in shlex.split(step["run"])  # the environment carries it: no flag to keep in sync
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["inputs"]["perf"]["default"] == "auto"
    [run] = [s for s in action["runs"]["steps"] if s.get("id") == "agent-d"]
    assert run["env"][PERF_ENV] == "${{ inputs.perf }}"
