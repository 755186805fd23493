"""Stage "test": the real pytest surface of docs/specification.md, "The correctness run", run with the target interpreter.

The command is always ``-x --timeout=60 --tb=short -v`` without ``--no-header``, its output
tee'd to ``correctness_cutile_rs.txt``, its JUnit XML written to ``correctness_cutile_rs.xml``. Selection: the op's functional tests (``test_op*``,
``test_autotune_op*``; backward tests excluded because cutile-rs wrappers are forward only),
matching both id spellings ``cutile_rs`` and ``cutile-rs``; all cutile-rs cases when the file
has no functional test. Before running, the interpreter is probed (pytest, the timeout plugin,
torch, a CUDA device) so the verdict can say precisely why a run proves nothing.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bot import children, progress, sandbox
from bot.targets.test_sites import is_functional
from bot.targets.types import Target, TestSite
from bot.testing import envcheck
from bot.testing.envcheck import Interpreter

PROBE = r"""
import importlib.util, json
info = {"pytest": None, "timeout_plugin": False, "torch": None, "cuda": False, "device": "", "error": "",
        "gpus": 0, "driver": "", "driver_version": 0}
try:
    import ctypes
    libcuda = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_int(0)
    version = ctypes.c_int(0)
    if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
        info["driver_version"] = version.value
    status = libcuda.cuInit(0)
    if status == 0 and libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0:
        info["gpus"] = count.value
    else:
        info["driver"] = f"cuInit returned {status}"
except OSError as exc:
    info["driver"] = f"libcuda.so.1 not loadable ({exc})"
try:
    import pytest
    info["pytest"] = pytest.__version__
except Exception as exc:
    info["error"] = f"pytest: {exc}"
info["timeout_plugin"] = importlib.util.find_spec("pytest_timeout") is not None
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = bool(torch.cuda.is_available())
    if info["cuda"]:
        p = torch.cuda.get_device_properties(0)
        info["device"] = f"{p.name} (sm_{p.major}{p.minor})"
except Exception as exc:
    info["error"] = (info["error"] + "; " if info["error"] else "") + f"torch: {exc}"
