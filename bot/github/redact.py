"""Keep credentials out of everything agent-d logs, writes or posts.

Two layers: exact values (every token the process was given, collected from the
environment and registered by callers) and shapes (GitHub token prefixes, basic-auth
URLs, Authorization headers).  Redaction is best effort; the first defence is never
to put a token where it could be printed (no tokens in remote URLs, scrubbed child
environments).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping

MASK = "***"

# Names of variables whose values are secrets wherever they appear.
SECRET_NAMES = frozenset(
    {
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "AGENT_D_TOKEN",
        "AGENT_D_APP_PRIVATE_KEY",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
        "ACTIONS_CACHE_URL",
        "ACTIONS_RESULTS_URL",
        "ACTIONS_RUNTIME_URL",
    }
)
_SECRET_NAME_RE = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE_KEY|CREDENTIAL|API_KEY|(?:^|_)(?:PAT|AUTH)(?:_|$)|^GIT_CONFIG_VALUE_\d+$",
    re.IGNORECASE,
)
_SHAPES = [
    # classic and fine-grained GitHub tokens, installation and OAuth tokens
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    # user:secret@ in URLs
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
    # Authorization / extraheader values
    re.compile(r"(?i)(?<=authorization: )(?:basic|bearer|token)\s+\S+"),
    re.compile(r"(?i)(?<=authorization=)(?:basic|bearer|token)\s+\S+"),
]
_MIN_SECRET_LEN = 6


def is_secret_name(name: str) -> bool:
    return name in SECRET_NAMES or bool(_SECRET_NAME_RE.search(name))


class Redactor:
    """Replaces known secret values and token-shaped strings with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        for value in secrets:
            self.add(value)

    def add(self, value: str | None) -> None:
        if value and len(value) >= _MIN_SECRET_LEN:
            self._values.add(value)

    def add_env(self, env: Mapping[str, str]) -> None:
        for name, value in env.items():
            if is_secret_name(name):
                self.add(value)

    def redact(self, text: str) -> str:
        if not text:
            return text
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, MASK)
        for shape in _SHAPES:
            text = shape.sub(MASK, text)
        return text


# The process-wide redactor; ``install`` seeds it from the environment.
REDACTOR = Redactor()


def redact(text: str) -> str:
    return REDACTOR.redact(text)


class RedactFilter(logging.Filter):
    """A logging filter that renders each record and scrubs the result (message and traceback)."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor or REDACTOR

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        record.msg = self.redactor.redact(message)
        record.args = None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:  # also when an earlier handler already rendered it
            record.exc_text = self.redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.redact(record.stack_info)
        return True


def install(env: Mapping[str, str] | None = None, logger: logging.Logger | None = None) -> Redactor:
    """Seed the global redactor from ``env`` and attach the filter to every handler of ``logger``.

    Filters on handlers (not loggers) also see records propagated from child loggers.
    """
    REDACTOR.add_env(os.environ if env is None else env)
    target = logger or logging.getLogger()
    if not target.handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for handler in target.handlers:
        if not any(isinstance(f, RedactFilter) for f in handler.filters):
            handler.addFilter(RedactFilter(REDACTOR))
    return REDACTOR


def scrubbed_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` without secrets, the Actions runtime credentials and inherited git config."""
    return {
        k: v for k, v in env.items() if not is_secret_name(k) and not k.startswith(("ACTIONS_", "GIT_CONFIG"))
    }
