"""Facts from an explicit host contract: ``<op>_kernel/host_contract.yaml`` (version 1, docs/contract.md),
or the ``host_launch_contract`` YAML block of stage B's ``reports/agent_b.md``.

Every key is optional and overrides what any other source infers. The contract is checked against
``contract.schema.json`` (``keys`` nests dotted keys first, ``schema`` words the
errors): an unknown key or a mistyped value is rejected with its dotted path, so a typo cannot
silently fall back to a guess.
"""

from __future__ import annotations

import re
from pathlib import Path

from bot.errors import Blocked
from bot.infer.contract import bounded_yaml, keys, schema, typed
from bot.infer.contract.keys import LEAF_MAPPINGS
from bot.infer.facts import Facts
from bot.targets.types import Source, Target

CONTRACT_NAME = "host_contract.yaml"
VERSION = 1
MAX_REPORT_CHARS = 1 << 20
MAX_PROBLEMS = 12  # lines of a refusal: enough to fix a contract, never a flood
_AGENT_B_BLOCK = re.compile(r"host_launch_contract[^\n]*\n+```ya?ml\n(?P<body>.*?)\n```", re.S | re.I)


def contract_path(target: Target) -> Path:
    return target.kernel_dir / CONTRACT_NAME


def gather(target: Target, facts: Facts) -> None:
    path = contract_path(target)
    if not path.is_file():
        return
    rel = str(path.relative_to(target.repo))
    text = bounded_yaml.read(path, rel)
    data = _load(text, rel)
    _offer(data, rel, "contract", facts)
    facts.offer("contract.lines", count_lines(text), Source("contract", rel))


def gather_agent_b(report: Path, facts: Facts) -> None:
    if not report.is_file():
        return
    with report.open(encoding="utf-8", errors="replace") as f:
        head = f.read(MAX_REPORT_CHARS)  # the block is near the top; a report past this is not read on
    m = _AGENT_B_BLOCK.search(head)
    if not m:
        return
    _offer(_load(m.group("body"), f"{report.name} host_launch_contract"), report.name, "agent_b", facts)


def count_lines(text: str) -> int:
    """Lines a porter wrote: non-blank, not comments, not the version line."""
    return sum(
        1
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#") and not line.startswith("contract_version")
    )


def _load(text: str, where: str) -> dict:
    """The contract in nested form, checked against the schema and each value against its kind's
    grammar (``typed``), without ``contract_version``."""
    data = bounded_yaml.load(text, where)
    if not isinstance(data, dict):
        raise Blocked("host", f"{where}: the contract must be a mapping")
    nested, twice = keys.nest(data)
    lines = sorted(twice) + schema.problems(nested)
    if not lines:
        lines = typed.problems(nested)
    if lines:
        shown = [f"{where}: {bounded_yaml.cut(line)}" for line in lines[:MAX_PROBLEMS]]
        if len(lines) > MAX_PROBLEMS:
            shown.append(f"{where}: (+{len(lines) - MAX_PROBLEMS} more)")
        raise Blocked("host", "\n".join(shown))
    nested.pop("contract_version", None)
    return nested


def _flatten(data: dict, prefix: str = "") -> dict[str, object]:
    """Nested form -> the dotted Facts keys (a leaf mapping stays one value)."""
    out: dict[str, object] = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and full not in LEAF_MAPPINGS:
            out.update(_flatten(value, full + "."))
        else:
            out[full] = value
    return out


def _known(key: str) -> bool:
    for pattern in keys.known_keys():
        if pattern.endswith(".*") and key.startswith(pattern[:-1]) and len(key) > len(pattern) - 1:
            return True
        if key == pattern:
            return True
    return False


def _offer(data: dict, where: str, kind: str, facts: Facts) -> None:
    for key, value in _flatten(data).items():
        facts.offer(key, value, Source(kind, f"{where}: {key}"))
