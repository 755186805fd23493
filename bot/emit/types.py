"""The typed values of the emit stage: the generated files, before they are applied."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GeneratedFile:
    path: str  # relative to the repo
    content: str
    kind: str  # "new" (whole file) | "edit" (wiring)


@dataclass
class GeneratedFiles:
    files: list[GeneratedFile]
