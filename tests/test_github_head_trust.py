"""Which of agent-d's check runs record a commit as trusted (bot/github/head_trust.py)."""

from __future__ import annotations

import pytest

from bot.github.head_trust import is_trust_record

SHA, OTHER = "a" * 40, "b" * 40


@pytest.mark.parametrize(
    ("external_id", "conclusion", "trusted"),
    [
        (f"pr7:{SHA}:auto", "success", True),  # a trusted push's automatic run
        (f"pr7:{SHA}:auto", "neutral", True),  # whatever its conclusion
        (f"pr7:{SHA}:auto", "action_required", False),  # a record from before untrusted pushes had a key
        (f"pr7:{SHA}:auto-untrusted", "neutral", False),
        (f"pr7:{SHA}:draft", "neutral", True),
        (f"pr7:{SHA}:draft-waiting", "neutral", False),
        (f"pr7:{SHA}:c1234", "failure", True),  # an approved command
        (f"pr7:{SHA}:r99-maint", "success", True),  # the Re-run button, by someone allowed
        (f"pr7:{SHA}:d8812", "success", True),  # workflow_dispatch
        (f"pr7:{SHA}:push", "success", True),  # copy-pr-bot's mirror
        (f"pr7:{SHA}:config", "failure", False),  # a configuration error approves nothing
        (f"pr7:{OTHER}:c1234+commit", "success", True),  # finalize's check on the commit it pushed
        (f"pr7:{OTHER}:auto", "success", False),  # a record of another commit
        (f"pr8:{SHA}:auto", "success", False),  # of another pull request
        (f"pr7:{SHA}:c1234x", "success", False),
        ("", None, False),
        (None, None, False),
    ],
)
def test_only_agent_ds_own_keys_for_trusted_runs_record_a_commit_as_trusted(external_id, conclusion, trusted):
    assert is_trust_record(external_id, 7, SHA, conclusion) is trusted
