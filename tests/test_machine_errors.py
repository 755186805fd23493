"""A full disk, a read-only file system and too-deep input end in a clear verdict with the
reports written, never a traceback.

The disk failures are real: `agent-d port` runs in a private mount namespace (``unshare -m``)
where the checkout is bind-mounted read-only or the reports folder is a tiny, full tmpfs.  The
runs stop before cargo (at apply or earlier), so each takes seconds.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.demo import assemble_checkout

ROOT = Path(__file__).resolve().parent.parent
OP = "silu_and_mul"
REPORTS = (
    "reports/correctness.md",
    "reports/agent_d.md",
    "reports/agent_logs/agent_d.md",
    "validator_block.txt",
)


def _can_mount() -> bool:
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True, text=True
    )
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(
    not _can_mount(),
    reason="needs `unshare -m` and mount (root in a mount namespace) for a real EROFS/ENOSPC",
)


@pytest.fixture()
def demo(tmp_path, tilegym_wheel):
    return assemble_checkout(tmp_path / "tilegym", tilegym_wheel, [OP], [OP]).repo


def _port_in_namespace(setup: str, args: list[str], tmpdir: Path) -> subprocess.CompletedProcess:
    """``agent-d port ARGS`` after the shell lines ``setup``, in a private mount namespace."""
    cli = shlex.join(
        [sys.executable, "-c", "import sys; from bot.cli import main; sys.exit(main())", "port", *args]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir)}
    return subprocess.run(
        ["unshare", "-m", "sh", "-ec", f"{setup}\n{cli}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _verdict_line(proc) -> str:
    return next(line for line in proc.stderr.splitlines() if line.startswith(f"[agent-d] {OP}: "))


def _clean(proc) -> None:
    """The answer is printed whole and nothing reads as a crash."""
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "internal error" not in proc.stdout + proc.stderr
    assert "<VALIDATOR_OUTPUT>" in proc.stdout and proc.stdout.rstrip().endswith("VERDICT: BLOCKED")
    assert proc.returncode == 3, proc.stderr[-2000:]


def _complete(out: Path) -> None:
    for name in REPORTS:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "reports/correctness.md").read_text().startswith("VERDICT: ")


def _read_only(repo: Path) -> str:
    return f"mount --bind {repo} {repo}\nmount -o remount,bind,ro {repo}"


def _full_tmpfs(path: Path) -> str:
    return f"mkdir -p {path}\nmount -t tmpfs -o size=64k tmpfs {path}\nhead -c 1M /dev/zero > {path}/fill || true"


@needs_mounts
def test_a_read_only_checkout_is_blocked_env_with_complete_reports(demo, tmp_path):
    out = tmp_path / "out"
    proc = _port_in_namespace(_read_only(demo), ["--repo", str(demo), "--out", str(out)], tmp_path)
    _clean(proc)
    line = _verdict_line(proc)
    assert "BLOCKED (block_class: env): read-only file system: agent-d could not write" in line
    assert f"{OP}_kernel/ffi.rs (stage apply)" in line
    _complete(out / OP)
    assert "read-only file system" in (out / OP / "reports/correctness.md").read_text()


@needs_mounts
def test_reports_that_cannot_go_into_a_read_only_checkout_go_to_a_temporary_folder(demo, tmp_path):
    proc = _port_in_namespace(_read_only(demo), ["--repo", str(demo)], tmp_path)
    _clean(proc)
    line = _verdict_line(proc)
    assert f"could not write {demo}/cutile_kernel_out" in line
    where = Path(line.split("; the reports are in ", 1)[1])
    assert where.parent.parent == tmp_path  # under TMPDIR
    _complete(where)


@needs_mounts
def test_a_full_disk_is_blocked_env_and_the_reports_go_elsewhere(demo, tmp_path):
    full = tmp_path / "full"
    proc = _port_in_namespace(_full_tmpfs(full), ["--repo", str(demo), "--out", str(full)], tmp_path)
    _clean(proc)
    line = _verdict_line(proc)
    assert (
        f"BLOCKED (block_class: env): no space left on the device while writing the reports in {full}/{OP}"
        in line
    )
    assert (
        f"(the run itself: BLOCKED (block_class: env): no space left on the device while writing {full}/{OP}/ffi.rs)"
        in line
    )
    _complete(Path(line.split("; the reports are in ", 1)[1]))


@needs_mounts
def test_with_no_writable_disk_at_all_the_answer_still_says_why(demo, tmp_path):
    # agent-d and the checkout are bind-mounted under /mnt; every folder a temporary folder could
    # go to (TMPDIR, /tmp, /var/tmp, the working folder) is a full tmpfs
    setup = "\n".join(
        [
            "mount -t tmpfs tmpfs /mnt",
            "mkdir /mnt/src /mnt/repo /mnt/full",
            f"mount --bind {ROOT} /mnt/src",
            f"mount --bind {demo} /mnt/repo",
            _full_tmpfs(Path("/mnt/full")),
            _full_tmpfs(Path("/tmp")),
            _full_tmpfs(Path("/var/tmp")),
            "cd /mnt/full",
            "export PYTHONPATH=/mnt/src TMPDIR=/mnt/full",
        ]
    )
    proc = _port_in_namespace(setup, ["--repo", "/mnt/repo", "--out", "/mnt/full"], tmp_path)
    _clean(proc)
    line = _verdict_line(proc)
    assert (
        "BLOCKED (block_class: env): no space left on the device while writing the reports in /mnt/full/"
        in line
    )
    assert "no reports could be written" in line


def test_a_test_file_nested_too_deeply_is_blocked_host_and_named(demo, tmp_path, capsys):
    test_file = demo / "tests/ops/test_silu_and_mul.py"
    test_file.write_text(test_file.read_text() + "\n_DEEP = 1" + "+1" * 30000 + "\n")
    out = tmp_path / "out"
    code = main(["port", "--repo", str(demo), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 3 and "Traceback" not in captured.out + captured.err
    line = next(ln for ln in captured.err.splitlines() if ln.startswith(f"[agent-d] {OP}: "))
    assert f"BLOCKED (block_class: host): {test_file} is nested too deeply for agent-d to read" in line
    _complete(out / OP)
    assert "RecursionError" in (out / OP / "reports/agent_logs/agent_d.md").read_text()  # the traceback, kept
