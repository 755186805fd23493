"""The patch-and-results artifact between ``agent-d port`` (untrusted) and ``finalize`` (trusted).

Layout of the artifact directory (docs/artifact.md):

    result.json   schema_version 2: repo, head_sha, base_sha, base_tree, tested_tree, ops,
                  verdicts, validator blocks, changed_paths, reset_paths, reset_count
    patch.diff    ``git diff`` from base_tree (the base's files plus the ported kernel.rs) to
                  the tested tree (text only), may be empty
    logs/*.txt    tails of the logs, truncated

``result.json`` may also hold ``perf``: per kernel, the perf stage's summary (bot/perf/result.py),
for the review's perf table and the ``<check>/perf`` check run.

``read_artifact`` treats the directory as hostile data: it checks sizes, file types
(regular files only, no links), the JSON schema, and every path in the patch against
the allow-list before anything else looks at it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jsonschema
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from bot.build.types import Annotation
from bot.github.artifact_schema import (
    HEX40,
    MAX_RESET_PATHS,
    PERF_SCHEMA,
    RESULT_SCHEMA,
    SCHEMA_VERSION,
)
from bot.github.gitops import TreeChange
from bot.github.path_classes import CLASSES, NO_PATHS, ClassedPaths, path_class

RESULT = "result.json"
PATCH = "patch.diff"
LOGS = "logs"
OPS_DIR = "src/tilegym/ops/cutile_rs"
# The files agent-d writes, as full-match regexes: one op's ffi.rs and wrapper (``<op>`` is group 1),
# then the wiring it edits. Nothing else (no Cargo.lock, no drafts, no other files under cutile_rs).
GENERATED_PATTERNS = (
    rf"{OPS_DIR}/([a-z][a-z0-9_]*)_kernel/ffi\.rs",
    rf"{OPS_DIR}/([a-z][a-z0-9_]*)\.py",
)
WIRING_PATTERNS = (
    rf"{OPS_DIR}/cutile_kernels/src/lib\.rs",
    rf"{OPS_DIR}/__init__\.py",
    r"src/tilegym/backend/selector\.py",
    r"src/tilegym/ops/__init__\.py",
    r"tests/ops/(?:[A-Za-z0-9_]+/)*test_[A-Za-z0-9_]+\.py",  # subpackages too (tests/ops/activation/)
)
ALLOWED_PATHS = GENERATED_PATTERNS + WIRING_PATTERNS
REGULAR_FILE_MODE = "100644"
_SHA_RE = re.compile(HEX40)
_LOG_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,80}\.txt$")
# git apply also honours the old spellings (rename old/new) and mode-only headers; refuse them all.
_BAD_MODE_RE = re.compile(r"^(?:new file mode (?!100644$)\S+|new mode .*|old mode .*)$", re.MULTILINE)
_DELETE_RE = re.compile(r"^deleted file mode ", re.MULTILINE)
_RENAME_RE = re.compile(r"^(?:rename|copy) (?:from|to|old|new) |^(?:dis)?similarity index ", re.MULTILINE)
_BINARY_RE = re.compile(r"^(?:GIT binary patch|Binary files .* differ)$", re.MULTILINE)


class ArtifactError(ValueError):
    """The artifact is malformed or breaks a rule; the message says which."""


@dataclass(frozen=True)
class Limits:
    max_result_bytes: int = 512 * 1024
    max_patch_bytes: int = 2 * 1024 * 1024
    max_log_bytes: int = 64 * 1024  # per file; the writer keeps the tail
    max_logs: int = 32
    max_files_in_patch: int = 100
    allowed_paths: tuple[str, ...] = ALLOWED_PATHS  # full-match regexes


@dataclass(frozen=True)
class KernelVerdict:
    kind: str  # ALL_PASS | FAIL | BLOCKED
    klass: str  # fail_class / block_class, "" for ALL_PASS
    reason: str
    validator_block: str = ""
    withheld: bool = False  # agent-d's own bug: its generated files were not applied (finalize skips them)
    annotations: tuple[Annotation, ...] = ()  # where the fault is: the check run's annotations


@dataclass
class Artifact:
    repo: str
    head_sha: str
    base_tree: str
    tested_tree: str
    ops: list[str]
    verdicts: dict[str, KernelVerdict]
    changed_paths: list[str]
    patch: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    truncated_logs: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    perf: dict[str, dict] = field(default_factory=dict)  # kernel -> the perf stage's summary
    base_sha: str = ""  # the base commit whose files (plus each op's kernel.rs) are base_tree
    reset: ClassedPaths = NO_PATHS  # at most MAX_RESET_PATHS of them
    reset_count: int = 0  # how many paths were put back, listed or not

    @property
    def empty(self) -> bool:
        return not self.patch.strip()


def tail(text: str, limit: int) -> tuple[str, bool]:
    """The last ``limit`` bytes of ``text`` (whole lines), and whether anything was cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text, False
    cut = data[-limit:].decode("utf-8", errors="ignore")
    cut = cut.split("\n", 1)[1] if "\n" in cut else cut
    return f"[... truncated: showing the last {len(cut.encode())} of {len(data)} bytes ...]\n{cut}", True


