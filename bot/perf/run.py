"""One pytest run of the op's ``test_perf`` cases for the three backends, and what it selected.

Selection: ``test_perf`` of the op's test files (every ``test_perf*`` function when none is called
exactly that), its cutile-rs, cuTile and PyTorch cases (``-k "... and (cutile or pytorch)"``: the
word ``cutile`` matches both spellings of cutile-rs too), the same shapes and dtypes for each,
since one parametrization makes them all. The selection is collected first (``--collect-only``),
so a case the run never reached is still named, and a selection with no cutile-rs case stops
before any GPU time.

The run takes the collected cases as node ids, config by config (:func:`by_config`): cutile-rs,
cuTile and PyTorch of one config one after the other, the dtypes taking turns, so a run its
deadline cuts short has measured whole configs of every dtype rather than one backend's.

The run: ``-v --tb=short -rs``, ``--print-record`` when the checkout's conftest defines it (the
skill's command), the JUnit XML (where pytest writes the records, bot/perf/records.py), CUPTI
timing (``CUPTI=1``) of the forward pass only (``MODE=forward``: the port is forward-only). Its
time is bounded three ways: each case by pytest-timeout, the session by pytest-timeout's
``--session-timeout`` (it ends after the case in flight and still writes the XML), and the
process by the stage's deadline.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from bot import progress
from bot.perf import records
from bot.perf.result import BACKENDS
from bot.targets.types import Target
from bot.testing import testrun
from bot.testresults.cases import split_nodeid

BACKEND_WORDS = "(cutile or pytorch)"  # cutile matches cutile_rs / cutile-rs as well
PERF_TEST = "test_perf"
PRINT_RECORD = "--print-record"
JUNIT_NAME = "perf_records.xml"
FULL_LOG = Path("reports") / "agent_logs" / "perf_cutile_rs.full.txt"
CASE_TIMEOUT_S = 600.0  # agent_e.md's --timeout
# stage E compares tuned with tuned: a cuTile reference may tune whatever TileGym's switch says
# (bmm's exhaustive_search does), so the port must not run its first config only
AUTOTUNE_SWITCH = "TILEGYM_DISABLE_AUTOTUNE"
ENV = {"CUPTI": "1", "MODE": "forward", "CUTILE_RS_AUTOBUILD": "0", AUTOTUNE_SWITCH: "0"}


@dataclass(frozen=True)
class Selection:
    functions: tuple[str, ...]  # the test_perf functions selected
    expression: str  # the -k expression
    print_record: bool  # the checkout's conftest defines --print-record


def select(repo: Path, test_paths: tuple[str, ...], all_tests: tuple[str, ...]) -> Selection | None:
    """The op's perf tests and the ``-k`` that picks their three backends; None when there are none."""
    perf = [n for n in all_tests if n.startswith(PERF_TEST)]
    if not perf:
        return None
    chosen = [PERF_TEST] if PERF_TEST in perf else perf
    others = [n for n in perf if n not in chosen and any(c in n for c in chosen)]  # -k matches substrings
    names = chosen[0] if len(chosen) == 1 else f"({' or '.join(chosen)})"
    if others:
        names += f" and not ({' or '.join(others)})"
    return Selection(tuple(chosen), f"{names} and {BACKEND_WORDS}", defines_print_record(repo, test_paths))


def defines_print_record(repo: Path, test_paths: tuple[str, ...]) -> bool:
    """Whether a conftest.py pytest reads for these tests (the repo root down to each file's folder)
    adds ``--print-record``; passing it where none does would be a usage error."""
    folders = {repo}
    for path in test_paths:
        folder = repo
        for part in Path(path).parent.parts:
            folder = folder / part
            folders.add(folder)
    for folder in folders:
        conftest = folder / "conftest.py"
        if conftest.is_file() and PRINT_RECORD in conftest.read_text(encoding="utf-8", errors="replace"):
            return True
    return False


def argv(python: str, test_paths: tuple[str, ...], selection: Selection, junit_xml: str) -> list[str]:
    """The run's pytest command (the budget's options are added by :func:`budget_args`)."""
    out = [python, "-m", "pytest", *test_paths, "-k", selection.expression, "-v", "--tb=short", "-rs"]
    if selection.print_record:
        out.append(PRINT_RECORD)
    # the checkout's pytest.ini may not say it: record_property warns under xunit2's default
    return out + [f"--junitxml={junit_xml}", "-o", "junit_family=xunit1", "-p", "no:cacheprovider"]


ConfigKey = tuple[str, str, str]  # (test file, test function, its parameters without the backend)


