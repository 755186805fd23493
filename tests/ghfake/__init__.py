"""A local, stateful, contract-checked GitHub for end-to-end tests of the bot.

See docs/testing-github.md.  Entry points: ``GitHubFake.create()`` and the pytest
fixtures in ``fixtures.py`` (``github_fake``, ``ghfake_spec``).
"""

from .assets import Assets, ensure_assets
from .fake import GitHubFake
from .server import LogEntry
from .state import ApiError
from .webhooks import sign, write_event

__all__ = ["ApiError", "Assets", "GitHubFake", "LogEntry", "ensure_assets", "sign", "write_event"]
