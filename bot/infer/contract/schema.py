"""The host contract's shape: ``contract.schema.json`` (JSON Schema, Draft 2020-12) and short messages
for what it rejects.

The schema describes the nested spelling (``keys.nest`` makes it from dotted keys);
``problems`` lists each rejected value as ``<dotted path>: <what was expected>``, one per line.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # jsonschema loads only when a contract is checked: GPU runners verify without it
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
    "array": "a list",
    "object": "a mapping",
}

Path = tuple  # dict keys (str) and list indexes (int), outermost first


@cache
def schema() -> dict:
    text = resources.files("bot.infer.contract").joinpath("contract.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema())


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def problems(nested: dict) -> list[str]:
    """Every value the schema rejects, ``<dotted path>: <reason>``, sorted by path."""
    found = [line for error in _validator().iter_errors(nested) for line in _describe(error)]
    found.sort(key=lambda item: (_order(item[0]), item[1]))
    return list(dict.fromkeys(f"{dotted(path)}: {text}" for path, text in found))


def _order(path: Path) -> list[tuple[int, object]]:
    return [(1, p) if isinstance(p, int) else (0, p) for p in path]


def _describe(error: ValidationError) -> list[tuple[Path, str]]:
    path, kind, value, rule = tuple(error.absolute_path), error.validator, error.instance, error.schema
    if kind in ("oneOf", "anyOf"):
        return _branch(error)
    if kind == "additionalProperties":
        known = list(rule.get("properties", {}))
        return [(path + (k,), _unknown(path, k, value[k], known)) for k in value if k not in known]
    if kind == "required":
        return [(path, f"missing key {k}") for k in error.validator_value if k not in value]
    if kind == "type":
        types = [error.validator_value] if isinstance(error.validator_value, str) else error.validator_value
        return [
            (path, f"{_show(value)} is not {_words([_TYPE_WORDS[t] for t in types])}{_hint(types, value)}")
        ]
    if kind == "enum":
        return [(path, f"{_show(value)} is not one of {', '.join(map(str, error.validator_value))}")]
    if kind == "const":
        return [(path, f"{_show(value)} is not supported (expected {_show(error.validator_value)})")]
    if kind in ("minItems", "maxItems"):
        return [(path, _count(rule, len(value)))]
    return [(path, error.message)]  # a keyword the schema does not use today


def _branch(error: ValidationError) -> list[tuple[Path, str]]:
    """oneOf/anyOf: report the errors of the one form the value is evidently meant to be; when no form
    (or more than one) fits, say which forms there are."""
    by_branch: dict[int, list[ValidationError]] = {}
    for sub in error.context:
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
    fits = [subs for subs in by_branch.values() if not any(_rules_out(s) for s in subs)]
    if len(fits) == 1 and len(by_branch) == len(error.validator_value):
        return [line for sub in fits[0] for line in _describe(sub)]
    expected = error.schema.get("description", "one of several forms")
    return [(tuple(error.absolute_path), f"expected {expected}, got {_show(error.instance)}")]


def _rules_out(sub: ValidationError) -> bool:
    """A form is not the one meant when the value has the wrong type, or lacks the form's first key
    (``let`` of ``{let, expr}``, ``configs`` of a config group)."""
    if sub.validator == "type" and not sub.relative_path:
        return True
    return sub.validator == "required" and sub.validator_value[0] not in sub.instance


def _unknown(path: Path, key: str, value: object, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        text = f"unknown key (did you mean {dotted(path + (close[0],))}?)"
    else:
        text = f"unknown key (known: {', '.join(known)})"
    if value is None:  # `{let: a, b, expr: x}` reads as keys let, b, expr
        text += "; an unquoted comma in YAML flow style splits a value: quote it"
    return text


def _hint(types: list[str], value: object) -> str:
    if value is None:
        return " (fill in a value or delete the key)"
    if "string" in types and isinstance(value, bool):
        return " (quote it: YAML reads it as a boolean)"
    if "string" in types and isinstance(value, int | float):
        return f' (write the expression in quotes: "{value}")'
    return ""


def _count(rule: dict, got: int) -> str:
    noun = rule.get("x-noun", "items")
    low, high = rule.get("minItems"), rule.get("maxItems")
    if low == high:
        return f"expected {low} {noun}, got {got}"
    if low is not None and got < low:
        return f"expected at least {low} {noun}, got {got}"
    return f"expected at most {high} {noun}, got {got}"


def _words(options: list[str]) -> str:
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
