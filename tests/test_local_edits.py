"""A person's uncommitted edit of a file agent-d writes whole is never overwritten without a word
(bot/apply/local_edits.py; issue 34, item 1): the port refuses and names the file, the way git
refuses a checkout over local changes, and ``--force`` goes on. agent-d's own earlier output, a
committed file and a wiring edit are not a person's edit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot import pipeline
from bot.apply import apply
from bot.demo import assemble_checkout
from bot.emit.types import GeneratedFile, GeneratedFiles
from bot.errors import Blocked
from bot.pipeline import PortOptions

OP = "silu_and_mul"
WRAPPER = f"src/tilegym/ops/cutile_rs/{OP}.py"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture()
def repo(tmp_path) -> Path:
    repo = tmp_path / "co"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "kept.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return repo


def _files(text: str, path: str = "gen/op.py", kind: str = "new") -> GeneratedFiles:
    return GeneratedFiles([GeneratedFile(path, text, kind)])


def test_agent_d_rewrites_its_own_output_and_refuses_a_persons_edit(repo):
    apply.apply(_files("first = 1\n"), repo)
    apply.apply(_files("second = 2\n"), repo)  # its own earlier output: rewritten
    target = repo / "gen" / "op.py"
    assert target.read_text() == "second = 2\n"
    target.write_text("second = 2\nmine = 3  # a person's line\n")
    with pytest.raises(Blocked) as info:
        apply.apply(_files("third = 3\n"), repo)
    assert info.value.klass == "host"
    assert info.value.reason == (
        "your uncommitted changes to gen/op.py would be overwritten by the generated files; nothing was written"
    )
    assert "--force" in info.value.host_fix
    assert target.read_text() == "second = 2\nmine = 3  # a person's line\n"  # nothing lost
    apply.apply(_files("third = 3\n"), repo, force=True)
    assert target.read_text() == "third = 3\n"


def test_a_committed_file_and_a_wiring_edit_are_not_a_persons_uncommitted_edit(repo):
    (repo / "kept.py").write_text("x = 2  # uncommitted\n")
    # a wiring edit is computed from the file as it is: the person's line survives it
    apply.apply(_files("x = 2  # uncommitted\nimport wired\n", "kept.py", kind="edit"), repo)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "theirs")
    apply.apply(_files("generated = 1\n", "kept.py"), repo)  # HEAD has it: git gives it back
    assert (repo / "kept.py").read_text() == "generated = 1\n"


def test_a_port_over_an_edited_wrapper_stops_before_anything_is_written(tmp_path, tilegym_wheel):
    demo = assemble_checkout(tmp_path / "tg", tilegym_wheel, [OP], [OP]).repo
    options = PortOptions(repo=demo, kernel=OP, out_root=tmp_path / "out", echo=lambda _: None)
    wrapper = demo / WRAPPER
    assert not wrapper.exists()  # the demo's head adds kernel.rs alone
    wrapper.write_text("# my own wrapper, not committed yet\n")
    (result,) = pipeline.port(options)
    verdict = result.verdict
    assert (verdict.kind.value, verdict.klass) == ("BLOCKED", "host"), verdict
    assert f"your uncommitted changes to {WRAPPER} would be overwritten" in verdict.reason
    assert [s.name for s in result.stages][-1] == "apply" and result.changed_files == []
    assert wrapper.read_text() == "# my own wrapper, not committed yet\n"
    assert (tmp_path / "out" / OP / "reports" / "correctness.md").is_file()  # the reports say why
