"""Where PR code runs: a bubblewrap sandbox that allows only what a build and a test need.

The port of a pull request builds and runs code the PR controls (the crate's build, the tests,
TileGym's runtime, the validator script of the checkout). Each such process is started through
``wrap``: while a ``Sandbox`` is active it runs under ``bwrap`` with new user, pid, network, ipc,
uts and cgroup namespaces, and sees only

- read-only: the system (``/usr`` and its merged-usr links, the few ``/etc`` files the loader
  and libc read) and the toolchains the environment names (of ``CARGO_HOME`` its ``bin`` and the
  registry's and git's sources, never its credentials or config; ``RUSTUP_HOME``,
  ``CUDA_HOME``, ``LIBCLANG_PATH``, the ``PATH``/``PYTHONPATH``/``LD_LIBRARY_PATH`` entries, the
  interpreter's own prefix and ``sys.path``), plus what the caller names for that process;
- writable: the checkout, the cargo target and a fresh folder per result file, nothing else;
- of every bound folder, never what holds a credential: ``SECRET_PLACES`` at its top two levels (a
  runner's registration, keys, logins) and the runner's step-script folder are empty inside;
- a new ``/proc`` of its own pid namespace (no runner process, no ``environ`` of one), a minimal
  ``/dev`` with the NVIDIA device nodes, a private ``/tmp`` and ``HOME``;
- the environment of ``bot.github.pr_env`` only (``--clearenv``, then each kept variable).

Every process ends with the sandbox: ``--unshare-pid`` makes the command's init the namespace's
pid 1, whose exit kills what is left, and ``--die-with-parent`` ties it to agent-d. Nothing is
listed as forbidden: what is not bound does not exist inside.

Without an active sandbox (``agent-d port`` on one's own machine) ``wrap`` changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bot.github import pr_env

NAMESPACES = ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL")
# merged-usr links and the files of /etc that the loader, libc and Python read
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
)
TOOLCHAIN_DIRS = ("CARGO_HOME", "RUSTUP_HOME", "CUDA_HOME", "CUDA_PATH", "CUDA_TOOLKIT_PATH", "LIBCLANG_PATH",
                  "VIRTUAL_ENV", "PYTHONHOME")  # fmt: skip
# of CARGO_HOME: what a build reads (binaries, downloaded sources) and what it must never see
CARGO_READ = ("bin", "registry/index", "registry/cache", "registry/src", "git/checkouts", "git/db")
CARGO_SECRETS = ("credentials.toml", "credentials", "config.toml", "config", "env")
TOOLCHAIN_PATHS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH")
# what a bound folder may hold at its top two levels and PR code must never read: a runner's
# registration (.credentials, .runner), a person's keys and logins (a PATH entry may be a home's
# tool folder's parent); found there, each is empty inside
SECRET_PLACES = (".credentials", ".credentials_rsaparams", ".runner", ".env", ".ssh", ".gnupg", ".docker",
                 ".aws", ".kube", ".azure", ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".config")  # fmt: skip
# the runner's folders of step scripts (expressions, secrets among them, written out) and command files
RUNNER_PLACES = ("RUNNER_TEMP",)
SANDBOX_HOME = "/tmp/home"

WHAT_TO_CHANGE = (
    "install bubblewrap (Debian: apt-get install bubblewrap) on the runner or in its image and let it "
    "make user namespaces (sysctl kernel.unprivileged_userns_clone=1; a container needs "
    "--security-opt seccomp=unconfined or a profile allowing clone/unshare); only on a runner "
    "that runs trusted code alone, run port-job with --no-sandbox (docs/github.md)"
)


class SandboxUnavailable(RuntimeError):
    """This machine cannot make the sandbox; the message says why and what to change."""


@dataclass(frozen=True)
class Sandbox:
    bwrap: str
    writable: tuple[Path, ...]  # the checkout and the cargo target
    # agent-d's own out and state folders: empty inside when a bound folder holds them
    hidden: tuple[Path, ...] = ()
    devices: tuple[Path, ...] = field(default_factory=lambda: tuple(_gpu_devices()))

    def command(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        readable: tuple[Path, ...] = (),
        writable: tuple[Path, ...] = (),
    ) -> list[str]:
        """``argv`` under bwrap: run in ``cwd`` with ``env``'s allowed variables, seeing only the
        system, the toolchains ``env`` names and the paths given."""
        inside = _sandbox_env(env)
        args = [self.bwrap, *NAMESPACES, *_system_binds()]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
        rw = [*self.writable, *writable]
        tools = [p for p in _toolchain_dirs(inside, argv) if not _covered(p, (Path("/usr"), *rw))]
        args += _binds("--ro-bind", _outermost(tools))
        args += _binds("--bind", _outermost(rw))
        for secret in _cargo_secrets(inside):  # bound above through a wider folder: empty inside
            if _covered(secret, (*tools, *rw)):
                args += ["--ro-bind", "/dev/null", str(secret)]
        for place in _secret_places([*tools, *rw]):
            args += ["--tmpfs", str(place)] if place.is_dir() else ["--ro-bind", "/dev/null", str(place)]
        for path in self.hidden:  # a folder above it was bound: leave it empty inside
            if _covered(path, (*tools, *rw)):
                args += ["--tmpfs", str(path)]
        # named for this process (the reports a validator reads): shown even where hidden above
        args += _binds("--ro-bind", _outermost(list(readable)))
        for device in self.devices:
            args += ["--dev-bind-try", str(device), str(device)]
        args.append("--clearenv")
        for key, value in sorted(inside.items()):
            args += ["--setenv", key, value]
        # bwrap itself starts with an empty environment: its pid 1 inside keeps the one it was given
        return ["env", "-i", *args, "--chdir", str(cwd), "--", *argv]

    def check(self) -> None:
        """Raise ``SandboxUnavailable`` when bwrap cannot make the namespaces here."""
        argv = [self.bwrap, *NAMESPACES, *_system_binds(), "--proc", "/proc", "--dev", "/dev", "--", "true"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"bubblewrap could not be started ({exc}): {WHAT_TO_CHANGE}") from None
        if proc.returncode != 0:
            why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise SandboxUnavailable(f"bubblewrap cannot make the sandbox here ({why}): {WHAT_TO_CHANGE}")


def make(writable: list[Path], hidden: list[Path]) -> Sandbox:
    """A sandbox for this machine, checked; ``SandboxUnavailable`` when it cannot be made."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed: {WHAT_TO_CHANGE}")
    box = Sandbox(bwrap, tuple(p.resolve() for p in writable), tuple(p.resolve() for p in hidden))
    box.check()
    return box


