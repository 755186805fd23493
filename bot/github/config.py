"""``.github/agent-d.yml``: the repository's settings, read from the default branch only.

A PR can never loosen its own gate: the file is fetched at the default branch's tip,
never from the PR head.  Unknown keys are errors (the schema sets
``additionalProperties: false``), so a typo does not silently fall back to a default.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import jsonschema
import yaml
from github import GithubException

CONFIG_PATH = ".github/agent-d.yml"
DEFAULT_KERNEL_GLOBS = ("src/tilegym/ops/cutile_rs/*_kernel/kernel.rs",)

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "kernel_globs": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        "auto_commit": {"type": "boolean"},
        "allowed_users": {"type": "array", "items": {"type": "string", "pattern": r"^[A-Za-z0-9\-\[\]]+$"}},
        "allowed_teams": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$"},
        },
        "max_bot_commits": {"type": "integer", "minimum": 1, "maximum": 20},
        "check_name": {"type": "string", "minLength": 1, "maxLength": 80},
        "run_drafts": {"type": "boolean"},
        "timeout_minutes": {"type": "integer", "minimum": 1, "maximum": 720},
        "gpu_runner_labels": {"type": "array", "items": {"type": "string"}},
        "chatlevel": {"enum": ["quiet", "normal"]},
        "matrix": {"enum": ["per_kernel", "single"]},
    },
}


class ConfigError(ValueError):
    """The config file exists but is not valid; the message names the offending key."""


@dataclass(frozen=True)
class Config:
    kernel_globs: tuple[str, ...] = DEFAULT_KERNEL_GLOBS
    auto_commit: bool = True
    allowed_users: tuple[str, ...] = ()
    allowed_teams: tuple[str, ...] = ()  # "org/team-slug"
    max_bot_commits: int = 4
    check_name: str = "agent-d"
    run_drafts: bool = False
    timeout_minutes: int = 120
    gpu_runner_labels: tuple[str, ...] = ("self-hosted", "linux", "gpu")
    chatlevel: str = "normal"
    matrix: str = "single"  # one GPU job ports every kernel into one tree (per_kernel: one job each)
    source: str = field(default="defaults", compare=False)

    def is_kernel_path(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, g) for g in self.kernel_globs)


def parse_config(text: str, source: str = CONFIG_PATH) -> Config:
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    try:
        jsonschema.validate(data, SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ConfigError(f"{source}: {where}: {exc.message}") from None
    for glob in data.get("kernel_globs", ()):
        if not glob.endswith(".rs") or glob.startswith("/") or ".." in glob.split("/"):
            raise ConfigError(f"{source}: kernel_globs: {glob!r} must be a relative glob ending in .rs")
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
