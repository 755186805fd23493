"""`agent-d port --base REF --json` on a checkout, as the tests of several kernels run it."""

from __future__ import annotations

import json
from pathlib import Path

from bot.cli import main


def port_json(repo: Path, base: str, cargo_target_dir: Path, capsys) -> tuple[int, str, dict[str, dict]]:
    """The exit status, stderr, and each kernel's JSON entry by op."""
    code = main(
        ["port", "--repo", str(repo), "--base", base, "--cargo-target-dir", str(cargo_target_dir), "--json"]
    )
    out = capsys.readouterr()
    results = {entry["op"]: entry for entry in json.loads(out.out)}
    return code, out.err, results
