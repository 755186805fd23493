"""The draft contract written when facts are missing: every inferred key filled, the missing ones marked.

It goes beside the kernel as ``host_contract.draft.yaml`` (never read as a contract), so the
porter fills blanks, renames it to ``host_contract.yaml`` and re-runs.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.infer.contract.host_contract import VERSION, _known
from bot.infer.facts import Facts
from bot.plan.types import LaunchPlan
from bot.targets.types import Target

DRAFT_NAME = "host_contract.draft.yaml"


def render_draft(plan: LaunchPlan, facts: Facts) -> str:
    lines = [
        f"# Draft host contract for {plan.op}, written by agent-d because some facts could not be inferred.",
        "# Fill every key marked MISSING, rename this file to host_contract.yaml and run `agent-d port` again.",
        "# Keys already filled were inferred (source in the comment); delete any you do not want to pin.",
        f"contract_version: {VERSION}",
    ]
    for key in sorted(k for k in facts.items if _known(k)):
        fact = facts.items[key]
        value = yaml.safe_dump(fact.value, default_flow_style=True, width=1000).strip()
        if value.endswith("\n..."):
            value = value[: -len("\n...")]
        value = value.removesuffix("...").strip()
        lines.append(f"{key}: {value}  # {fact.source}")
    for missing in plan.missing:
        lines.append(f"# MISSING: {missing.question}")
        for tried in missing.tried:
            lines.append(f"#   tried: {tried}")
        lines.append(f"{missing.key}: null  # MISSING")
    return "\n".join(lines) + "\n"


def write_draft(target: Target, plan: LaunchPlan, facts: Facts) -> Path:
    path = target.kernel_dir / DRAFT_NAME
    path.write_text(render_draft(plan, facts), encoding="utf-8")
    return path
