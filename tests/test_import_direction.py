"""Data flows one way (docs/architecture.md): a stage's modules import only earlier stages and the
shared modules at the top of ``bot/``. The pipeline's step modules (``stage_*.py``) run several
stages in order and may import any. What still points the other way is listed below with why, so
the list can only shrink (issue 34, item 15)."""

from __future__ import annotations

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parent.parent / "bot"
# the stages in pipeline order; testresults parses what the test stage runs into its types
ORDER = ["targets", "read", "infer", "plan", "emit", "apply", "build", "testing", "testresults", "dryrun",
         "classify", "perf", "report", "github"]  # fmt: skip
RANK = {stage: i for i, stage in enumerate(ORDER)} | {"testresults": ORDER.index("testing")}
KNOWN = {
    # the JIT's place (Located) is read from the test log and becomes a check-run annotation
    ("build/annotations.py", "bot.testing.types"),
    # the perf stage writes stage E's reports and runs the checkout's validator script
    ("perf/stage.py", "bot.report"),
    ("perf/validate.py", "bot.report.types"),
    ("perf/validate.py", "bot.report.validator.repo_script"),
}


def _later_imports() -> set[tuple[str, str]]:
    found = set()
    for path in BOT.rglob("*.py"):
        rel = path.relative_to(BOT)
        if len(rel.parts) < 2 or rel.parts[0] not in RANK or path.name.startswith("stage_"):
            continue
        own = RANK[rel.parts[0]]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bot."):
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names if a.name.startswith("bot.")]
            else:
                continue
            for module in modules:
                stage = module.split(".")[1]
                if stage in RANK and RANK[stage] > own:
                    found.add((rel.as_posix(), module))
    return found


def test_no_stage_imports_a_later_one_but_the_known_few():
    assert _later_imports() == KNOWN
