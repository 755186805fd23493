"""What dispatch decided, as the workflow reads it: the job matrix and the step outputs."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class MatrixEntry:
    pr: int
    head_sha: str
    kernel: str  # one name, or several separated by spaces (matrix: single)
    check_run_id: int
    commit: bool
    base_sha: str  # the base commit whose files the port builds and tests (bot/github/base_tree.py)

    @property
    def slug(self) -> str:
        return "+".join(self.kernel.split())


@dataclass
class DispatchResult:
    run: bool
    reason: str
    pr: int | None = None
    head_sha: str = ""
    base_sha: str = ""
    check_run_id: int | None = None
    kernels: list[str] = field(default_factory=list)
    commit: bool = False
    single_job: bool = False
    conclusion: str = ""  # set when dispatch concluded the check itself
    concurrency_group: str = ""

    @property
    def matrix(self) -> list[MatrixEntry]:
        if not self.run or self.check_run_id is None or self.pr is None:
            return []
        groups = [" ".join(self.kernels)] if self.single_job else list(self.kernels)
        return [
            MatrixEntry(self.pr, self.head_sha, k, self.check_run_id, self.commit, self.base_sha)
            for k in groups
        ]

    def outputs(self) -> dict[str, str]:
        return {
            "run": "true" if self.run else "false",
            "reason": self.reason.replace("\n", " "),
            "pr": str(self.pr or ""),
            "head_sha": self.head_sha,
            "base_sha": self.base_sha,
            "check_run_id": str(self.check_run_id or ""),
            "kernels": json.dumps(self.kernels),
            "commit": "true" if self.commit else "false",
            "matrix": json.dumps({"include": [{**asdict(m), "slug": m.slug} for m in self.matrix]}),
            "concurrency_group": self.concurrency_group,
            "conclusion": self.conclusion,
        }