# The registration check in the same interpreter (one torch import, not two): asked only where the
# tests can run, as the tests import it (the checkout's src first, no autobuild).
import sys
names = sys.argv[1:]
if names and info["cuda"]:
    try:
        import tilegym.ops  # every backend's wrappers register themselves on import
        from tilegym.backend import dispatcher
        registry = getattr(dispatcher, "_REGISTRY", None)
        if registry is not None:
            info["registered"] = {n: sorted(registry.get(n, {})) for n in names}
    except Exception as exc:
        info["registry_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(info))
"""


def probe(
    python: str, env: dict[str, str] | None = None, repo: Path | None = None, names: tuple[str, ...] = ()
) -> Interpreter:
    """The facts about ``python`` and this machine; ``env``: the environment pytest will run in.
    With ``repo`` and ``names``, also the backends TileGym's dispatcher registers for each name, as
    the tests in ``repo`` will import it (where a GPU is there: else the tests cannot run anyway)."""
    tileiras = envcheck.tileiras_path(env)
    run_env = dict(os.environ if env is None else env, CUTILE_RS_AUTOBUILD="0")
    if repo is not None:
        _with_src_on_path(run_env, repo)
    where = repo if repo is not None else Path("/tmp")
    try:
        argv = sandbox.wrap([python, "-c", PROBE, *names], where, run_env)  # what the tests will see
        proc = subprocess.run(argv, cwd=where, env=run_env, capture_output=True, text=True, timeout=180)
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except FileNotFoundError:
        return Interpreter(python, None, False, None, False, "", f"cannot run {python}", missing=True)
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
        return Interpreter(python, None, False, None, False, "", f"cannot run {python}: {exc}")
    return Interpreter(
        python,
        info["pytest"],
        info["timeout_plugin"],
        info["torch"],
        info["cuda"],
        info["device"],
        info["error"],
        info["gpus"],
        info["driver"],
        info.get("driver_version", 0),
        tileiras,
        tile_home=envcheck.tile_home_problem(tileiras, env),
        registered=info.get("registered"),
    )


@dataclass(frozen=True)
class TestFile:
    """What the run needs from the op's test files, each read with one parse."""

    __test__ = False  # not a pytest test class
    functional: tuple[str, ...] = ()  # test functions of the correctness surface, in file order
    # the constant text of every pytest.skip(...) reason (f-strings: their leading text)
    skips: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # the files, relative to the repo
    all_tests: tuple[str, ...] = ()  # every test function name of the files


def read_test_files(repo: Path, sites: tuple[TestSite, ...]) -> TestFile:
    """The functional tests and skip reasons of every discovered test file, merged; a site's own
    list of tests that call the op wins over the name rule."""
    functional: list[str] = []
    skips: list[str] = []
    names: list[str] = []
    for site in sites:
        one = read_test_file(repo / site.path)
        functional += site.functional or one.functional
        skips += one.skips
        names += one.all_tests
    return TestFile(
        tuple(dict.fromkeys(functional)),
        tuple(dict.fromkeys(skips)),
        tuple(s.path for s in sites),
        tuple(dict.fromkeys(names)),
    )


def read_test_file(test_file: Path) -> TestFile:
    """The functional tests and skip reasons of ``test_file``; empty when the file does not exist."""
    if not test_file.is_file():
        return TestFile()
    nodes = list(ast.walk(ast.parse(test_file.read_text(encoding="utf-8"))))
    names = [
        n.name
        for n in nodes
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_functional(n.name)
    ]
    reasons: list[str] = []
    for node in nodes:
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("skip", "skipif")):
            continue
        # pytest.skip("why"), pytest.mark.skip(reason="why"), pytest.mark.skipif(cond, reason="why")
        given = [k.value for k in node.keywords if k.arg in ("reason", "msg")]
        if not given and node.args and getattr(node.func, "attr", "") == "skip":
            given = [node.args[0]]
        if not given:
            continue
        arg = given[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            reasons.append(arg.value)
        elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
            reasons.append(str(arg.values[0].value))
    every = [
        n.name
        for n in nodes
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
    ]
    return TestFile(tuple(dict.fromkeys(names)), tuple(reasons), (), tuple(dict.fromkeys(every)))


# -k expressions of a backend's parametrized cases: ids spell cutile-rs both ways (docs/specification.md, "The correctness run")
CUTILE_RS = "(cutile_rs or cutile-rs)"
CUTILE = "(cutile and not cutile_rs and not cutile-rs)"  # the cuTile Python backend, a new op's baseline


def command(
    python: str, tests: TestFile, backend: str = CUTILE_RS, junit_xml: str = ""
) -> tuple[list[str], str]:
    """The pytest argv over the op's test files and the selection it uses (for the report).

    ``junit_xml``: where pytest writes its JUnit XML, the source of the results (bot/testresults/junit.py)."""
    if tests.functional:
        selection = f"{backend} and ({' or '.join(tests.functional)})"
        # -k matches substrings: `test_op` would also select `test_op_backward`
        widened = [
            n for n in tests.all_tests if n not in tests.functional and any(f in n for f in tests.functional)
        ]
        if widened:
            selection += f" and not ({' or '.join(widened)})"
    else:
        selection = backend
    # -rs prints every skip's reason, so each skip can be checked for its citation.
    argv = [
        python,
        "-m",
        "pytest",
        *tests.paths,
        "-k",
        selection,
        "--tb=short",
        "-v",
        "-x",
        "--timeout=60",
        "-rs",
    ]
    if junit_xml:
        argv.append(f"{JUNIT_OPTION}{junit_xml}")
    return argv, selection


JUNIT_NAME = "correctness_cutile_rs.xml"
JUNIT_OPTION = "--junitxml="


def junit_arg(path: Path, repo: Path) -> str:
    """``path`` as pytest (run in ``repo``) is given it: relative when inside the repo, so the
    command in the report reads the same on every machine."""
    try:
        return str(path.resolve().relative_to(repo.resolve()))
    except ValueError:
        return str(path)


def shown(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


STOPPED = "agent-d: pytest stopped by --test-timeout after"


class RunOutcome(NamedTuple):
    code: int | None  # None: pytest could not be started
    seconds: float
    stopped: bool = False  # killed by us at the --test-timeout deadline
    silent_for: float = 0.0  # seconds since pytest's last output line when it was stopped


_RESULT_LINE = re.compile(
    r"^(?P<file>[^\s:]+\.py)::\S.* (?P<outcome>PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b"
)


class FileProgress:
    """One progress line per test file as pytest finishes it (``-v`` prints a line per test):
    ``[agent-d]   pytest: tests/ops/test_x.py: 12 passed, 1 skipped``."""

    def __init__(self, echo: progress.Echo) -> None:
        self.echo = echo
        self.file = ""
        self.counts: dict[str, int] = {}
        self.done = 0

    def line(self, text: str) -> None:
        m = _RESULT_LINE.match(text)
        if not m:
            return
        if m["file"] != self.file:
            self.flush()
            self.file = m["file"]
        outcome = m["outcome"].lower()
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        self.done += 1

    def flush(self) -> None:
        if self.file:
            counts = ", ".join(f"{n} {word}" for word, n in self.counts.items())
            self.echo(f"[agent-d]   pytest: {self.file}: {counts}")
        self.file, self.counts = "", {}

    def status(self) -> str:
        return f"{self.done} tests done" + (f", in {self.file}" if self.file else "")


def run(
    target: Target,
    argv: list[str],
    log_path: Path,
    extra_env: dict[str, str],
    timeout: float,
    echo=None,
    progress_echo: progress.Echo = progress.silent,
    cancel: Cancel | None = None,
) -> RunOutcome:
    """Run pytest, tee its output to ``log_path`` (and ``echo``); say whether we had to stop it.

    ``progress_echo`` gets one line per finished test file and a heartbeat when pytest is silent
    for 15 s (a cold import of torch, a slow JIT). ``cancel``: another thread may end the run."""
    env = dict(os.environ)
    env.update(extra_env)
    _with_src_on_path(env, target.repo)
    env.setdefault("PYTHONUNBUFFERED", "1")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log, _boxed(argv, target.repo, env) as boxed:
        try:
            proc = subprocess.Popen(
                boxed,
                cwd=target.repo,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,  # its own process group: the deadline stops workers too
            )
        except OSError as exc:
            log.write(f"cannot start {argv[0]}: {exc}\n")
            return RunOutcome(None, 0.0)
        deadline = _Deadline(proc, timeout)
        try:
            with children.started(proc, "pytest"), (cancel or Cancel()).watching(proc):
                code = _tee(proc, log, deadline, echo, progress_echo)
        finally:
            deadline.cancel()
        if deadline.stopped.is_set():
            log.write(f"\n{STOPPED} {timeout:.0f} s ({deadline.silent:.0f} s after its last output line)\n")
        elif cancel is not None and cancel.is_set():
            log.write(f"\n{CANCELLED}: {cancel.why}\n")
    return RunOutcome(code, time.monotonic() - start, deadline.stopped.is_set(), deadline.silent)


@contextlib.contextmanager
def _boxed(argv: list[str], repo: Path, env: dict[str, str]) -> Iterator[list[str]]:
    """pytest's argv as started: in a sandbox (bot/sandbox.py), its JUnit XML written to a folder of
    its own and read back into place once every process of the run has ended."""
    junit = next((i for i, a in enumerate(argv) if a.startswith(JUNIT_OPTION)), None)
    if sandbox.current() is None or junit is None:
        yield sandbox.wrap(argv, repo, env)
        return
    wanted = repo / argv[junit][len(JUNIT_OPTION) :]
    with sandbox.result_file(wanted) as written:
        moved = [*argv[:junit], f"{JUNIT_OPTION}{written}", *argv[junit + 1 :]]
        yield sandbox.wrap(moved, repo, env, writable=(written.parent,))


def _with_src_on_path(env: dict[str, str], repo: Path) -> None:
    """The checkout's ``src`` first on ``PYTHONPATH``: the tests import the tilegym being ported."""
    src = str(repo / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")


CANCELLED = "agent-d: pytest stopped"


class Cancel:
    """Ends pytest runs from another thread: the dry run, run beside the tests, found a fault that
    is the verdict, so the GPU time left is not spent. A run started after ``set`` ends at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.why = ""

    def is_set(self) -> bool:
        return bool(self.why)

    def set(self, why: str) -> None:
        with self._lock:
            self.why = why or "cancelled"
            for proc in self._running:
                _kill_group(proc)

    @contextlib.contextmanager
    def watching(self, proc: subprocess.Popen) -> Iterator[None]:
        with self._lock:
            if self.why:
                _kill_group(proc)
            self._running.add(proc)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


class _Deadline:
    """Kills pytest's process group when ``timeout`` runs out: on a timer, so a pytest that hangs
    without printing is stopped too. Notes how long pytest had been silent then (a test silent past
    its own timeout hangs)."""

    def __init__(self, proc: subprocess.Popen, timeout: float) -> None:
        self.proc = proc
        self.last_line = time.monotonic()  # when pytest last printed
        self.silent = 0.0
        self.stopped = threading.Event()
        self._timer = threading.Timer(max(timeout, 0.0), self._stop)
        self._timer.daemon = True
        self._timer.start()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.silent = time.monotonic() - self.last_line
            self.stopped.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def cancel(self) -> None:
        self._timer.cancel()


def _tee(proc: subprocess.Popen, log, deadline: _Deadline, echo, progress_echo: progress.Echo) -> int:
    """pytest's output into ``log`` (and ``echo``) line by line until it exits; its exit code."""
    assert proc.stdout is not None
    files = FileProgress(progress_echo)
    with progress.heartbeat(progress_echo, "pytest", status=files.status) as alive:
        for line in proc.stdout:
            deadline.last_line = time.monotonic()
            log.write(line)
            if echo:
                echo(line.rstrip("\n"))
            before = files.file
            files.line(line)
            if files.file != before:
                alive()  # a finished file printed a line: no heartbeat needed
        code = proc.wait()
    files.flush()
    return code


REGISTRY_PROBE = r"""
import json, sys
import tilegym.ops  # every backend's wrappers register themselves on import
from tilegym.backend import dispatcher
registry = getattr(dispatcher, "_REGISTRY", None)
print(json.dumps(None if registry is None else sorted(registry.get(sys.argv[1], {}))))
"""


def registered_backends(python: str, repo: Path, name: str, timeout: float = 180) -> list[str] | None:
    """The backends TileGym's dispatcher holds an implementation of ``name`` for, as the tests will
    import it; None when it could not be asked (the tests then show what is wrong). Without
    cutile-rs among them, a test asking for cutile-rs would run the dispatcher's fallback instead."""
    env = dict(os.environ, CUTILE_RS_AUTOBUILD="0")
    _with_src_on_path(env, repo)
    try:
        proc = subprocess.run(
            sandbox.wrap([python, "-c", REGISTRY_PROBE, name], repo, env),
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
        return None


def current_python() -> str:
    return sys.executable
