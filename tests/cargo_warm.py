"""One cold build of the cutile crates before any test starts.

The slow tests build the aggregated crate into one shared cargo target folder. Whichever ran
first used to pay for compiling the cutile 0.2.0 crates inside its own per-test timeout:
minutes on a quiet 2-core machine, past the 900 s limit on a loaded one (issue 13). Here the
wheel's crate, with an empty ``lib.rs``, is built into that folder first, outside any test, so
each test compiles only its own kernels.

conftest.py calls :func:`warm` when slow tests are selected; ``.ci/run`` runs this file as its
own timed phase (the hook then finds the folder warm).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from bot import progress
from bot.build import build, toolchain
from bot.errors import Blocked, Failed
from bot.targets.types import Target
from bot.wheel import WheelUnavailable, default_cache_dir, tilegym_wheel

TILEGYM_VERSION = "1.5.1"
# A cold build under load took 17 minutes in issue 13; the build's own 30 min limit is kept
# for kernels, this one only guards against a cargo that never ends.
WARM_TIMEOUT_S = 3600.0
CRATE = Path("tilegym/ops/cutile_rs/cutile_kernels")


def cargo_target(cache: Path) -> Path:
    """The folder every test build shares (conftest's ``cargo_target_dir``)."""
    return cache / "cargo-target"


def warm(cache: Path, echo: progress.Echo = progress.to_stderr) -> bool:
    """Build the cutile crates into ``cargo_target(cache)``; False (and a line why) when it failed.

    A failure here does not stop the session: the tests that need the build report it themselves.
    """
    start = time.monotonic()
    echo("[tests] building the cutile crates once, before the tests (seconds when already built)")
    try:
        wheel = tilegym_wheel(cache, TILEGYM_VERSION)
        target = Target(cache / "cargo-warm", "warm")
        crate = target.crate_dir
        (crate / "src").mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel / CRATE / "Cargo.toml", crate / "Cargo.toml")
        (crate / "src" / "lib.rs").write_text("")
        # the tests' checkouts resolve without a lock file: resolve as they do, to the same versions
        (crate / "Cargo.lock").unlink(missing_ok=True)
        build.build(target, toolchain.resolve(cache), cargo_target(cache), echo=echo, timeout=WARM_TIMEOUT_S)
    except (WheelUnavailable, Blocked, Failed) as exc:
        echo(
            f"[tests] the cutile crates did not build ({str(exc).splitlines()[0]}); the slow tests will say why"
        )
        return False
    echo(f"[tests] cutile crates built in {time.monotonic() - start:.0f} s")
    return True


if __name__ == "__main__":
    sys.exit(0 if warm(default_cache_dir()) else 1)
