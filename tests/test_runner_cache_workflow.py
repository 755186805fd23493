"""The workflow's side of the runner's cargo cache: the port job's volumes, the runner-cache input's
guard, and the seed workflow example in docs/github.md."""

from __future__ import annotations

import re

import pytest
import yaml
from runner_cache_support import ROOT
from workflow_support import run_dispatch_guard, workflow


def test_the_port_job_mounts_its_own_pull_requests_volume_and_the_seed_read_only():
    wf = workflow()
    assert wf[True]["workflow_call"]["inputs"]["runner-cache"]["default"] == ""  # YAML 1.1: `on` is True
    port = wf["jobs"]["port"]
    options = port["container"]["options"]
    sandbox = "--security-opt seccomp=unconfined --security-opt apparmor=unconfined"  # bwrap's namespaces
    assert options.startswith("${{ inputs.runner-cache != '' && format(") and options.endswith(
        f"|| '--gpus all {sandbox}' }}}}"
    )  # empty input: the options of before, no mount
    args = "inputs.runner-cache, github.repository_id, needs.dispatch.outputs.pr"
    mounts = re.search(rf"format\('([^']*)', {args}\)", options)
    assert mounts, options
    assert mounts.group(1) == (
        f"--gpus all {sandbox} -v {{0}}-{{1}}-pr-{{2}}:/agent-d-cache -v {{0}}-{{1}}-seed:/agent-d-seed:ro"
    )
    [step] = [s for s in port["steps"] if "agent-d port-job" in s.get("run", "")]
    assert step["env"]["AGENT_D_CARGO_CACHE"] == "${{ inputs.runner-cache != '' && '/agent-d-cache' || '' }}"
    assert step["env"]["AGENT_D_CARGO_SEED"] == "${{ inputs.runner-cache != '' && '/agent-d-seed' || '' }}"


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("", True),
        ("agent-d-cargo", True),
        ("tilegym.cache_2", True),
        ("agent-d-cargo --privileged", False),  # a second docker option
        ("/srv/cache", False),  # a host path would be a bind mount docker creates owned by root
        ("cache:/etc", False),
        ("-v", False),
    ],
)
def test_the_runner_cache_input_must_be_a_volume_name(name, accepted):
    index, proc = run_dispatch_guard("RUNNER_CACHE", name)
    assert index == 1, "checked before anything of the event is read"
    assert (proc.returncode == 0) == accepted, proc.stdout + proc.stderr


def test_the_seed_workflow_in_the_docs_is_the_linted_example():
    example = (ROOT / "docs/examples/tilegym-agent-d-seed.yml").read_text()
    docs = (ROOT / "docs/github.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", docs, re.S)
    assert example in blocks
    seed = yaml.safe_load(example)["jobs"]["seed"]
    # the port jobs' seed volume (prefix agent-d-cargo), at the path they build at
    assert seed["container"]["options"] == "-v agent-d-cargo-${{ github.repository_id }}-seed:/agent-d-cache"
    assert "pull_request" not in str(yaml.safe_load(example)[True]) and "issue_comment" not in example
