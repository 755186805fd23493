"""Print how the kernel reader's time grows with the size of kernel.rs (its allow-list included).

A kernel is PR code: its size is the author's to choose, so reading it must stay linear. Each
size is our flash_decode fixture with its entry copied N times under new names (a bigger file of
the same kind); the figure per size is the median of --runs reads, with the time per KiB beside
it, so a quadratic cost shows as a growing last column.

    python benchmarks/reader_size.py [--runs 5]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bot.read.reader import reader_binary

FIXTURE = Path(__file__).resolve().parent.parent / "tests/fixtures/tilegym_ops/flash_decode_kernel/kernel.rs"


def sized(copies: int) -> str:
    """The fixture with its first entry copied ``copies`` times, each renamed, inside the module."""
    text = FIXTURE.read_text()
    start = text.index("    #[cutile::entry()]")
    end = text.index("    #[cutile::entry(", start + 1)
    entry = text[start:end]
    name = re.search(r"pub unsafe fn (\w+)", entry).group(1)
    extra = "".join(entry.replace(name, f"{name}_{i}") for i in range(copies))
    return text[:end] + extra + text[end:]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    binary = str(reader_binary())
    print(f"{'copies':>7} {'KiB':>7} {'median s':>9} {'ms per KiB':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.rs"
        for copies in (0, 8, 32, 128):
            path.write_text(sized(copies))
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                subprocess.run([binary, str(path)], check=True, capture_output=True)
                times.append(time.perf_counter() - start)
            kib = path.stat().st_size / 1024
            median = statistics.median(times)
            print(f"{copies:>7} {kib:>7.0f} {median:>9.3f} {1000 * median / kib:>11.2f}")


if __name__ == "__main__":
    main()
