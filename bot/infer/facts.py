"""A store of inferred facts keyed by dotted names, each with the source it came from.

Sources are consulted in a fixed order of authority; the first source that sets a key wins,
so an explicit contract overrides everything and a naming convention only fills gaps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.targets.types import Source

# Highest authority first (issue: contract > agent_b > analysis > ops.py > reference > naming).
AUTHORITY = ("contract", "agent_b", "analysis", "ops_py", "reference", "tests", "naming", "kernel", "policy")


@dataclass
class Fact:
    value: object
    source: Source


@dataclass
class Facts:
    items: dict[str, Fact] = field(default_factory=dict)
    tried: dict[str, list[str]] = field(default_factory=dict)

    def offer(self, key: str, value: object, source: Source) -> None:
        """Record ``value`` unless a source of higher or equal authority already set the key."""
        current = self.items.get(key)
        if current is not None and _rank(current.source) <= _rank(source):
            return
        self.items[key] = Fact(value, source)

    def note_tried(self, key: str, what: str) -> None:
        self.tried.setdefault(key, []).append(what)

    def get(self, key: str, default: object = None) -> object:
        fact = self.items.get(key)
        return default if fact is None else fact.value

    def source(self, key: str) -> Source | None:
        fact = self.items.get(key)
        return None if fact is None else fact.source

    def has(self, key: str) -> bool:
        return key in self.items

    def under(self, prefix: str) -> dict[str, Fact]:
        """Facts whose key starts with ``prefix.``, keyed by the rest of the key."""
        start = prefix + "."
        return {k[len(start) :]: v for k, v in self.items.items() if k.startswith(start)}


def _rank(source: Source) -> int:
    try:
        return AUTHORITY.index(source.kind)
    except ValueError:
        return len(AUTHORITY)
