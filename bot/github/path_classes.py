"""What a path of a TileGym pull request is to agent-d's build and tests.

The port job builds and tests the base branch's files plus each ported kernel's inputs
(bot/github/base_tree.py): its ``kernel.rs`` and, when the pull request has one, the
``host_contract.yaml`` beside it (docs/contract.md), which only agent-d's generation reads.
Every other file a pull request changes is put back to the base's bytes. This module names the
kind of each such file, for the review (why it was not used) and for dispatch (edits of the
tests or the runtime need a maintainer's approval of the commit):

* ``crate``: what cargo reads: Rust sources anywhere, ``Cargo.toml``, ``Cargo.lock``,
  ``build.rs``, ``rust-toolchain[.toml]``, ``.cargo/``, the ``cutile_kernels`` crate folder;
* ``tests``: ``tests/``, any ``conftest.py``, and the root files pytest reads its
  configuration from (``pytest.ini``, ``pyproject.toml``, ``tox.ini``, ``setup.cfg``);
* ``runtime``: the Python package under ``src/``;
* ``other``: everything else (docs, CI files, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CRATE, TESTS, RUNTIME, OTHER = "crate", "tests", "runtime", "other"
CLASSES = (CRATE, TESTS, RUNTIME, OTHER)
# the classes whose edit makes a run need a maintainer's approval of the exact commit
GUARDED = frozenset({TESTS, RUNTIME})

KERNELS_CRATE_DIR = "src/tilegym/ops/cutile_rs/cutile_kernels/"
KERNEL_DIR = "src/tilegym/ops/cutile_rs/{op}_kernel/"
KERNEL_RS, CONTRACT = "kernel.rs", "host_contract.yaml"  # a kernel's inputs, taken from the pull request
_CARGO_FILES = frozenset({"Cargo.toml", "Cargo.lock", "build.rs", "rust-toolchain", "rust-toolchain.toml"})
_PYTEST_CONFIG = frozenset({"pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"})

# Why a changed file of each class was not used, as the review says it.
WHY_NOT_USED = {
    CRATE: "the crate is built from the base's files plus agent-d's own generation; "
    "only each ported kernel's `kernel.rs` comes from the pull request",
    TESTS: "tests, `conftest.py` and pytest's configuration come from the base branch, "
    "so the verdict is agent-d's, not the pull request's",
    RUNTIME: "the TileGym runtime comes from the base branch, wired by agent-d",
    OTHER: "only each ported kernel's `kernel.rs` is taken from the pull request",
}


def kernel_inputs(op: str) -> tuple[str, str]:
    """The paths of ``op``'s kernel.rs and host contract (``op`` already checked by bot/targets/targets.py)."""
    folder = KERNEL_DIR.format(op=op)
    return folder + KERNEL_RS, folder + CONTRACT


def path_class(path: str) -> str:
    """The class of a repository path (``a/b/c``, as git and the API write it)."""
    parts = path.split("/")
    name = parts[-1]
    if name.endswith(".rs") or name in _CARGO_FILES or ".cargo" in parts[:-1]:
        return CRATE
    if path.startswith(KERNELS_CRATE_DIR):
        return CRATE
    if parts[0] == "tests" or name == "conftest.py" or (len(parts) == 1 and name in _PYTEST_CONFIG):
        return TESTS
    if parts[0] == "src" and len(parts) > 1:
        return RUNTIME
    return OTHER


@dataclass(frozen=True)
class ClassedPaths:
    """Paths grouped by class, each group sorted."""

    crate: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    runtime: tuple[str, ...] = ()
    other: tuple[str, ...] = ()

    @classmethod
    def of(cls, paths: Iterable[str]) -> ClassedPaths:
        groups: dict[str, list[str]] = {c: [] for c in CLASSES}
        for path in sorted(set(paths)):
            groups[path_class(path)].append(path)
        return cls(**{c: tuple(v) for c, v in groups.items()})

    def group(self, klass: str) -> tuple[str, ...]:
        return getattr(self, klass)

    def all(self) -> list[str]:
        return sorted(p for c in CLASSES for p in self.group(c))

    def guarded(self) -> list[str]:
        return sorted(p for c in sorted(GUARDED) for p in self.group(c))

    def as_dict(self) -> dict[str, list[str]]:
        return {c: list(self.group(c)) for c in CLASSES}

    def __bool__(self) -> bool:
        return any(self.group(c) for c in CLASSES)


NO_PATHS = ClassedPaths()
