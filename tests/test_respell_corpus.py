"""The reference re-spelling corpus (tests/respell_corpus.py) checked on its own: each re-spelling
of a cuTile reference parses, differs from the original, keeps its kernels, and behaves as the
original.

The references: those of the ops in tests/fixtures/tilegym_ops and of the wheel's five cutile-rs
ops, from the tilegym 1.5.1 wheel; the three held-out references are never opened.

Behaviour, two ways:

- without torch, a small module of our own (``SNIPPET``) that every kind re-spells, run with a
  stand-in ``cuda.tile`` on several inputs: results, exceptions and launches compared;
- with torch and cuda.tile (the dry-run venv, ``@pytest.mark.slow``), every reference and every
  re-spelling executed as its real module on a CPU, each ``ct.launch`` recorded (bot/dryrun's
  shim and recorder) while its registered function runs on generic inputs (respell_corpus's
  ``GENERIC_SHAPES``: no knowledge of any op). Launches (grid, kernel, each argument's shape,
  strides, dtype and data digest, or value) and the returned value are compared for the ops whose
  registered function launches on such inputs: attention (fmha and fmha_backward), bmm, geglu,
  gelu, gemma_attention, layer_norm_legacy, matmul, mhc_sinkhorn, mla_decoding,
  mla_decoding_split_kv, moe_align_block, relu, rms_norm, rope (apply_rope_base and the function
  get_apply_rope_func returns), silu_and_mul, softmax, splitk_reduce and swiglu (the function
  get_swiglu returns). For the other nine (attention_sink, dropout, flash_decode,
  gemma_attention_decode, group_gemm, mhc_apply_residual, mla, moe, swa_attention) generic inputs
  fail before any launch: only the module's execution and the failures are compared. Each op runs
  one input path (the first generic input that launches, autotuning off), so branches that input
  does not take are not compared.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from checkout_support import torch_python
from respell_corpus import (
    ALL,
    HELD_OUT,
    KINDS,
    REFERENCES,
    Module,
    corpus_ops,
    find_reference,
    kernel_dumps,
    reference_files,
    registered_functions,
    respellings,
    table,
)

TESTS = Path(__file__).resolve().parent
AGENT_D_ROOT = TESTS.parent
ALIAS_KINDS = {"alias_import", ALL}  # the only ones that may touch a kernel: its cuda.tile alias
# The references hold if/else pairs of one assignment (or one return) each in six modules only.
FEWEST_REFERENCES = {"conditional_expr": 6}
BEHAVIOUR_OPS = {
    "attention",
    "bmm",
    "geglu",
    "gelu",
    "gemma_attention",
    "layer_norm_legacy",
    "matmul",
    "mhc_sinkhorn",
    "mla_decoding",
    "mla_decoding_split_kv",
    "moe_align_block",
    "relu",
    "rms_norm",
    "rope",
    "silu_and_mul",
    "softmax",
    "splitk_reduce",
    "swiglu",
}


@dataclass
class Corpus:
    wheel: Path
    references: dict[str, Path]
    sources: dict[str, str]
    respelled: dict[str, dict[str, str]]  # op -> kind -> new source
    rows: list[tuple[str, str]]
    held_out_opened: list[str]


@pytest.fixture(scope="session")
def corpus(tilegym_wheel: Path) -> Corpus:
    """Every corpus op's reference and its re-spellings, built with any opening of a held-out
    reference refused and written down."""
    opened: list[str] = []
    real_open, real_builtin_open = Path.open, open

    def held_out(path) -> bool:
        name = Path(str(path)).name
        if any(h in name for h in HELD_OUT):
            opened.append(name)
            return True
        return False

    def path_open(self, *args, **kwargs):
        if held_out(self):
            raise AssertionError(f"a held-out reference was opened: {self}")
        return real_open(self, *args, **kwargs)

    def builtin_open(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and held_out(file):
            raise AssertionError(f"a held-out reference was opened: {file}")
        return real_builtin_open(file, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "open", path_open)
        patch.setattr("builtins.open", builtin_open)
        references = {op: find_reference(tilegym_wheel, op) for op in corpus_ops()}
        missing = [op for op, path in references.items() if path is None]
        assert not missing, missing
        sources = {op: path.read_text(encoding="utf-8") for op, path in references.items()}
        respelled = {op: respellings(source) for op, source in sources.items()}
        rows = table(tilegym_wheel)
    return Corpus(tilegym_wheel, references, sources, respelled, rows, opened)


# --------------------------------------------------------------------------- the references


def test_the_corpus_takes_each_op_reference_and_never_a_held_out_one(corpus):
    assert len(corpus.references) == len(corpus_ops()) >= 27
    assert {"silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"} <= set(corpus.references)
    assert corpus.references["mhc_sinkhorn"].name == "mhc.py"  # found through register_impl
    assert corpus.held_out_opened == []
    for held in HELD_OUT:
        assert find_reference(corpus.wheel, held) is None
    files = reference_files(corpus.wheel)
    assert files and not any(h in p.name for p in files for h in HELD_OUT)


def test_each_kind_applies_to_at_least_eight_references(corpus):
    applied = Counter(kind for _op, kind in corpus.rows)
    assert set(corpus.rows) == {(op, kind) for op, found in corpus.respelled.items() for kind in found}
    short = {kind: applied[kind] for kind in (*KINDS, ALL) if applied[kind] < FEWEST_REFERENCES.get(kind, 8)}
    assert not short, short
    assert applied[ALL] == len(corpus.references)


def test_each_respelling_parses_differs_and_keeps_its_kernels(corpus):
    for op, found in corpus.respelled.items():
        original = corpus.sources[op]
        before = ast.dump(ast.parse(original))
        kept = Module.parse(original).kept_text.values()
        assert kernel_dumps(original), op
        for kind, new in found.items():
            assert ast.dump(ast.parse(new)) != before, (op, kind)
            if kind in ALIAS_KINDS:
                assert kernel_dumps(new, alias_as="CT") == kernel_dumps(original, alias_as="CT"), (op, kind)
            else:
                assert kernel_dumps(new) == kernel_dumps(original), (op, kind)
                # a top-level kernel (and a function it calls) keeps its text, comments included
                assert all(text in new for text in kept), (op, kind)


def test_the_respellings_do_not_depend_on_the_hash_seed(corpus):
    ops = ["attention", "silu_and_mul", "moe_align_block"]
    here = {op: _digest(corpus.respelled[op]) for op in ops}
    script = (
        "import json, sys, hashlib; sys.path.insert(0, sys.argv[1]); import respell_corpus as r\n"
        "for path in sys.argv[2:]:\n"
        "    found = r.respellings(open(path, encoding='utf-8').read())\n"
        "    print(hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest())\n"
    )
    paths = [str(corpus.references[op]) for op in ops]
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, "-c", script, str(TESTS), *paths],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert proc.stdout.split() == [here[op] for op in ops], seed


def _digest(found: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- a module of our own

SNIPPET = """
import cuda.tile as ct