def listed_reset(reset: ClassedPaths) -> tuple[ClassedPaths, int]:
    """The reset paths an artifact lists (the first MAX_RESET_PATHS in path order) and their count."""
    every = reset.all()
    return ClassedPaths.of(every[:MAX_RESET_PATHS]), len(every)


def write_artifact(
    directory: Path,
    *,
    repo: str,
    head_sha: str,
    base_sha: str,
    base_tree: str,
    tested_tree: str,
    verdicts: dict[str, KernelVerdict],
    patch: str,
    changed_paths: list[str],
    reset: ClassedPaths = NO_PATHS,
    logs: dict[str, str] | None = None,
    limits: Limits = Limits(),
    perf: dict[str, dict] | None = None,
) -> Path:
    directory = Path(directory)
    (directory / LOGS).mkdir(parents=True, exist_ok=True)
    truncated: list[str] = []
    for name, text in (logs or {}).items():
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:76] + ("" if name.endswith(".txt") else ".txt")
        body, cut = tail(text, limits.max_log_bytes - 200)
        if cut:
            truncated.append(safe)
        (directory / LOGS / safe).write_text(body, encoding="utf-8")
    (directory / PATCH).write_text(patch, encoding="utf-8")
    listed, count = listed_reset(reset)
    result = {
        "schema_version": SCHEMA_VERSION,
        "repo": repo,
        "head_sha": head_sha,
        "base_sha": base_sha,
        "base_tree": base_tree,
        "tested_tree": tested_tree,
        "ops": sorted(verdicts),
        "verdicts": {op: asdict(v) for op, v in sorted(verdicts.items())},
        "changed_paths": sorted(changed_paths),
        "reset_paths": listed.as_dict(),
        "reset_count": count,
        "truncated_logs": truncated,
    }
    if perf:
        result["perf"] = {op: perf_summary(p) for op, p in sorted(perf.items())}
    (directory / RESULT).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return directory


def perf_summary(summary: object) -> dict:
    """``summary`` when it is a perf stage's summary (:data:`PERF_SCHEMA`); ArtifactError otherwise."""
    try:
        jsonschema.validate(summary, PERF_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ArtifactError(f"perf summary: {where}: {exc.message}") from None
    assert isinstance(summary, dict)
    return summary


def _regular_file(path: Path, limit: int) -> bytes:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise ArtifactError(f"{path.name} is missing") from None
    if not stat.S_ISREG(st.st_mode):
        raise ArtifactError(f"{path.name} is not a regular file")
    if st.st_size > limit:
        raise ArtifactError(f"{path.name} is {st.st_size} bytes, over the {limit}-byte limit")
    with open(path, "rb") as fh:
        return fh.read(limit + 1)


def generated_op(path: str) -> str:
    """The op whose generated file ``path`` is (ffi.rs or wrapper); "" for wiring and other paths."""
    for pattern in GENERATED_PATTERNS:
        m = re.fullmatch(pattern, path)
        if m:
            return m.group(1)
    return ""


def plain_path_refusal(path: str) -> str:
    """Why ``path`` is not a plain relative path (no ``..``, no absolute, no control characters); ""."""
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or any(p in ("", ".", "..") for p in parts)
        or any(ord(c) < 32 or c == "\x7f" for c in path)
    ):
        return f"path {path!r} is not a plain relative path"
    return ""


