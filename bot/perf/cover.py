"""Which configs the perf run measures when ``test_perf`` has more than the cap.

Stage E caps its run (skill ``agents/agent_e.md``: a ``-k`` that "covers each dtype + shape regime +
kernel-variant axis ... while staying within the eval cap"): a full ``test_perf`` can hold hundreds
of configs at several seconds each. agent-d makes that choice by a rule, not by hand:

- a config is one parametrization of a test without its backend; each ``-``-separated field of its
  id is one value of one axis, told apart by its position (where the configs of one test differ in
  their number of fields, because a value holds a ``-``, a field stands for itself wherever it is);
- first the cover: the config naming the most values not yet measured, ties to the test picked
  least so far, then to the earlier one in the run's order (:func:`bot.perf.run.configs_in_turns`),
  until every value is named once;
- then the next configs in the run's order, up to the cap.

With the cap below the cover's size, the values left out are named. The result is deterministic:
the same collection and cap give the same configs.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.cover import greedy_cover
from bot.perf.run import ConfigKey, configs_in_turns


@dataclass(frozen=True)
class Chosen:
    ids: list[str]  # the node ids to run, config by config in the run's order
    configs: int  # configs chosen
    collected: int  # configs the selection collected
    left_out: tuple[str, ...] = ()  # values no chosen config names (the cap was below the cover)

    @property
    def capped(self) -> bool:
        return self.configs < self.collected

    def note(self, cap: int) -> str:
        """What was chosen and why, for the report's notes and the verdict's reason."""
        if not self.capped:
            return f"all {self.collected} config(s) of the selection measured (cap {cap or 'off'})"
        said = (
            f"{self.configs} of {self.collected} configs measured (stage E's cap, --perf-configs {cap}): "
            "every parameter value at least once, then the run's order"
        )
        if self.left_out:
            said += f"; values beyond the cap: {', '.join(self.left_out)}"
        return said


def choose(ids: list[str], cap: int) -> Chosen:
    """The configs of ``ids`` to measure, at most ``cap`` of them (0: every one)."""
    groups = configs_in_turns(ids)
    if cap <= 0 or len(groups) <= cap:
        return Chosen([i for _, cases in groups for i in cases], len(groups), len(groups))
    values = _values([key for key, _ in groups])
    tests = [key[:2] for key, _ in groups]  # each config's (file, test function)
    # ties on new values: the test picked least so far
    ordered, uncovered = greedy_cover(
        values, cap, tiebreak=lambda i, picked: -sum(tests[p] == tests[i] for p in picked)
    )
    left_out = tuple(sorted(_shown(v) for v in uncovered))
    return Chosen([i for n in ordered for i in groups[n][1]], len(ordered), len(groups), left_out)


Value = tuple[str, str, int, str]  # (file, test, position or -1, field)


def _values(keys: list[ConfigKey]) -> list[frozenset[Value]]:
    """Each config's values, by position where every config of its test has as many fields."""
    widths: dict[tuple[str, str], set[int]] = {}
    for file, test, config in keys:
        widths.setdefault((file, test), set()).add(len(config.split("-")))
    out = []
    for file, test, config in keys:
        fields = config.split("-")
        positional = len(widths[(file, test)]) == 1
        out.append(frozenset((file, test, i if positional else -1, f) for i, f in enumerate(fields)))
    return out


def _shown(value: Value) -> str:
    file, test, position, field = value
    where = f"field {position + 1}" if position >= 0 else "a field"
    return f"{test} {where} = {field!r}"