def _twice(v):
    doubled = v * 2  # kernel code: never re-spelled
    return doubled


@ct.kernel
def _copy_kernel(src, dst, n: int):
    total = _twice(n)
    ct.store(dst, total)


class _Copy:
    @staticmethod
    def forward(stream, x, block):
        rows = len(x)
        cols = len(x[0])
        count = rows * cols
        if block > 0:
            size = block
        else:
            size = 64
        grid = ((count + size - 1) // size, 1, 1)
        if count == 1:
            return None
        flat = [v for row in x for v in row]
        wide = "wide" if cols > 2 else "narrow"
        ct.launch(stream, grid, _copy_kernel, (flat, count, size, count * 2, max(rows, cols), wide))
        return count


def run(x, block=0):
    return _Copy.forward("stream", x, block)
"""
SNIPPET_INPUTS = [([[1, 2], [3, 4]], 0), ([[1, 2, 3]], 2), ([[5]], 0), ([], 0), ([[1], [2], [3]], -1)]


def _stand_in_cuda_tile(monkeypatch) -> list:
    """``cuda.tile`` as a module whose ``launch`` writes down what it is given."""
    launches: list = []
    tile = types.ModuleType("cuda.tile")
    tile.kernel = lambda fn: fn
    tile.store = lambda *a: None
    tile.launch = lambda stream, grid, kernel, args: launches.append(
        (stream, tuple(grid), kernel.__name__, args)
    )
    cuda = types.ModuleType("cuda")
    cuda.tile = tile
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.tile", tile)
    return launches


def _behaviour(source: str, launches: list) -> list:
    seen = []
    namespace: dict = {}
    exec(compile(source, "<snippet>", "exec"), namespace)
    for x, block in SNIPPET_INPUTS:
        launches.clear()
        try:
            outcome = ("returned", namespace["run"](x, block))
        except Exception as exc:
            outcome = ("raised", type(exc).__name__, str(exc))
        seen.append((outcome, list(launches)))
    return seen


def test_every_kind_respells_the_snippet_and_keeps_its_behaviour(monkeypatch):
    launches = _stand_in_cuda_tile(monkeypatch)
    found = respellings(SNIPPET)
    assert set(found) == {*KINDS, ALL}
    expected = _behaviour(SNIPPET, launches)
    assert any(launched for _outcome, launched in expected)
    kept = "def _twice(v):\n    doubled = v * 2  # kernel code: never re-spelled\n    return doubled"
    for kind, new in found.items():
        assert _behaviour(new, launches) == expected, (kind, new)
        if kind not in ALIAS_KINDS:
            assert kept in new, kind
    assert "import cuda.tile as tile_lang" in found["alias_import"]
    assert "math.prod((rows, cols))" in found["prod_spelling"]


# each: a kind and a module where its one candidate site is not plainly safe, so it is skipped
SKIPPED_SITES = {
    # log(x) may change what len(x) reads: `n` stays where it is
    "inlined_locals": "def f(x, log):\n    n = len(x)\n    log(x)\n    return n\n",
    # the second value reads the first name
    "tuple_assign": "def f(x):\n    a = len(x)\n    b = a + 1\n    return b\n",
    # a closure could see `a` bound late
    "tuple_assign ": "def f(x, g):\n    a = len(x)\n    b = g(lambda: a)\n    return a, b\n",
    # the types of the parameters are not known: `a * b` may not be a product of ints
    "prod_spelling": "def f(a, b):\n    return a * b\n",
    # hoisting `n * 2` or building the tuple first would run it before next_stream()
    "hoisted": "import cuda.tile as ct\n\ndef f(k, n, next_stream):\n"
    "    ct.launch(next_stream(), (1,), k, (n * 2,))\n",
    "args_tuple": "import cuda.tile as ct\n\ndef f(k, n, next_stream):\n"
    "    ct.launch(next_stream(), (1,), k, (n * 2,))\n",
    # `ct` is bound twice: the class's `ct.launch` might not be the launch's
    "method_launch": "import cuda.tile as ct\n\ndef f(k, ct=ct):\n    ct.launch(0, (1,), k, ())\n",
}


@pytest.mark.parametrize("kind", sorted(SKIPPED_SITES))
def test_a_site_not_plainly_safe_is_skipped(kind):
    from respell_corpus import REWRITES

    assert REWRITES[kind.strip()](SKIPPED_SITES[kind]) is None


def test_a_grid_after_an_impure_stream_is_built_in_place():
    from respell_corpus import grid_list

    source = (
        "import cuda.tile as ct\n\ndef f(k, n, next_stream):\n    ct.launch(next_stream(), (n, 1), k, ())\n"
    )
    assert "ct.launch(next_stream(), tuple([n, 1]), k, ())" in grid_list(source)


# --------------------------------------------------------------------------- launches on a CPU


@pytest.mark.slow
def test_each_respelling_launches_as_its_reference(corpus, tmp_path):
    python = torch_python()
    jobs = []
    for op, found in sorted(corpus.respelled.items()):
        path = corpus.references[op]
        parts = path.relative_to(corpus.wheel / REFERENCES).with_suffix("").parts
        sources = {"original": str(path)}
        for kind, new in found.items():
            sources[kind] = str(_written(tmp_path / op / f"{kind}.py", new))
        if op == "relu":  # the check itself: a launch changed on purpose must show
            sources["mutated"] = str(
                _written(tmp_path / op / "mutated.py", _grid_changed(corpus.sources[op]))
            )
        entries = registered_functions(corpus.sources[op], op)
        jobs.append(
            {
                "op": op,
                "module": ".".join(("tilegym.ops.cutile", *parts)),
                "entries": entries,
                "sources": sources,
            }
        )
    jobs_file, out_file = tmp_path / "jobs.json", tmp_path / "launches.json"
    jobs_file.write_text(json.dumps(jobs), encoding="utf-8")
    record = (
        "import sys; sys.path.insert(0, sys.argv[1]); import respell_corpus as c; c.record(*sys.argv[2:])"
    )
    argv = [
        python,
        "-c",
        record,
        str(TESTS),
        str(jobs_file),
        str(out_file),
        str(AGENT_D_ROOT),
        str(corpus.wheel),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out_file.read_text(encoding="utf-8"))
    assert results.pop("held_out_imported") == []

    launched, compared = set(), 0
    for op, by_label in results.items():
        original = by_label.pop("original")
        assert "exec_error" not in original, (op, original)
        mutated = by_label.pop("mutated", None)
        if mutated is not None:
            assert mutated != original, "a changed grid went unnoticed"
        calls = [attempts[-1] for attempts in original["calls"].values() if attempts]
        if any(a["launches"] and not a["error"] for a in calls):
            launched.add(op)
        different = [label for label, found in by_label.items() if found != original]
        assert not different, (op, different, [by_label[d] for d in different][:1], original)
        compared += len(by_label) * sum(len(a["launches"]) for a in calls)
    assert launched == BEHAVIOUR_OPS
    assert compared >= 250  # launches compared, over every re-spelling of those ops


def _written(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _grid_changed(source: str) -> str:
    """The reference with its first launch's grid replaced by ``(7, 1, 1)``."""
    tree = ast.parse(source)
    call = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "ct.launch" and len(n.args) == 4
    )
    call.args[1] = ast.parse("(7, 1, 1)", mode="eval").body
    return ast.unparse(tree)
