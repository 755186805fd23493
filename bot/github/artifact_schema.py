"""The JSON Schema of an artifact's ``result.json`` (docs/artifact.md): every field bounded, so
``read_artifact`` rejects an oversized or mistyped value before anything reads it."""

from __future__ import annotations

from bot.build import annotations
from bot.build.types import ANNOTATION_LEVELS
from bot.github.path_classes import CLASSES
from bot.perf.result import SUMMARY_SCHEMA as PERF_SCHEMA

SCHEMA_VERSION = 2
VERDICT_KINDS = ("ALL_PASS", "FAIL", "BLOCKED")
MAX_REASON = 2000  # characters of a verdict's reason
MAX_VALIDATOR_BLOCK = 60000  # characters of a verdict's validator block
HEX40 = r"^[0-9a-f]{40}$"
MAX_RESET_PATHS = 1000  # paths listed in reset_paths; reset_count counts them all
MAX_PATH = 4096  # characters of a listed path (git's own limit is the file system's)

_LINE = {"type": "integer", "minimum": 1, "maximum": 10_000_000}
_COLUMN = {"type": "integer", "minimum": 0, "maximum": 100_000}  # 0: no column
_ANNOTATION_SCHEMA = {
    "type": "object",
    "required": ["path", "start_line", "end_line", "level", "title", "message", "start_column", "end_column"],
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "maxLength": 300},
        "start_line": _LINE,
        "end_line": _LINE,
        "level": {"enum": list(ANNOTATION_LEVELS)},
        "title": {"type": "string", "maxLength": annotations.MAX_TITLE},
        "message": {"type": "string", "minLength": 1, "maxLength": annotations.MAX_MESSAGE},
        "start_column": _COLUMN,
        "end_column": _COLUMN,
    },
}
_VERDICT_SCHEMA = {
    "type": "object",
    "required": ["kind", "klass", "reason", "validator_block"],
    "additionalProperties": False,
    "properties": {
        "kind": {"enum": list(VERDICT_KINDS)},
        "klass": {"type": "string"},
        "reason": {"type": "string", "maxLength": MAX_REASON},
        "validator_block": {"type": "string", "maxLength": MAX_VALIDATOR_BLOCK},
        "withheld": {"type": "boolean"},
        "annotations": {"type": "array", "maxItems": annotations.MAX_PER_KERNEL, "items": _ANNOTATION_SCHEMA},
    },
    # the class is one of agent-d's own words for the kind, never free text: it is shown unescaped
    # in the check title, the review heading and the status comment
    "allOf": [
        {
            "if": {"properties": {"kind": {"const": kind}}},
            "then": {"properties": {"klass": {"enum": classes}}},
        }
        for kind, classes in (
            ("ALL_PASS", [""]),
            ("FAIL", ["host", "kernel"]),
            ("BLOCKED", ["env", "host", "kernel"]),
        )
    ],
}
RESULT_SCHEMA = {
    "type": "object",
    "required": [
        "schema_version",
        "repo",
        "head_sha",
        "base_sha",
        "base_tree",
        "tested_tree",
        "ops",
        "verdicts",
        "changed_paths",
        "reset_paths",
        "reset_count",
    ],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "repo": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"},
        "head_sha": {"type": "string", "pattern": HEX40},
        "base_sha": {"type": "string", "pattern": HEX40},
        "base_tree": {"type": "string", "pattern": HEX40},
        "tested_tree": {"type": "string", "pattern": HEX40},
        "ops": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[a-z][a-z0-9_]{0,63}$"},
            "minItems": 1,
        },
        "verdicts": {"type": "object", "additionalProperties": _VERDICT_SCHEMA},
        "changed_paths": {"type": "array", "items": {"type": "string", "maxLength": 300}},
        # the pull request's files the port put back to the base's bytes, by class (path_classes.py)
        "reset_paths": {
            "type": "object",
            "required": list(CLASSES),
            "additionalProperties": False,
            "properties": {
                c: {
                    "type": "array",
                    "items": {"type": "string", "maxLength": MAX_PATH},
                    "maxItems": MAX_RESET_PATHS,
                }
                for c in CLASSES
            },
        },
        "reset_count": {"type": "integer", "minimum": 0},
        "truncated_logs": {"type": "array", "items": {"type": "string"}},
        "perf": {"type": "object", "additionalProperties": PERF_SCHEMA},
    },
}
