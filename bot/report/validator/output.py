"""The built-in validator's text: one ``OK:`` / ``FAIL:`` / ``WARN:`` / ``NOT RUN:`` line per check,
and the line after ``---`` with its exit code."""

from __future__ import annotations

from bot.classify.types import verdict_headline


class Output:
    """The lines the checks print, and how many failed or could not run."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.fails = 0
        self.not_run = 0
        self.blocked = ""  # the block_class correctness.md states; "" when the run was not blocked

    def missing(self, msg: str, *detail: str) -> None:
        """An input the run never produced: a FAIL, unless the port says it was blocked before
        that stage (then the check is listed as not run, since nothing was there to check)."""
        if self.blocked:
            self.lines.append(f"NOT RUN: {msg}")
            self.not_run += 1
        else:
            self.fail(msg, *detail)

    def tail(self) -> tuple[str, int]:
        """The line after ``---`` and the exit code: PASS 0, FAIL 1, checks not run 3 (as BLOCKED)."""
        if self.fails:
            extra = f"; {self.not_run} check(s) not run" if self.not_run else ""
            return f"FAIL: {self.fails} issue(s){extra}", 1
        if self.not_run:
            why = f"the port was {verdict_headline('BLOCKED', self.blocked)} before their inputs existed"
            return f"NOT RUN: {self.not_run} check(s): {why}", 3
        return "PASS", 0

    def ok(self, msg: str) -> None:
        self.lines.append(f"OK: {msg}")

    def fail(self, msg: str, *detail: str) -> None:
        self.lines.append(f"FAIL: {msg}")
        self.lines.extend(f"      {d}" for d in detail)
        self.fails += 1

    def warn(self, msg: str) -> None:
        self.lines.append(f"WARN: {msg}")

    def check(self, cond: bool, ok: str, fail: str, *detail: str) -> None:
        if cond:
            self.ok(ok)
        else:
            self.fail(fail, *detail)
