"""The cases of one perf run and their benchmark records, read from pytest's JUnit XML and log.

TileGym's ``test_perf`` hands its timing to pytest with ``record_property("benchmark", result)``,
``result`` being ``common.benchmark_framework(backend, fn)``: ``{backend: {"forward": {"mean",
"std", "rel_std", "median", "min", "max", "nrep", "peak_mem_mb", "kernel_name", "kernel_times"}}}``
(milliseconds; CUPTI device time with ``CUPTI=1``, TileGym's default). The ``--print-record``
option that TileGym's conftest defines prints nothing itself (no code of the checkout reads it);
pytest writes each case's properties into its JUnit XML as ``<property name="benchmark"
value="{...}"/>``, ``str()`` of the dict. That XML is the record read here: hostile text from a
run of PR code, so the value is read as a literal (nothing evaluated) and a record that does not
read as one still gives its median when a ``'median': <number>`` is in it.
"""

from __future__ import annotations

import ast
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from bot.perf.result import CUTILE, CUTILE_RS, NO_DTYPE, PYTORCH, Case, Kernel
from bot.testresults import junit
from bot.testresults.cases import split_nodeid
from bot.testresults.combine import to_test_result

RECORD = "benchmark"  # the property name test_perf records its timing under
# backend spellings in test ids and record keys: TileGym's id hook writes cutile-rs as cutile_rs
_ID_BACKENDS = (
    (CUTILE_RS, ("cutile_rs", "cutile-rs")),
    (CUTILE, ("cutile",)),
    (PYTORCH, ("pytorch", "torch")),
)
_TORCH_DTYPE = re.compile(r"\btorch\.([a-z][a-z0-9_]*)")
_SHORT_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "fp8": "float8"}
# a record that is no literal (a tensor's repr in it): its median by text, ``tensor(0.25)`` included
_MEDIAN = re.compile(r"['\"]median['\"]\s*:\s*(?:tensor\()?(-?[0-9.]+(?:[eE][-+]?\d+)?|nan|inf)")
_FLOATS = {"nan": math.nan, "inf": math.inf}


def read(log_text: str, xml_text: str | None, test_paths: Sequence[str]) -> list[Case]:
    """Every case of the run, in the order pytest reported them, with its record where it has one."""
    result = to_test_result(
        log_text, command="", exit_code=None, log_path="", junit_xml=xml_text, test_paths=test_paths
    )
    records = properties(xml_text, test_paths) if xml_text else {}
    return [case_of(c.nodeid, c.outcome, c.message, records.get(c.nodeid, "")) for c in result.cases]


def properties(xml_text: str, test_paths: Sequence[str] = ()) -> dict[str, str]:
    """``{nodeid: the benchmark property's text}`` of a pytest JUnit XML document ({} when it is none)."""
    if len(xml_text) > junit.MAX_BYTES:
        return {}
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return {}
    out: dict[str, str] = {}
    for element in root.iter("testcase"):
        nodeid = junit.nodeid_of(element.get("classname", ""), element.get("name", ""), test_paths)
        for prop in element.iter("property"):
            if prop.get("name") == RECORD:
                out[nodeid] = prop.get("value", "")
    return out


def case_of(nodeid: str, outcome: str, message: str, record: str) -> Case:
    """One case: backend and config from its id (the record's key wins for the backend), the median
    of the record's forward pass; a passed case with no usable median says why in ``message``."""
    _, _, params = split_nodeid(nodeid)
    backend, config = split_backend(params)
    data = literal(record) if record else None
    keyed = _record_backend(data)
    case = Case(nodeid, keyed or backend, config, dtype_of(params), outcome, message=message, record=record)
    if outcome != "passed":
        return case
    if not record:
        case.message = "passed without a benchmark record (record_property was not reached)"
        return case
    stats = _forward(data, case.backend)
    median = _number(stats.get("median")) if stats else _median_by_text(record)
    if median is None or not math.isfinite(median) or median <= 0:
        case.message = f"the benchmark record has no usable median ({'none' if median is None else median})"
        return case
    case.median_ms = median
    case.kernels = _kernels(stats.get("kernel_times") if stats else None)
    return case


def split_backend(params: str) -> tuple[str, str]:
    """``(backend, config)`` of a test id's parameters: the backend is the "-"-separated field that
    spells one (``64-torch.float16-cutile_rs`` -> ``("cutile-rs", "64-torch.float16")``); "" when none."""
    for backend, spellings in _ID_BACKENDS:
        for word in spellings:
            m = re.search(rf"(?:^|-){re.escape(word)}(?=-|$)", params)
            if m and not params[m.end() :].startswith(("-rs", "_rs")):
                head, tail = params[: m.start()], params[m.end() :]
                # the match took the "-" before the word; at the start, drop the one after it (a
                # value of its own may begin with "-": ``cutile_rs--1`` is the config ``-1``)
                return backend, head + tail if head else tail[1:]
    return "", params


def dtype_of(params: str) -> str:
    """The dtype a test id names: ``torch.float16`` anywhere, else a field ``fp16``/``bfloat16``."""
    m = _TORCH_DTYPE.search(params)
    if m:
        return m.group(1)
    for field in params.split("-"):
        word = field.strip().lower()
        if word in _SHORT_DTYPES:
            return _SHORT_DTYPES[word]
        if re.fullmatch(r"b?float(8\w*|16|32|64)", word):
            return word
    return NO_DTYPE


def literal(text: str) -> object:
    """The value of a Python literal written by ``str()`` (``nan``/``inf`` included); None if it is not one."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return None
    try:
        return _value(tree.body)
    except (ValueError, RecursionError):
        return None


def _value(node: ast.AST) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in _FLOATS:
        return _FLOATS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(x) for x in node.elts]
    raise ValueError(f"not a literal: {ast.dump(node)[:80]}")


def _record_backend(data: object) -> str:
    """The backend a record is keyed by (``{"cutile-rs": {...}}``); "" when it names no known one."""
    if not isinstance(data, dict) or len(data) != 1:
        return ""
    key = str(next(iter(data))).lower()
    backend, _ = split_backend(key)
    return backend


def _forward(data: object, backend: str) -> dict | None:
    """The forward pass's statistics of a record (a record of one pass only: those)."""
    if not isinstance(data, dict) or not data:
        return None
    inner = next(iter(data.values())) if len(data) == 1 else data.get(backend)
    if not isinstance(inner, dict):
        return None
    if isinstance(inner.get("forward"), dict):
        return inner["forward"]
    return inner if "median" in inner else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _median_by_text(record: str) -> float | None:
    """The first ``'median': <number>`` of a record that is no literal (a tensor's repr in it, say)."""
    m = _MEDIAN.search(record)
    if m is None:
        return None
    return _FLOATS[m.group(1)] if m.group(1) in _FLOATS else float(m.group(1))


def _kernels(entries: object) -> list[Kernel]:
    if not isinstance(entries, list):
        return []
    out = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            us, count = _number(entry.get("self_time_us")), _number(entry.get("count"))
            out.append(Kernel(entry["name"], us or 0.0, int(count or 0)))
    return out
