"""What the perf stage measured and concluded: plain data, importing nothing of agent-d's.

One :class:`Case` per selected test case (its backend, config, dtype, outcome and CUPTI median),
one :class:`Row` per config the three backends share, a :class:`Geomean` per dtype and overall,
and the :class:`PerfResult` that holds them with the verdict (stage E's words: ``DONE``,
``INVESTIGATE``, ``BLOCKED``; ``NOT_RUN`` when the stage was off or never reached).
:meth:`PerfResult.summary` is the compact form that travels in ``port --json`` and the artifact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the backends of one perf run, as agent-d names them
CUTILE_RS, CUTILE, PYTORCH = "cutile-rs", "cutile", "pytorch"
BACKENDS = (CUTILE_RS, CUTILE, PYTORCH)
# stage E's gate (agents/agent_e.md): the overall geomean of cutile-rs / cuTile decides
DONE_AT_MOST = 1.05
CONFIG_CAP = 8  # stage E's cap on measured configs (bot/perf/cover.py): a few seconds a case on the H200
VERDICTS = ("DONE", "INVESTIGATE", "BLOCKED", "NOT_RUN")
SEVERITIES = ("DONE", "MILD_GAP", "MODERATE_GAP", "LARGE_GAP", "MISSING_DATA", "NOT_RUN")
NO_DTYPE = "(not in the test id)"


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel CUPTI saw in a timed call (TileGym's ``kernel_times`` entry)."""

    name: str
    self_us: float
    count: int


@dataclass
class Case:
    """One selected test_perf case: what pytest said and what its benchmark record holds."""

    nodeid: str
    backend: str  # cutile-rs | cutile | pytorch (from the record's key, else the test id)
    config: str  # the test id's parameters without the backend: the key the backends share
    dtype: str  # "float16" (from ``torch.float16`` in the id) or NO_DTYPE
    outcome: str  # passed | failed | skipped | error | not run
    median_ms: float | None = None  # the forward pass's CUPTI median; None: no usable record
    message: str = ""  # why it failed or was skipped; why a passed case has no median
    record: str = ""  # the ``benchmark`` property as pytest wrote it
    kernels: list[Kernel] = field(default_factory=list)


@dataclass
class Row:
    """One config, its time on each backend and the ratios (None where a side has no median)."""

    config: str
    dtype: str
    ms: dict[str, float | None]
    vs_cutile: float | None = None
    vs_pytorch: float | None = None


@dataclass
class Geomean:
    dtype: str  # a dtype, or "all"
    configs: int  # configs with a cutile-rs / cuTile ratio
    vs_cutile: float | None
    vs_pytorch: float | None
    pytorch_configs: int = 0


@dataclass
class PerfResult:
    verdict: str  # DONE | INVESTIGATE | BLOCKED | NOT_RUN
    severity: str
    reason: str  # one line
    command: str = ""
    exit_code: int | None = None
    cases: list[Case] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    by_dtype: list[Geomean] = field(default_factory=list)
    overall: Geomean | None = None
    unmeasured: list[str] = field(default_factory=list)  # "<nodeid>: <why>", each case without a median
    slowest: list[Row] = field(default_factory=list)  # the configs past the gate, slowest first
    host_cause: str = ""  # one line when the gap is the host's (copies, a launch unlike the reference's)
    kernel_cause: str = ""  # one line when the evidence clears the host and the kernel's own time lags
    notes: list[str] = field(default_factory=list)  # what the stage did and saw (wiring, print-record)
    out_dir: str = ""

    @property
    def geomean_ratio(self) -> float | None:
        return self.overall.vs_cutile if self.overall else None

    def summary(self) -> dict:
        """The compact result (docs/artifact.md, ``perf``; :data:`SUMMARY_SCHEMA`): verdict, geomeans,
        the slowest configs; every text cut to the schema's length."""
        return {
            "verdict": self.verdict,
            "severity": self.severity,
            "reason": self.reason[:MAX_TEXT],
            "geomean_vs_cutile": _rounded(self.overall.vs_cutile if self.overall else None),
            "geomean_vs_pytorch": _rounded(self.overall.vs_pytorch if self.overall else None),
            "configs": self.overall.configs if self.overall else 0,
            "by_dtype": [
                {
                    "dtype": g.dtype[:MAX_NAME],
                    "configs": g.configs,
                    "vs_cutile": _rounded(g.vs_cutile),
                    "vs_pytorch": _rounded(g.vs_pytorch),
                }
                for g in self.by_dtype[:MAX_ITEMS]
            ],
            "slowest": [
                {
                    "config": r.config[:MAX_CONFIG],
                    "dtype": r.dtype[:MAX_NAME],
                    "vs_cutile": _rounded(r.vs_cutile),
                }
                for r in self.slowest[:MAX_SLOWEST]
            ],
            "unmeasured": len(self.unmeasured),
            "host_cause": self.host_cause[:MAX_TEXT],
            "kernel_cause": self.kernel_cause[:MAX_TEXT],
        }


MAX_TEXT, MAX_CONFIG, MAX_NAME, MAX_ITEMS, MAX_SLOWEST = 500, 200, 40, 16, 5
_RATIO = {"type": ["number", "null"], "minimum": 0, "maximum": 1e6}
_COUNT = {"type": "integer", "minimum": 0, "maximum": 1_000_000}


def _text(limit: int) -> dict:
    return {"type": "string", "maxLength": limit}


def _object(**properties: dict) -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


# what :meth:`PerfResult.summary` writes, checked where it arrives as data (the artifact)
SUMMARY_SCHEMA = _object(
    verdict={"enum": list(VERDICTS)},
    severity={"enum": list(SEVERITIES)},
    reason=_text(MAX_TEXT),
    geomean_vs_cutile=_RATIO,
    geomean_vs_pytorch=_RATIO,
    configs=_COUNT,
    by_dtype={
        "type": "array",
        "maxItems": MAX_ITEMS,
        "items": _object(dtype=_text(MAX_NAME), configs=_COUNT, vs_cutile=_RATIO, vs_pytorch=_RATIO),
    },
    slowest={
        "type": "array",
        "maxItems": MAX_SLOWEST,
        "items": _object(config=_text(MAX_CONFIG), dtype=_text(MAX_NAME), vs_cutile=_RATIO),
    },
    unmeasured=_COUNT,
    host_cause=_text(MAX_TEXT),
    kernel_cause=_text(MAX_TEXT),
)


def not_run(reason: str) -> PerfResult:
    return PerfResult("NOT_RUN", "NOT_RUN", reason)


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
