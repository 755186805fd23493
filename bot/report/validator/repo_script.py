"""The checkout's own validator script (``validate_agent_d.sh``), run beside ours: found, given a
view of the checkout when the op's tests are not where it looks, run in the sandbox with a
``nm`` that SIGPIPE cannot fake, and killed past its time."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from bot import children, sandbox
from bot.report.types import ValidatorRun

SKILL = "tilegym-converting-cutile-triton-to-cutile-rs"
SCRIPT_CANDIDATES = (
    f".agents/skills/{SKILL}/scripts/validate_agent_d.sh",
    f"skills/{SKILL}/scripts/validate_agent_d.sh",
)
REPO_VALIDATOR_TIMEOUT_S = 120


def repo_validator_script(repo: Path) -> Path | None:
    """The checkout's ``validate_agent_d.sh`` (``.agents/skills/...`` first), or None."""
    for rel in SCRIPT_CANDIDATES:
        p = Path(repo) / rel
        if p.is_file():
            return p
    return None


_NM_SHIM = """#!/bin/sh
# agent-d: the checkout's validator runs `nm -D "$SO" | grep -q ...` under `set -o pipefail`;
# when grep stops early, nm dies of SIGPIPE (141) and a present symbol reads as missing.
# This nm buffers its listing and ignores SIGPIPE, so only nm's own status counts.
trap '' PIPE
out=$({real} "$@")
status=$?
printf '%s\\n' "$out" 2>/dev/null
exit $status
"""


def _buffered_nm_dir() -> Path | None:
    """A folder holding the SIGPIPE-proof ``nm`` shim, or None when there is no nm to wrap."""
    real = shutil.which("nm")
    if real is None:
        return None
    folder = Path(tempfile.gettempdir()) / f"agent-d-nm-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    shim = folder / "nm"
    text = _NM_SHIM.format(real=shlex.quote(real))
    if not shim.is_file() or shim.read_text() != text:
        shim.write_text(text)
        shim.chmod(0o755)
    return folder


def run_repo_validator(
    repo: Path,
    out_root: Path,
    op: str,
    timeout_s: float = REPO_VALIDATOR_TIMEOUT_S,
    test_files: list[str] | None = None,
) -> ValidatorRun | None:
    """Run the checkout's ``validate_agent_d.sh <op>`` with bash from the repo root.

    Environment: the current one plus ``CUTILE_KERNEL_OUT_ROOT=out_root`` and
    ``TILEGYM_PATH=repo`` (both absolute). stdout and stderr are captured together, in
    order. Returns None when the checkout has no such script. Past ``timeout_s`` the script's
    whole process group is killed and the run has exit code 124 and says so.

    The script reads the op's tests from ``tests/ops/test_<op>.py`` only. When the op's tests
    live elsewhere (``tests/ops/experimental/test_mhc.py``, found by discovery), the script is
    given a view of the checkout (``TILEGYM_PATH``) where that path links to the first of
    ``test_files``, so its check reads the file the op is really tested in; the output says so.
    """
    repo = Path(repo).resolve()
    script = repo_validator_script(repo)
    if script is None:
        return None
    view, note = _tests_view(repo, op, test_files or [])
    try:
        run = _run_script(repo, script, Path(out_root).resolve(), op, timeout_s, view)
    finally:
        if view != repo:
            shutil.rmtree(view, ignore_errors=True)
    return ValidatorRun(run.command, note + run.output, run.exit_code) if note else run


def _tests_view(repo: Path, op: str, test_files: list[str]) -> tuple[Path, str]:
    """(the TILEGYM_PATH the script reads, a note when it is a view rather than ``repo``)."""
    expected = Path("tests") / "ops" / f"test_{op}.py"
    if (repo / expected).is_file() or not test_files or not (repo / test_files[0]).is_file():
        return repo, ""
    view = Path(tempfile.mkdtemp(prefix="agent-d-validator-view-"))
    (view / "src").symlink_to(repo / "src", target_is_directory=True)
    (view / expected).parent.mkdir(parents=True)
    (view / expected).symlink_to(repo / test_files[0])
    note = (
        f"agent-d: this script reads {expected.as_posix()}; {op}'s tests are {test_files[0]}, "
        "linked there in a temporary view of the checkout\n"
    )
    return view, note


def _run_script(
    repo: Path, script: Path, out_root: Path, op: str, timeout_s: float, tile: Path
) -> ValidatorRun:
    rel = script.relative_to(repo).as_posix()
    shim = _buffered_nm_dir()
    path_prefix = f"PATH={shlex.quote(str(shim))}:$PATH " if shim else ""
    command = (
        f"cd {shlex.quote(str(repo))} && {path_prefix}CUTILE_KERNEL_OUT_ROOT={shlex.quote(str(out_root))} "
        f"TILEGYM_PATH={shlex.quote(str(tile))} bash {shlex.quote(rel)} {shlex.quote(op)} 2>&1"
    )
    env = dict(os.environ, CUTILE_KERNEL_OUT_ROOT=str(out_root), TILEGYM_PATH=str(tile))
    if shim:
        env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    # the checkout's script is PR code: in a sandbox it reads the reports, it cannot change them
    readable = (out_root, *([shim] if shim else []))
    return run_script(["bash", rel, op], repo, env, command, timeout_s, readable)


def run_script(
    argv: list[str],
    repo: Path,
    env: dict[str, str],
    command: str,
    timeout_s: float,
    readable: tuple[Path, ...],
) -> ValidatorRun:
    """A validator script of the checkout, run in ``repo`` (in the sandbox when one is active, seeing
    ``readable``); past ``timeout_s`` its process group is killed and the run says so (exit 124)."""
    try:
        proc = subprocess.Popen(
            sandbox.wrap(argv, repo, env, readable=readable),
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return ValidatorRun(command=command, output=f"could not start bash: {exc}\n", exit_code=127)
    try:
        with children.started(proc, "the validator script"):
            data, _ = proc.communicate(timeout=timeout_s)
        return ValidatorRun(
            command=command, output=data.decode("utf-8", errors="replace"), exit_code=proc.returncode
        )
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        data, _ = proc.communicate()
        text = data.decode("utf-8", errors="replace")
        if text and not text.endswith("\n"):
            text += "\n"
        text += f"agent-d: validator script timed out after {timeout_s:g} s and was killed\n"
        return ValidatorRun(command=command, output=text, exit_code=124)
