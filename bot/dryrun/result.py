"""What a launch dry run found: the values compared, the differences, and why not, when not.

Plain data, importing nothing of agent-d's: the stage's result (``bot.report.types.PortResult`` holds it,
``compare.py`` fills it, the report and the classifier read it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# a row of what kernel.rs declares a tensor's element type to be, against what the port passes
KERNEL_DTYPE = "kernel.rs dtype"


@dataclass(frozen=True)
class Row:
    """One compared value of one case."""

    case: str
    param: str  # the kernel.rs parameter ("grid", "out_ptr", "BLOCK_SIZE")
    what: str  # grid | dtype | shape | strides | contiguous | storage_offset | numel | value | launch | KERNEL_DTYPE
    reference: str
    cutile_rs: str
    same: bool


@dataclass
class DryRun:
    status: str  # compared | not run | not compared
    why: str = ""  # not run / not compared: the reason; compared: the cases' summary
    cases: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # cases not compared, with why
    notes: list[str] = field(default_factory=list)  # what the compared values cannot show
    launches: list = field(default_factory=list)  # (case, port_side.PortLaunch) of each compared launch

    @property
    def differences(self) -> list[Row]:
        return [r for r in self.rows if not r.same]

    @property
    def host_differences(self) -> list[Row]:
        """What the port launches otherwise than the reference."""
        return [r for r in self.differences if r.what != KERNEL_DTYPE]

    @property
    def kernel_differences(self) -> list[Row]:
        """A tensor kernel.rs declares of another element type than the one it is passed."""
        return [r for r in self.differences if r.what == KERNEL_DTYPE]

    @property
    def identical(self) -> bool:
        return self.status == "compared" and not self.differences

    def headline(self) -> str:
        if self.status != "compared":
            return f"dry run {self.status}: {self.why}"
        if self.host_differences:
            first = self.host_differences[0]
            return (
                f"the launch differs from the cuTile reference's in {len({r.case for r in self.host_differences})} of "
                f"{len(self.cases)} case(s): {describe_row(first)}"
            )
        if self.kernel_differences:
            first = self.kernel_differences[0]
            return (
                f"the launch equals the cuTile reference's, but kernel.rs cannot take it in "
                f"{len({r.case for r in self.kernel_differences})} of {len(self.cases)} case(s): "
                f"{first.param}: {first.reference}, passed {first.cutile_rs} ({first.case})"
            )
        return (
            f"the launch equals the cuTile reference's in {len(self.cases)} case(s) ({len(self.rows)} values)"
        )


def describe_row(row: Row) -> str:
    return f"{row.param} {row.what}: reference {row.reference}, cutile-rs {row.cutile_rs} ({row.case})"