def path_refusal(path: str, limits: Limits = Limits(), ops: Collection[str] | None = None) -> str:
    """Why the bot may not write ``path``; "" when it may.

    ``ops``: the kernels of this run; a generated file of any other kernel is refused too.
    """
    plain = plain_path_refusal(path)
    if plain:
        return plain
    parts = path.split("/")
    if any(p.lower() in (".git", ".github") for p in parts):
        return f"path {path!r} is under .git/ or .github/"
    if re.fullmatch(rf"{OPS_DIR}/[^/]+_kernel/kernel\.rs", path):
        return f"path {path!r} is a kernel.rs, which agent-d never edits"
    if not any(re.fullmatch(pat, path) for pat in limits.allowed_paths):
        return f"path {path!r} is outside the generated and wiring paths"
    op = generated_op(path)
    if ops is not None and op and op not in ops:
        return f"path {path!r} is a generated file of {op!r}, which this run did not port"
    return ""


def is_allowed(path: str, limits: Limits = Limits(), ops: Collection[str] | None = None) -> bool:
    """Whether the bot may write ``path`` (the port job keeps only these; finalize accepts only these)."""
    return not path_refusal(path, limits, ops)


def check_path(path: str, limits: Limits = Limits()) -> None:
    """Raise unless ``path`` is a plain relative path the bot is allowed to write."""
    why = path_refusal(path, limits)
    if why:
        raise ArtifactError(why)


def patch_paths(patch: str, limits: Limits = Limits(), ops: Collection[str] | None = None) -> list[str]:
    """Validate a unified git diff and return the paths it touches (sorted, unique).

    A first, early filter only: git may read a patch differently from unidiff, so finalize
    decides on git's own diff of the trees (``change_refusals``), never on these headers.
    """
    if _BINARY_RE.search(patch):
        raise ArtifactError("the patch has a binary hunk")
    if _BAD_MODE_RE.search(patch):
        raise ArtifactError("the patch sets a file mode other than 100644 (executable, symlink or submodule)")
    if _RENAME_RE.search(patch):
        raise ArtifactError("the patch renames or copies files")
    if _DELETE_RE.search(patch):
        raise ArtifactError("the patch deletes a file")
    try:
        files = PatchSet.from_string(patch)
    except UnidiffParseError as exc:
        raise ArtifactError(f"the patch does not parse: {exc}") from None
    if len(files) > limits.max_files_in_patch:
        raise ArtifactError(f"the patch touches {len(files)} files (limit {limits.max_files_in_patch})")
    paths: set[str] = set()
    for pf in files:
        if pf.is_symlink or pf.is_submodule:
            raise ArtifactError(f"{pf.path}: symlinks and submodules are not allowed")
        for raw in (pf.source_file, pf.target_file):
            if raw and raw != "/dev/null":
                name = raw[2:] if raw[:2] in ("a/", "b/") else raw
                why = path_refusal(name, limits, ops)
                if why:
                    raise ArtifactError(why)
                paths.add(name)
    n_diff = len(re.findall(r"^diff --git ", patch, re.MULTILINE))
    if n_diff != len(files):
        raise ArtifactError(f"the patch has {n_diff} file headers but {len(files)} parsed files")
    return sorted(paths)


def change_refusals(changes: list[TreeChange], ops: Collection[str], limits: Limits = Limits()) -> list[str]:
    """Why the tree change may not be pushed, one reason per offending path; [] when it may.

    ``changes`` come from git's tree diff without rename detection, so a rename shows up as
    what it does: a deletion plus an addition.
    """
    if len(changes) > limits.max_files_in_patch:
        return [f"{len(changes)} files change (limit {limits.max_files_in_patch})"]
    refusals: list[str] = []
    for change in changes:
        if change.status == "D":
            refusals.append(f"{change.path!r} is deleted (agent-d only adds and edits files)")
            continue
        if change.status not in ("A", "M"):
            refusals.append(f"{change.path!r} changes type ({change.status})")
            continue
        if change.new_mode != REGULAR_FILE_MODE:
            refusals.append(f"{change.path!r} gets mode {change.new_mode}, not {REGULAR_FILE_MODE}")
            continue
        why = path_refusal(change.path, limits, ops)
        if why:
            refusals.append(why)
    return refusals


