"""YAML a pull request sends, read within bounds: a size, a nesting depth, no anchors or aliases.

A contract is a few dozen lines a person writes. An alias expands one node into many (797 bytes of
aliases made 10^12 leaves), and every later step (nesting the keys, the schema, its error message)
walks the expansion; so anchors and aliases are refused where the parser meets them, before any
value is built, and so is a document past ``MAX_BYTES`` or nested deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent

from bot.errors import Blocked

MAX_BYTES = 64 * 1024
MAX_DEPTH = 12  # nested mappings and lists; the schema's deepest value is 5 down
MAX_SHOWN = 300  # characters of one error line


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors, aliases and deep nesting as it composes."""

    depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            raise _Refused("an alias (*name): write each value out", event.start_mark)
        if isinstance(event, ScalarEvent | CollectionStartEvent) and event.anchor is not None:
            raise _Refused("an anchor (&name): write each value out", event.start_mark)
        if isinstance(event, CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1
        return super().compose_node(parent, index)


class _Refused(Exception):
    def __init__(self, why: str, mark: yaml.Mark):
        super().__init__(f"{why} (line {mark.line + 1})")


def load(text: str, where: str) -> object:
    """The document of ``text``; ``Blocked`` (host) naming ``where`` when it is past a bound or not YAML."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_BYTES:
        raise Blocked(
            "host", f"{where}: {size} bytes, more than {MAX_BYTES} (a contract is a few dozen lines)"
        )
    try:
        return yaml.load(text, Loader=_BoundedLoader) or {}  # a SafeLoader: no Python objects
    except _Refused as exc:
        raise Blocked("host", f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        raise Blocked("host", f"{where}: not valid YAML ({cut(str(exc).splitlines()[0])})") from None


def read(path: Path, where: str) -> str:
    """The text of ``path``, refused unread past ``MAX_BYTES``."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise Blocked(
            "host", f"{where}: {size} bytes, more than {MAX_BYTES} (a contract is a few dozen lines)"
        )
    return path.read_text(encoding="utf-8", errors="replace")


def cut(line: str, most: int = MAX_SHOWN) -> str:
    return line if len(line) <= most else line[: most - 3] + "..."
