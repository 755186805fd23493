"""The typed value of the apply stage: which files' bytes it changed."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ApplyResult:
    changed: list[str]  # relative paths whose bytes changed
    unchanged: list[str]
    previous: dict[str, bytes | None] = field(
        default_factory=dict
    )  # changed path -> its bytes before (None: new)