def read_artifact(directory: Path, limits: Limits = Limits()) -> Artifact:
    directory = Path(directory)
    if directory.is_symlink() or not directory.is_dir():
        raise ArtifactError(f"{directory} is not a directory")
    for entry in os.scandir(directory):
        if entry.name not in (RESULT, PATCH, LOGS):
            raise ArtifactError(f"unexpected entry {entry.name!r} in the artifact")
    try:
        result = json.loads(_regular_file(directory / RESULT, limits.max_result_bytes).decode("utf-8"))
        jsonschema.validate(result, RESULT_SCHEMA)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"result.json: {exc}") from None
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ArtifactError(f"result.json: {where}: {exc.message}") from None
    if set(result["verdicts"]) != set(result["ops"]):
        raise ArtifactError("result.json: verdicts and ops name different kernels")
    if not set(result.get("perf", {})) <= set(result["ops"]):
        raise ArtifactError("result.json: perf names a kernel that ops does not")
    verdicts = {op: _verdict(op, v) for op, v in result["verdicts"].items()}
    try:
        patch = _regular_file(directory / PATCH, limits.max_patch_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise ArtifactError("patch.diff is not UTF-8 text") from None
    paths = patch_paths(patch, limits, result["ops"]) if patch.strip() else []
    if sorted(set(result["changed_paths"])) != paths:
        raise ArtifactError("result.json: changed_paths does not match the paths in patch.diff")
    reset = _read_reset(result["reset_paths"], result["reset_count"])
    return Artifact(
        repo=result["repo"],
        head_sha=result["head_sha"],
        base_tree=result["base_tree"],
        tested_tree=result["tested_tree"],
        ops=list(result["ops"]),
        verdicts=verdicts,
        changed_paths=paths,
        patch=patch,
        logs=_read_logs(directory / LOGS, limits),
        truncated_logs=list(result.get("truncated_logs", [])),
        perf=dict(result.get("perf", {})),
        base_sha=result["base_sha"],
        reset=reset,
        reset_count=result["reset_count"],
    )


def annotation_refusal(op: str, place: Annotation) -> str:
    """Why ``place`` may not be shown on ``op``'s behalf; "" when it may. A kernel's annotations name
    its own kernel.rs or a file agent-d generates for it, each line from 1, columns on one line."""
    if place.path != f"{OPS_DIR}/{op}_kernel/kernel.rs" and generated_op(place.path) != op:
        return f"an annotation of {op!r} names {place.path!r}, not its kernel.rs or a file generated for it"
    if place.end_line < place.start_line:
        return f"an annotation of {op!r} ends (line {place.end_line}) before it starts ({place.start_line})"
    columns = (place.start_column, place.end_column)
    if columns != (0, 0) and (place.start_line != place.end_line or not 1 <= columns[0] <= columns[1]):
        return f"an annotation of {op!r} has columns {columns} that the Checks API refuses"
    return ""


def _verdict(op: str, fields: dict) -> KernelVerdict:
    places = tuple(Annotation(**a) for a in fields.get("annotations", []))
    for place in places:
        why = annotation_refusal(op, place)
        if why:
            raise ArtifactError(f"result.json: verdicts/{op}: {why}")
    return KernelVerdict(**{**fields, "annotations": places})


def _read_reset(groups: dict[str, list[str]], count: int) -> ClassedPaths:
    """The reset paths, each a plain path listed once under its own class."""
    listed = [p for c in CLASSES for p in groups[c]]
    if len(listed) > MAX_RESET_PATHS or len(set(listed)) != len(listed):
        raise ArtifactError(f"result.json: reset_paths lists {len(listed)} paths, or one twice")
    if count < len(listed):
        raise ArtifactError("result.json: reset_count is less than the paths reset_paths lists")
    for klass in CLASSES:
        for path in groups[klass]:
            why = plain_path_refusal(path)
            if why or path_class(path) != klass:
                raise ArtifactError(
                    f"result.json: reset_paths/{klass}: {why or f'{path!r} is not of this class'}"
                )
    return ClassedPaths.of(listed)


def _read_logs(logs_dir: Path, limits: Limits) -> dict[str, str]:
    if not os.path.lexists(logs_dir):
        return {}
    if logs_dir.is_symlink() or not logs_dir.is_dir():
        raise ArtifactError("logs is not a directory")
    entries = sorted(os.scandir(logs_dir), key=lambda e: e.name)
    if len(entries) > limits.max_logs:
        raise ArtifactError(f"{len(entries)} log files (limit {limits.max_logs})")
    logs: dict[str, str] = {}
    for entry in entries:
        if not _LOG_NAME_RE.match(entry.name):
            raise ArtifactError(f"log file name {entry.name!r} is not allowed")
        data = _regular_file(logs_dir / entry.name, limits.max_log_bytes)
        logs[entry.name] = data.decode("utf-8", errors="replace")
    return logs
