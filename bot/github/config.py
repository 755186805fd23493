"""``.github/agent-d.yml``: the repository's settings, read from the default branch only.

A PR can never loosen its own gate: the file is fetched at the default branch's tip,
never from the PR head.  Unknown keys are errors (the schema sets
``additionalProperties: false``), so a typo does not silently fall back to a default.
Settings that were removed get an error that says what to use instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jsonschema
import yaml
from github import GithubException

CONFIG_PATH = ".github/agent-d.yml"
# Keys that are not settings of this file, and what to use instead.
REMOVED = {
    "kernel_globs": "agent-d ports only src/tilegym/ops/cutile_rs/<op>_kernel/kernel.rs (bot/targets/targets.py); "
    "remove the key",
    "timeout_minutes": "set the reusable workflow's `port-timeout-minutes` input instead",
    "gpu_runner_labels": "set the reusable workflow's `gpu-runs-on` input instead",
}

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "auto_commit": {"type": "boolean"},
        "allowed_users": {"type": "array", "items": {"type": "string", "pattern": r"^[A-Za-z0-9\-\[\]]+$"}},
        "allowed_teams": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$"},
        },
        "max_bot_commits": {"type": "integer", "minimum": 1, "maximum": 20},
        "check_name": {"type": "string", "minLength": 1, "maxLength": 80},
        "run_drafts": {"type": "boolean"},
        "chatlevel": {"enum": ["quiet", "normal"]},
        "matrix": {"enum": ["per_kernel", "single"]},
    },
}


class ConfigError(ValueError):
    """The config file exists but is not valid; the message names the offending key."""


@dataclass(frozen=True)
class Config:
    auto_commit: bool = True
    allowed_users: tuple[str, ...] = ()
    allowed_teams: tuple[str, ...] = ()  # "org/team-slug"
    max_bot_commits: int = 4
    check_name: str = "agent-d"
    run_drafts: bool = False
    chatlevel: str = "normal"
    matrix: str = "single"  # one GPU job ports every kernel into one tree (per_kernel: one job each)
    source: str = field(default="defaults", compare=False)


def parse_config(text: str, source: str = CONFIG_PATH) -> Config:
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    removed = sorted(k for k in data if k in REMOVED) if isinstance(data, dict) else []
    if removed:
        why = "; ".join(f"{k}: not a setting of {CONFIG_PATH}: {REMOVED[k]}" for k in removed)
        raise ConfigError(f"{source}: {why}")
    try:
        jsonschema.validate(data, SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ConfigError(f"{source}: {where}: {exc.message}") from None
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Config(source=source, **kwargs)


def load_config(repo) -> Config:
    """Read the config from ``repo``'s default branch (PyGithub Repository); defaults if absent."""
    branch = repo.default_branch
    try:
        content = repo.get_contents(CONFIG_PATH, ref=branch)
    except GithubException as exc:
        if exc.status == 404:
            return Config()
        raise
    if isinstance(content, list):
        raise ConfigError(f"{CONFIG_PATH} is a directory")
    return parse_config(content.decoded_content.decode("utf-8"), f"{CONFIG_PATH}@{branch}")
