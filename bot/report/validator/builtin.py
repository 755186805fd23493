"""The built-in Agent D validator run on a finished port: every check of ``checks.CHECKS``, its
lines and exit code as a ``ValidatorRun``, with the command line that repeats it."""

from __future__ import annotations

import shlex
from pathlib import Path

from bot.report.types import ValidatorRun
from bot.report.validator.checks import CHECKS, Inputs
from bot.report.validator.files import default_so_path
from bot.report.validator.output import Output


def validate(
    out_dir: Path, op: str, repo: Path, so_path: Path | None, test_files: list[str] | None = None
) -> ValidatorRun:
    """Run every Agent D check on ``out_dir`` (``<out root>/<op>``) and the checkout ``repo``.

    ``so_path`` is the built ``libcutile_kernels.so``; when None it is looked for under the
    checkout's ``ops/cutile_rs`` (the crate's ``target/release`` first). ``test_files``: the op's
    test files when a port already discovered them (otherwise discovered here). Never raises.
    """
    out_dir, repo = Path(out_dir), Path(repo)
    out = Output()
    try:
        _run_checks(out, out_dir, op, repo, so_path, test_files)
    except Exception as exc:
        out.fail(f"validator error: {exc.__class__.__name__}: {exc}")
    last, exit_code = out.tail()
    lines = [*out.lines, "---", last]
    # The same check from the command line: `--out` takes the out root (the folder holding <op>/).
    cmd = ["agent-d", "validate", op, "--repo", str(repo), "--out", str(out_dir.parent)]
    if so_path is not None and Path(so_path) != default_so_path(repo):
        cmd += ["--so", str(so_path)]
    return ValidatorRun(command=shlex.join(cmd), output="\n".join(lines) + "\n", exit_code=exit_code)


def _run_checks(
    out: Output, base: Path, op: str, repo: Path, so_path: Path | None, test_files: list[str] | None
) -> None:
    inputs = Inputs(base, op, repo, so_path, test_files)
    for check in CHECKS:
        check(inputs, out)
