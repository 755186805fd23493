"""Whether a skip is cited, and by what: one rule for the verdict (``classify``) and the reports
(``report``), so the two never disagree about a skip (docs/specification.md, "The correctness run").

A skip is cited by a ``known_gaps`` entry of the analysis (its text, or its name before ``:``, in
the reason, or the whole reason in the entry), by the coding rules (the forward-only port: a
skip of a backward test; a reason that cites ``coding-rules``), or by the test file's own rule (a
skip the file raises itself, for every backend). A skip that says the backend is missing is never
cited: that is a wiring gap, not a rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FORWARD_ONLY_CITATION = "coding-rules: forward-only port"
BACKEND_MISSING = re.compile(r"backend .*not (available|supported)|not available", re.I)
MIN_OWN_SKIP = 12  # characters of a test file's own skip text that a reason must start with


def citation(reason: str, known_gaps: Iterable[str], test_skips: Iterable[str] = ()) -> str:
    """What cites the skip ``reason`` (``known_gaps: <entry>``, the forward-only rule,
    ``coding-rules``, ``the test file's own skip: <text>``); ``""`` when nothing does."""
    text = one_line(reason)
    r = text.lower()
    if not r or BACKEND_MISSING.search(r):
        return ""
    for gap in known_gaps:
        g = one_line(gap).lower()
        name = g.split(":", 1)[0].strip()
        if g and (g in r or (len(name) >= 4 and name in r) or (len(r) >= 8 and r in g)):
            return f"known_gaps: {one_line(gap)}"
    if "forward-only" in r or "backward" in r:
        return FORWARD_ONLY_CITATION
    if "coding-rules" in r or "coding rule" in r:
        return "coding-rules"
    for own in test_skips:
        own_text = one_line(own)
        if (
            len(own_text) >= MIN_OWN_SKIP
            and text.startswith(own_text)
            and not BACKEND_MISSING.search(own_text)
        ):
            return f"the test file's own skip: {own_text}"
    return ""


def one_line(text: object) -> str:
    return " ".join(str(text or "").split())
