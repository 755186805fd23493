"""One finding of ``agent-d check``: the file, the line (0: the file as a whole) and what is wrong."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int
    message: str

    def shown(self, root: Path) -> str:
        where = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        return f"{where}:{self.line}: {self.message}" if self.line else f"{where}: {self.message}"

    def as_json(self, root: Path) -> dict:
        where = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        return {"path": str(where), "line": self.line, "message": self.message}
