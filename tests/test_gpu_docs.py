"""docs/gpu.md is what ``gpu_proof.py table`` renders from the results files it names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpu.tables import gpu_md as table
from gpu_proof_support import RESULTS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "gpu.md"


def test_committed_tables_rerender_byte_for_byte_from_their_results(tmp_path, monkeypatch):
    text = DOC.read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if x.startswith(table.RENDERED_FROM)]
    sources = [s.strip("`") for s in line[len(table.RENDERED_FROM) :].split()]
    assert len(sources) >= 1 and all((ROOT / s).is_file() for s in sources), sources
    monkeypatch.chdir(ROOT)  # the header names the files relative to the repository root
    out = tmp_path / "gpu.md"
    shutil.copy(DOC, out)  # keeps the hand-written notes, as a re-render in place does
    assert table.table([Path(s) for s in sources], out) == text


def test_header_names_results_relative_to_here_and_never_a_machine_path(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r.json").write_text(json.dumps(RESULTS))
    monkeypatch.chdir(tmp_path)
    text = table.table([tmp_path / "runs" / "r.json"], tmp_path / "gpu.md")
    assert f"{table.RENDERED_FROM}`runs/r.json`" in text
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    text = table.table([tmp_path / "runs" / "r.json"], tmp_path / "gpu.md")
    assert f"{table.RENDERED_FROM}`r.json`" in text and str(tmp_path) not in text
