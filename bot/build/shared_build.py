"""Stage "build" for every kernel of one change: one cargo build of the crate, one result per kernel.

The aggregated crate holds every op, so the kernels a pull request adds are built together, once.
A kernel whose own files do not compile (its ``kernel.rs``: a kernel fault; its generated
``ffi.rs``: ours) must not hide the others: it gets its own stop, its ``mod`` block and wrapper
import are taken out (``LeftOut``), and the crate is built again without it. An error outside
the kernels' own files (lib.rs, another op, a build script) stops every kernel alike.

``LeftOut.restore`` puts the wiring back once the others are tested, so the checkout ends as
generation wrote it: the tree the port job snapshots is the one finalize regenerates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot import progress
from bot.build import build
from bot.build.toolchain import Toolchain
from bot.build.types import BuildResult
from bot.emit import wiring
from bot.errors import StageStop
from bot.targets.types import Target


@dataclass
class SharedBuild:
    built: dict[str, BuildResult] = field(default_factory=dict)  # op -> its library and export
    stopped: dict[str, StageStop] = field(default_factory=dict)  # op -> why it has no library
    cargo_runs: int = 0
    seconds: float = 0.0  # all cargo runs together
    left_out: list[str] = field(default_factory=list)  # ops taken out of lib.rs for a rebuild


class LeftOut:
    """Wiring taken out of the checkout for a rebuild, kept byte for byte to be put back."""

    def __init__(self) -> None:
        self.saved: dict[Path, bytes] = {}

    def remove(self, target: Target) -> None:
        for path, without in wiring.own_wiring(target.crate_dir, target.ops_dir):
            if path.is_file():
                self.saved.setdefault(path, path.read_bytes())
                path.write_text(without(path.read_text(encoding="utf-8"), target.op), encoding="utf-8")

    def kernel_only(self, target: Target) -> None:
        """``target``'s kernel compiled without a launcher (its facts are missing), for this build only."""
        path = target.crate_dir / "src" / "lib.rs"
        if path.is_file():
            self.saved.setdefault(path, path.read_bytes())
            path.write_text(
                wiring.lib_rs_kernel_only(path.read_text(encoding="utf-8"), target.op), encoding="utf-8"
            )

    def restore(self) -> None:
        for path, data in self.saved.items():
            path.write_bytes(data)
        self.saved.clear()


def build_together(
    targets: list[Target],
    toolchain: Toolchain,
    cargo_target_dir: Path | None,
    log_path: Callable[[Target], Path],
    left_out: LeftOut,
    exported: Callable[[Path], list[str]] | None = None,
    echo: progress.Echo = progress.silent,
    cargo_home: Path | None = None,
    kernel_only: frozenset[str] = frozenset(),
) -> SharedBuild:
    """Build the crate once for ``targets`` (all in one checkout); again without each kernel whose
    own files broke the build. Each build's log goes to ``log_path`` of every kernel it was for.
    The ops in ``kernel_only`` have no launcher yet: their kernel is compiled, nothing exported."""
    out = SharedBuild()
    remaining = list(targets)
    for target in remaining:
        if target.op in kernel_only:
            left_out.kernel_only(target)
    while remaining:
        crate_build = build.compile_crate(
            remaining[0].crate_dir, toolchain, cargo_target_dir, echo, cargo_home=cargo_home
        )
        out.cargo_runs += 1
        out.seconds += crate_build.seconds
        for target in remaining:
            build.write_log(crate_build, log_path(target))
        at_fault = build.faulty_ops(crate_build.errors_by_file) & {t.op for t in remaining}
        # a rebuild helps only when some kernels are at fault and others are not
        again = crate_build.code is not None and 0 < len(at_fault) < len(remaining)
        for target in remaining:
            if again and target.op not in at_fault:
                continue
            try:
                out.built[target.op] = build.judge(
                    target, crate_build, None if target.op in kernel_only else exported
                )
            except StageStop as stop:
                out.stopped[target.op] = stop
        if not again:
            break
        for target in remaining:
            if target.op in at_fault:
                left_out.remove(target)
                out.left_out.append(target.op)
        remaining = [t for t in remaining if t.op not in at_fault]
        echo(f"[agent-d] building again without {', '.join(sorted(at_fault))} (its own files do not compile)")
    return out
