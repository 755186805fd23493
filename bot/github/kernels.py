"""Which kernels a pull request adds, from the API's file list.

The rule is bot/targets/targets.py's, the same as ``agent-d port`` uses locally: a kernel is a file
at ``KERNEL_PATH`` (``src/tilegym/ops/cutile_rs/<op>_kernel/kernel.rs``) that the change
adds, a rename or copy into place included, and ``<op>`` must pass ``check_name``.  The
API's ``status`` says whether a file was added (``bot.targets.targets.added_kernels`` reads the same
fact from a git diff's headers).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.errors import UsageError
from bot.targets.targets import KERNEL_PATH, check_name

# GitHub's file statuses that put a new file at the path; git's rename/copy detection is
# what turns an "added" file into "renamed"/"copied", so all three add the kernel.
ADDED_STATUSES = frozenset({"added", "renamed", "copied"})


@dataclass(frozen=True)
class AddedKernel:
    op: str  # as found in the path; not yet checked (see checked_ops)
    path: str


def added_kernels(files) -> list[AddedKernel]:
    """``files``: PyGithub File objects (``filename``, ``status``) of a PR; sorted by op."""
    found: dict[str, AddedKernel] = {}
    for f in files:
        m = KERNEL_PATH.fullmatch(f.filename)
        if m and f.status in ADDED_STATUSES:
            found.setdefault(m.group("op"), AddedKernel(m.group("op"), f.filename))
    return [found[k] for k in sorted(found)]


def checked_ops(kernels: list[AddedKernel]) -> list[str]:
    """The op names, each through ``bot.targets.targets.check_name``; the UsageError names the file."""
    ops: list[str] = []
    for k in kernels:
        try:
            ops.append(check_name(k.op))
        except UsageError as exc:
            raise UsageError(f"`{k.path}`: {exc}") from None
    return ops
