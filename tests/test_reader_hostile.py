"""The kernel reader on hostile input: deep nesting and a seeded, budgeted fuzz run.

Every input must end in a clean answer: a JSON report (exit 0) or a JSON error object
(exit 2); never a crash, a signal or output that is not JSON.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import pytest
from test_reader import FIXTURES, reader_bin  # noqa: F401

from bot.errors import Failed
from bot.pipeline import read_signature
from bot.targets.types import Target

FUZZ_SEED = 12
FUZZ_BUDGET_S = 20.0
FUZZ_INPUTS = 150


def _kernel(body: str) -> str:
    return (
        f"#[cutile::module]\npub mod m {{\n    #[cutile::entry()]\n    pub fn k() {{ let x = {body}; }}\n}}\n"
    )


def _read(binary: Path, path: Path) -> tuple[int, dict]:
    proc = subprocess.run([str(binary), str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode in (0, 2), f"exit {proc.returncode}: {proc.stderr[-300:]}"
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("opener,closer", [("(", ")"), ("{", "}"), ("[", "]")])
def test_deep_nesting_is_a_clean_error_not_an_abort(reader_bin, tmp_path, opener, closer):  # noqa: F811
    path = tmp_path / "kernel.rs"
    path.write_text(_kernel(opener * 200_000 + "1" + closer * 200_000))
    rc, doc = _read(reader_bin, path)
    assert rc == 2 and "nested deeper than" in doc["error"]["message"] and doc["error"]["line"] == 4


def test_deep_nesting_is_a_kernel_failure_in_the_pipeline(reader_bin, tmp_path):  # noqa: F811
    # not BLOCKED env: the machine is fine, the kernel is not
    target = Target(tmp_path, "deep")
    target.kernel_dir.mkdir(parents=True)
    target.kernel_rs.write_text(_kernel("(" * 300_000 + ")" * 300_000))
    with pytest.raises(Failed) as stop:
        read_signature(target)
    assert stop.value.klass == "kernel" and "nested deeper than" in stop.value.reason


def _mutate(rng: random.Random, text: str) -> str:
    choice = rng.randrange(6)
    i = rng.randrange(len(text) + 1)
    if choice == 0:  # cut a slice out
        return text[:i] + text[i + rng.randrange(1, 200) :]
    if choice == 1:  # a run of one bracket
        return text[:i] + rng.choice("([{<)]}>") * rng.randrange(1, 5000) + text[i:]
    if choice == 2:  # balanced deep nesting
        n = rng.choice((10, 1000, 3000, 100_000))
        o, c = rng.choice((("(", ")"), ("{", "}"), ("[", "]")))
        return text[:i] + o * n + c * n + text[i:]
    if choice == 3:  # random bytes as text
        return (
            text[:i] + "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 50))) + text[i:]
        )
    if choice == 4:  # unterminated comment or string
        return text[:i] + rng.choice(("/*", '"', 'r#"', "'", "//")) + text[i:]
    j = rng.randrange(len(text) + 1)  # duplicate a slice
    return text[:i] + text[min(i, j) : max(i, j)] + text[i:]


def test_fuzz_every_input_gets_a_clean_json_answer(reader_bin, tmp_path):  # noqa: F811
    rng = random.Random(FUZZ_SEED)
    seeds = [p.read_text(errors="replace") for p in sorted(FIXTURES.glob("*.rs"))]
    deadline = time.monotonic() + FUZZ_BUDGET_S
    path = tmp_path / "kernel.rs"
    ran = 0
    for n in range(FUZZ_INPUTS):
        if time.monotonic() > deadline:
            break
        text = rng.choice(seeds)
        for _ in range(rng.randrange(1, 4)):
            text = _mutate(rng, text)
        path.write_text(text, errors="surrogatepass")
        rc, doc = _read(reader_bin, path)
        assert doc["schema_version"] == 1, n
        if rc == 2:
            assert doc["error"]["message"] and "internal error" not in doc["error"]["message"], (
                n,
                doc["error"],
            )
        ran += 1
    assert ran >= 20, f"only {ran} inputs within the budget"
