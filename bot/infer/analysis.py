"""Facts from stage A's ``reference/analysis.json`` in the per-kernel working folder."""

from __future__ import annotations

import json
from pathlib import Path

from bot.errors import Blocked
from bot.infer.facts import Facts
from bot.targets.types import Source


def load(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise Blocked("host", f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return data if isinstance(data, dict) else {}


def known_gaps(data: dict) -> list[str]:
    gaps = data.get("known_gaps") or []
    out = []
    for gap in gaps if isinstance(gaps, list) else [gaps]:
        out.append(gap if isinstance(gap, str) else json.dumps(gap, sort_keys=True))
    return out


def gather(path: Path, facts: Facts) -> None:
    data = load(path)
    if not data:
        return
    where = Source("analysis", path.name)
    if data.get("known_gaps"):
        facts.offer("analysis.known_gaps", known_gaps(data), where)
    dtypes = data.get("dtypes")
    if isinstance(dtypes, list) and dtypes:
        facts.offer("ffi.dtypes", [str(d) for d in dtypes], where)