_lock = threading.Lock()
_active: list[Sandbox] = []  # a module global, not a ContextVar: test threads must see it too


@contextlib.contextmanager
def active(box: Sandbox | None) -> Iterator[None]:
    """PR code started by ``wrap`` inside the block runs in ``box`` (None: as before)."""
    if box is None:
        yield
        return
    with _lock:
        _active.append(box)
    try:
        yield
    finally:
        with _lock:
            _active.remove(box)


def current() -> Sandbox | None:
    with _lock:
        return _active[-1] if _active else None


def wrap(
    argv: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    readable: tuple[Path, ...] = (),
    writable: tuple[Path, ...] = (),
) -> list[str]:
    """``argv`` as it must be started: unchanged without an active sandbox, else under bwrap."""
    box = current()
    if box is None:
        return argv
    return box.command(
        argv, Path(cwd).resolve(), dict(os.environ if env is None else env), readable, writable
    )


@contextlib.contextmanager
def result_file(path: Path) -> Iterator[Path]:
    """Where a process writes ``path``: in a sandbox, a fresh folder bound for that process alone
    (pass its parent in ``writable``), moved to ``path`` after the process, and every process it
    started, has ended; without one, ``path`` itself."""
    if current() is None:
        yield path
        return
    scratch = Path(tempfile.mkdtemp(prefix="agent-d-result-"))
    try:
        yield scratch / path.name
        made = scratch / path.name
        if made.is_file() and not made.is_symlink():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(made, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ------------------------------------------------------------------------------------ what is bound


def _sandbox_env(env: dict[str, str]) -> dict[str, str]:
    """The kept variables, with the toolchain homes made explicit (HOME is private inside)."""
    home = env.get("HOME") or os.path.expanduser("~")
    inside = {k: v for k, v in env.items() if pr_env.kept(k)}
    inside.setdefault("CARGO_HOME", str(Path(home) / ".cargo"))
    inside.setdefault("RUSTUP_HOME", str(Path(home) / ".rustup"))
    inside.update({"HOME": SANDBOX_HOME, "TMPDIR": "/tmp", "CARGO_NET_OFFLINE": "true"})
    inside.pop("PWD", None)  # the runner's folder; the process starts in --chdir
    return inside


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


def _toolchain_dirs(env: dict[str, str], argv: list[str]) -> list[Path]:
    """The folders the environment names as toolchains, the program's own and its interpreter's.
    Of ``CARGO_HOME`` only what a build reads: its binaries and the registry's and git's sources."""
    found = [env[k] for k in TOOLCHAIN_DIRS if env.get(k) and k != "CARGO_HOME"]
    if env.get("CARGO_HOME"):
        found += [str(Path(env["CARGO_HOME"]) / part) for part in CARGO_READ]
    for key in TOOLCHAIN_PATHS:
        found += [p for p in env.get(key, "").split(os.pathsep) if p]
    if env.get("CUTILE_TILEIRAS_PATH"):
        found.append(str(Path(env["CUTILE_TILEIRAS_PATH"]).parent))
    program = shutil.which(argv[0], path=env.get("PATH")) if argv else None
    if program:
        found.append(str(Path(program).resolve().parent))
        found += _python_dirs(program)
    dirs = []
    for raw in found:
        path = Path(raw)
        if path.is_absolute() and path.exists() and not _too_wide(path.resolve()):
            dirs.append(path.resolve())
    return dirs


def _cargo_secrets(env: dict[str, str]) -> list[Path]:
    """The files of ``CARGO_HOME`` that hold a registry token or the runner's cargo settings."""
    home = env.get("CARGO_HOME")
    if not home:
        return []
    return [p.resolve() for name in CARGO_SECRETS if (p := Path(home) / name).is_file()]


def _secret_places(bound: list[Path]) -> list[Path]:
    """What the bound folders hold that PR code must not read: ``SECRET_PLACES`` at their top two
    levels, and the runner's own folders where a bound folder holds them."""
    found: set[Path] = set()
    for root in _outermost(bound):
        for folder in [root, *_subfolders(root)]:
            found.update(folder / name for name in SECRET_PLACES if os.path.lexists(folder / name))
    for key in RUNNER_PLACES:
        place = os.environ.get(key, "")
        if place and Path(place).is_dir() and _covered(Path(place), bound):
            found.add(Path(place).resolve())
    return sorted(p for p in found if not p.is_symlink())


def _subfolders(root: Path) -> list[Path]:
    try:
        return [e for e in root.iterdir() if e.is_dir() and not e.is_symlink()]
    except OSError:
        return []


def _too_wide(path: Path) -> bool:
    """A toolchain entry that would bind the whole system or a whole home is not taken."""
    return path == Path("/") or path == Path.home().resolve() or path.parent == Path("/home")


_python_cache: dict[str, list[str]] = {}


def _python_dirs(program: str) -> list[str]:
    """An interpreter's prefix and ``sys.path`` (a venv's python links to its base's); [] for other programs."""
    if "python" not in Path(program).name:
        return []
    if program not in _python_cache:
        code = (
            "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]))"
        )
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
        try:  # the runner's own interpreter, in /, without the checkout on its path
            proc = subprocess.run(
                [program, "-c", code], cwd="/", env=env, capture_output=True, text=True, timeout=60
            )
            _python_cache[program] = [p for p in json.loads(proc.stdout) if p] if proc.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
            _python_cache[program] = []
    return _python_cache[program]


def _covered(path: Path, roots: tuple[Path, ...] | list[Path]) -> bool:
    path = Path(path).resolve()
    return any(path == r or r in path.parents for r in map(Path, roots))


def _outermost(paths: list[Path]) -> list[Path]:
    """Each folder once, and none inside another given folder (bound already)."""
    unique = sorted({Path(p).resolve() for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not _covered(path, kept):
            kept.append(path)
    return kept


def _binds(flag: str, paths: list[Path]) -> list[str]:
    args: list[str] = []
    for path in paths:
        args += [flag, str(path), str(path)]
    return args


def _gpu_devices() -> list[Path]:
    dev = Path("/dev")
    return sorted([*dev.glob("nvidia*"), *dev.glob("dri")]) if dev.is_dir() else []
