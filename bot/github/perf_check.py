"""The second check run, ``<check name>/perf``: the perf stage's result on the published head.

Informational: ``success`` when every measured kernel is DONE, ``neutral`` otherwise (never
``failure``), so it can never block a merge and must not be made a required check. Created only
when the perf stage ran for some kernel; keyed like the main check (its external id plus
``+perf``), so a repeated finalize of one run finds it instead of creating another.
"""

from __future__ import annotations

from bot.github import publish, render_perf

SUFFIX = "/perf"


def publish_perf_check(repo, sha: str, check_name: str, external_id: str, perfs: dict[str, dict]):
    """Create and conclude the perf check on ``sha``; None (nothing posted) when there is no result."""
    outcome = render_perf.check_outcome(perfs)
    if outcome is None:
        return None
    conclusion, title, summary = outcome
    run, _ = publish.ensure_check_run(repo, sha, check_name + SUFFIX, f"{external_id}+perf", title, summary)
    publish.conclude(run, conclusion, title, summary)
    return run