def configs_in_turns(ids: list[str]) -> list[tuple[ConfigKey, list[str]]]:
    """``ids`` grouped by config, cutile-rs first in each, the configs of each dtype taking turns."""
    rank = {backend: i for i, backend in enumerate(BACKENDS)}
    configs: dict[ConfigKey, list[tuple[int, str]]] = {}
    dtypes: dict[str, list[ConfigKey]] = {}  # dtype -> its configs, in collection order
    for nodeid in ids:
        file, name, params = split_nodeid(nodeid)
        backend, config = records.split_backend(params)
        key = (file, name, config)
        if key not in configs:
            configs[key] = []
            dtypes.setdefault(records.dtype_of(params), []).append(key)
        configs[key].append((rank.get(backend, len(rank)), nodeid))
    turns = [key for round_ in zip_longest(*dtypes.values()) for key in round_ if key is not None]
    return [(key, [nodeid for _, nodeid in sorted(configs[key], key=lambda c: c[0])]) for key in turns]


def by_config(ids: list[str]) -> list[str]:
    """``ids`` config by config, cutile-rs first in each, the configs of each dtype taking turns."""
    return [nodeid for _, cases in configs_in_turns(ids) for nodeid in cases]


def with_ids(command: list[str], test_paths: tuple[str, ...], ids: list[str]) -> list[str]:
    """``command`` with its files and ``-k`` selection replaced by these node ids, in this order
    (a file left beside them would run first, in pytest's order)."""
    at = command.index("-k")
    kept = [a for a in command[:at] if a not in test_paths]
    return kept + command[at + 2 :] + ids


def budget_args(seconds: float, session_timeout: bool) -> list[str]:
    """Per-case and (where pytest-timeout has it) session limits that end inside ``seconds``."""
    per_case = min(CASE_TIMEOUT_S, max(30.0, seconds / 4))
    out = [f"--timeout={per_case:.0f}"]
    if session_timeout:
        out.append(f"--session-timeout={max(10.0, seconds - per_case - 30):.0f}")
    return out


SESSION_TIMEOUT_PROBE = (
    "import importlib.metadata as m, re\n"
    "v = [int(x) for x in re.findall(r'\\d+', m.version('pytest-timeout'))[:2]]\n"
    "print('yes' if v >= [2, 3] else 'no')\n"
)


def has_session_timeout(python: str) -> bool:
    """pytest-timeout 2.3 added ``--session-timeout``; an older one would refuse the option."""
    try:
        proc = subprocess.run(
            [python, "-c", SESSION_TIMEOUT_PROBE], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.stdout.strip() == "yes"


def environment(out_dir: Path, tools=None) -> dict[str, str]:
    """What the perf pytest runs with, beside the inherited environment (as the correctness run);
    autotuning on even where the correctness run had it off."""
    env = {**ENV, "CUTILE_KERNEL_OUT_ROOT": str(out_dir.parent)}
    if tools is not None:
        env["CUDA_TOOLKIT_PATH"] = str(tools.cuda_toolkit_path)
    return env


def collect(
    target: Target, command: list[str], out_dir: Path, env: dict[str, str], timeout: float
) -> tuple[list[str], str]:
    """The node ids ``command`` selects (``--collect-only -q``) and the collection's output."""
    collect_argv = [a for a in command if not a.startswith("--junitxml=")] + ["--collect-only", "-q"]
    collect_argv = [a for a in collect_argv if a not in ("-v", "-rs")]
    log = out_dir / "reports" / "agent_logs" / "perf_collect.txt"
    testrun.run(target, collect_argv, log, env, timeout)
    text = log.read_text(encoding="utf-8", errors="replace")
    ids = [ln.strip() for ln in text.splitlines() if re.match(r"^\S+\.py::\S", ln.strip())]
    return ids, text


_SESSION_TIMEOUT = re.compile(r"^!+ session-timeout: [0-9.]+ sec exceeded !+$", re.M)


def ended_at_session_timeout(log_text: str) -> bool:
    """pytest-timeout's ``--session-timeout`` ended the run (it says so in one line, then writes
    the XML as for a run that finished)."""
    return bool(_SESSION_TIMEOUT.search(log_text))


def run(
    target: Target,
    command: list[str],
    out_dir: Path,
    env: dict[str, str],
    timeout: float,
    echo: progress.Echo,
) -> tuple[testrun.RunOutcome, str, str | None]:
    """Run the perf cases; (the outcome, the log's text, the JUnit XML's text or None)."""
    log = out_dir / FULL_LOG
    junit = out_dir / JUNIT_NAME
    junit.unlink(missing_ok=True)  # an earlier run's records must not stand in for this one's
    outcome = testrun.run(target, command, log, env, timeout, None, echo)
    xml = junit.read_text(encoding="utf-8", errors="replace") if junit.is_file() else None
    return outcome, log.read_text(encoding="utf-8", errors="replace"), xml


def tuning_note(environ: Mapping[str, str]) -> str:
    """What the perf stage says when the environment turns autotuning off for the correctness run."""
    value = environ.get(AUTOTUNE_SWITCH, "").strip().lower()
    if value not in ("1", "true", "yes", "on"):
        return ""
    return (
        f"{AUTOTUNE_SWITCH}={environ[AUTOTUNE_SWITCH]} held for the correctness run only: test_perf ran "
        "with autotuning on, as the cuTile reference may tune regardless, so both sides are tuned"
    )
