"""The port job's artifact: what it holds, and everything finalize refuses to accept."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from test_github_support import OPS, base_of, fake_port, git, make_local_repo

from bot.github import gitops
from bot.github.artifact import ArtifactError, KernelVerdict, Limits, read_artifact, write_artifact
from bot.github.port_job import PortJobError, run_port_job

CANARY = "ghs_CanaryTokenValue0123456789abcdefXYZ"
OPS_FFI = OPS + "/{op}_kernel/ffi.rs"


@pytest.fixture
def ported(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    head = make_local_repo(repo)
    (repo / "junk.txt").write_text("outside the allowed paths\n")
    monkeypatch.setenv("GITHUB_TOKEN", CANARY)
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", CANARY + "2")
    art = run_port_job(
        repo, head, ["silu_and_mul"], tmp_path / "art", fake_port, repo_name="o/r", base_sha=base_of(repo)
    )
    assert os.environ["GITHUB_TOKEN"] == CANARY  # restored after the job
    return repo, head, art


def test_port_job_writes_a_verifiable_artifact(ported):
    repo, head, art = ported
    a = read_artifact(art)
    assert a.head_sha == head and a.ops == ["silu_and_mul"]
    assert a.verdicts["silu_and_mul"].kind == "ALL_PASS"
    assert a.changed_paths == [
        "src/tilegym/ops/cutile_rs/cutile_kernels/src/lib.rs",
        "src/tilegym/ops/cutile_rs/silu_and_mul_kernel/ffi.rs",
    ]
    # the tested tree is exactly head + patch
    assert gitops.apply_patch_to_tree(repo / ".git", head, a.patch) == a.tested_tree
    assert gitops.tree_of(repo / ".git", head) == a.base_tree
    assert "junk.txt" in a.logs["left-out-paths.txt"]
    # the checkout's own index is untouched
    assert git(repo, "diff", "--cached", "--name-only") == ""
    for path in art.rglob("*"):
        if path.is_file():
            assert CANARY not in path.read_text()


def test_port_job_refuses_wrong_checkout(tmp_path):
    repo = tmp_path / "repo"
    make_local_repo(repo)
    with pytest.raises(PortJobError, match="not the approved commit"):
        run_port_job(repo, "0" * 40, ["silu_and_mul"], tmp_path / "a", fake_port, base_sha=base_of(repo))


def test_port_crash_becomes_blocked_host(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    head = make_local_repo(repo)
    monkeypatch.setenv("GITHUB_TOKEN", CANARY)

    def boom(repo: Path, op: str):
        raise RuntimeError(f"exploded while holding {CANARY}")

    a = read_artifact(
        run_port_job(
            repo, head, ["silu_and_mul"], tmp_path / "a", boom, repo_name="o/r", base_sha=base_of(repo)
        )
    )
    v = a.verdicts["silu_and_mul"]
    assert (v.kind, v.klass) == ("BLOCKED", "host") and CANARY not in v.reason and a.empty


def test_a_port_stopped_by_a_full_disk_says_so(tmp_path):
    repo = tmp_path / "repo"
    head = make_local_repo(repo)

    def full(repo: Path, op: str):
        raise OSError(errno.ENOSPC, "No space left on device", "/runner/_work/out/ffi.rs")

    a = read_artifact(
        run_port_job(
            repo, head, ["silu_and_mul"], tmp_path / "a", full, repo_name="o/r", base_sha=base_of(repo)
        )
    )
    v = a.verdicts["silu_and_mul"]
    assert (v.kind, v.klass) == ("BLOCKED", "env")
    assert v.reason == "the port stopped: no space left on the device while writing /runner/_work/out/ffi.rs"


# --------------------------------------------------------------------------- hostile artifacts


def _write(tmp_path: Path, patch: str, paths: list[str]) -> Path:
    return write_artifact(
        tmp_path / "evil",
        repo="o/r",
        head_sha="a" * 40,
        base_sha="d" * 40,
        base_tree="b" * 40,
        tested_tree="c" * 40,
        verdicts={"x": KernelVerdict("ALL_PASS", "", "ok", "")},
        patch=patch,
        changed_paths=paths,
    )


def _diff(path: str, extra_header: str = "", body: str = "@@ -0,0 +1 @@\n+hi\n") -> str:
    return f"diff --git a/{path} b/{path}\n{extra_header}--- /dev/null\n+++ b/{path}\n{body}"


@pytest.mark.parametrize(
    ("path", "header", "message"),
    [
        (".github/workflows/x.yml", "new file mode 100644\n", "outside|.github"),
        ("src/tilegym/ops/cutile_rs/.github/x", "new file mode 100644\n", ".github"),
        ("setup.py", "new file mode 100644\n", "outside"),
        ("src/tilegym/ops/cutile_rs/link", "new file mode 120000\n", "mode"),
        ("src/tilegym/ops/cutile_rs/silu_kernel/kernel.rs", "", "never edits"),
        ("src/tilegym/ops/cutile_rs/../../../etc/passwd", "new file mode 100644\n", "plain relative"),
    ],
)
def test_bad_paths_are_rejected(tmp_path, path, header, message):
    art = _write(tmp_path, _diff(path, header), [path])
    with pytest.raises(ArtifactError, match=message):
        read_artifact(art)


def test_binary_hunks_and_extra_files_and_symlinks_are_rejected(tmp_path):
    path = "src/tilegym/ops/cutile_rs/x.so"
    binary = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nBinary files /dev/null and b/{path} differ\n"
    )
    with pytest.raises(ArtifactError, match="binary"):
        read_artifact(_write(tmp_path, binary, [path]))
    shutil.rmtree(tmp_path / "evil")
    ok = _diff("src/tilegym/ops/cutile_rs/x_kernel/ffi.rs", "new file mode 100644\n")
    art = _write(tmp_path, ok, ["src/tilegym/ops/cutile_rs/x_kernel/ffi.rs"])
    assert read_artifact(art).changed_paths == ["src/tilegym/ops/cutile_rs/x_kernel/ffi.rs"]
    (art / "extra.bin").write_text("x")
    with pytest.raises(ArtifactError, match="unexpected entry"):
        read_artifact(art)
    (art / "extra.bin").unlink()
    (art / "logs" / "evil.txt").symlink_to("/etc/passwd")
    with pytest.raises(ArtifactError, match="not a regular file"):
        read_artifact(art)
    (art / "logs" / "evil.txt").unlink()
    (art / "patch.diff").unlink()
    (art / "patch.diff").symlink_to("/etc/hostname")
    with pytest.raises(ArtifactError, match="not a regular file"):
        read_artifact(art)


def test_size_limits_and_consistency(tmp_path):
    path = "src/tilegym/ops/cutile_rs/x_kernel/ffi.rs"
    art = _write(tmp_path, _diff(path, "new file mode 100644\n"), [path])
    with pytest.raises(ArtifactError, match="limit"):
        read_artifact(art, Limits(max_patch_bytes=10))
    result = json.loads((art / "result.json").read_text())
    result["changed_paths"] = []
    (art / "result.json").write_text(json.dumps(result))
    with pytest.raises(ArtifactError, match="changed_paths"):
        read_artifact(art)
    result["schema_version"] = 1  # the layout before the base tree and the reset paths
    (art / "result.json").write_text(json.dumps(result))
    with pytest.raises(ArtifactError, match="schema_version"):
        read_artifact(art)


def test_logs_are_truncated_to_the_tail(tmp_path):
    art = write_artifact(
        tmp_path / "a",
        repo="o/r",
        head_sha="a" * 40,
        base_sha="d" * 40,
        base_tree="b" * 40,
        tested_tree="b" * 40,
        verdicts={"x": KernelVerdict("FAIL", "host", "r", "")},
        patch="",
        changed_paths=[],
        logs={"x": "line\n" * 100000 + "THE END\n"},
        limits=Limits(max_log_bytes=4096),
    )
    a = read_artifact(art, Limits(max_log_bytes=4096))
    assert a.logs["x.txt"].startswith("[... truncated") and a.logs["x.txt"].endswith("THE END\n")
    assert a.truncated_logs == ["x.txt"]


LEAKY = {
    "GH_PAT": "ghp_LeakyPat0123456789abcdefghijklmnop",
    "GITHUB_PAT": "github_pat_Leaky0123456789abcdefghijkl",
    "GIT_CONFIG_VALUE_0": "AUTHORIZATION: basic c2VjcmV0LWluLWdpdC1jb25maWc=",
    "HF_HUB_AUTH": "hf_LeakyHubAuth0123456789",
    "NPM_AUTH": "npm_LeakyAuth0123456789",
    "SSH_AUTH_SOCK": "/tmp/ssh-leaky/agent.1",
    "KUBECONFIG": "/home/runner/.kube/leaky-config",
}


def test_pr_code_sees_only_the_allow_listed_environment(tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "repo"
    head = make_local_repo(repo)
    for name, value in LEAKY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("CARGO_HOME", "/opt/cargo")
    seen: dict[str, str] = {}

    def port_that_looks(repo: Path, op: str):
        # what a build script or a test would see: the environment of a child process
        out = subprocess.run(["env", "-0"], capture_output=True, text=True, check=True).stdout
        seen.update(line.split("=", 1) for line in out.split("\0") if "=" in line)
        (repo / OPS_FFI.format(op=op)).write_text("// " + " ".join(seen.values()) + "\n")
        return "ALL_PASS", "", " ".join(f"{k}={v}" for k, v in seen.items()), ""

    art = run_port_job(
        repo, head, ["silu_and_mul"], tmp_path / "a", port_that_looks, repo_name="o/r", base_sha=base_of(repo)
    )
    assert not set(LEAKY) & set(seen), sorted(set(LEAKY) & set(seen))
    assert seen["PATH"] == os.environ["PATH"] and seen["HOME"] == os.environ["HOME"]
    assert seen["CUDA_VISIBLE_DEVICES"] == "0" and seen["CARGO_HOME"] == "/opt/cargo"
    for path in art.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not [v for v in LEAKY.values() if v in text], path
    assert all(os.environ[k] == v for k, v in LEAKY.items())  # restored for the trusted caller


@pytest.mark.parametrize(
    ("kind", "klass", "accepted"),
    [
        ("FAIL", "kernel", True),
        ("BLOCKED", "env", True),
        ("ALL_PASS", "", True),
        ("FAIL", "env", False),
        ("ALL_PASS", "host", False),
        ("BLOCKED", "<img src=x onerror=alert(1)>", False),
        ("FAIL", "@everyone", False),
    ],
)
def test_a_verdict_class_is_one_of_agent_d_s_words_for_its_kind(tmp_path, kind, klass, accepted):
    # the class is shown unescaped in the review heading and the status comment: free text from the
    # untrusted job would reach the pull request as markup or a mention
    path = "src/tilegym/ops/cutile_rs/x_kernel/ffi.rs"
    art = _write(tmp_path, _diff(path, "new file mode 100644\n"), [path])
    result = json.loads((art / "result.json").read_text())
    result["verdicts"]["x"].update(kind=kind, klass=klass)
    (art / "result.json").write_text(json.dumps(result))
    if accepted:
        assert read_artifact(art).verdicts["x"].klass == klass
    else:
        with pytest.raises(ArtifactError, match="klass"):
            read_artifact(art)


# --------------------------------------------------------------------------- annotations

KERNEL_X = "src/tilegym/ops/cutile_rs/x_kernel/kernel.rs"


def _place(path: str = KERNEL_X, **more) -> dict:
    return {"path": path, "start_line": 3, "end_line": 3, "level": "failure", "title": "cargo error",
            "message": "mismatched types", "start_column": 5, "end_column": 9, **more}  # fmt: skip


def _with_places(tmp_path: Path, places: list[dict]) -> Path:
    path = "src/tilegym/ops/cutile_rs/x_kernel/ffi.rs"
    art = _write(tmp_path, _diff(path, "new file mode 100644\n"), [path])
    result = json.loads((art / "result.json").read_text())
    result["verdicts"]["x"]["annotations"] = places
    (art / "result.json").write_text(json.dumps(result))
    return art


def test_a_verdict_carries_its_annotations_through_the_artifact(tmp_path):
    ffi = "src/tilegym/ops/cutile_rs/x_kernel/ffi.rs"
    places = [_place(), _place(ffi, level="warning", start_line=7, end_line=9, start_column=0, end_column=0)]
    [first, second] = read_artifact(_with_places(tmp_path, places)).verdicts["x"].annotations
    assert (first.path, first.start_line, first.start_column, first.end_column) == (KERNEL_X, 3, 5, 9)
    assert (second.path, second.level, second.start_line, second.end_line) == (ffi, "warning", 7, 9)


@pytest.mark.parametrize(
    ("place", "message"),
    [
        (_place("src/tilegym/ops/cutile_rs/y_kernel/kernel.rs"), "not its kernel.rs"),  # another kernel's
        (_place("src/tilegym/ops/cutile_rs/cutile_kernels/src/lib.rs"), "not its kernel.rs"),  # wiring
        (_place(".github/workflows/x.yml"), "not its kernel.rs"),
        (_place(start_line=0, end_line=0), "start_line"),
        (_place(start_line=5, end_line=4, start_column=0, end_column=0), "ends"),
        (_place(end_line=4), "columns"),  # columns across lines: the Checks API refuses them
        (_place(start_column=9, end_column=5), "columns"),
        (_place(level="error"), "level"),
        (_place(title="t" * 256), "title"),
        (_place(message="m" * 2001), "message"),
        (_place(raw_details="x"), "raw_details"),  # unknown keys
    ],
)
def test_an_annotation_outside_its_kernels_files_or_the_api_s_rules_is_refused(tmp_path, place, message):
    with pytest.raises(ArtifactError, match=message):
        read_artifact(_with_places(tmp_path, [place]))


def test_annotations_are_bounded_per_kernel(tmp_path):
    places = [_place(start_line=n, end_line=n) for n in range(1, 102)]
    with pytest.raises(ArtifactError, match="too long|maxItems|is too long"):
        read_artifact(_with_places(tmp_path, places))
    assert len(read_artifact(_with_places(tmp_path, places[:100])).verdicts["x"].annotations) == 100


def test_the_port_job_redacts_and_bounds_the_annotations_it_writes(tmp_path, monkeypatch):
    from bot.build.types import Annotation

    repo = tmp_path / "repo"
    head = make_local_repo(repo)
    monkeypatch.setenv("GITHUB_TOKEN", CANARY)
    kernel = OPS + "/silu_and_mul_kernel/kernel.rs"
    said = [
        Annotation(kernel, n, n, "failure", f"t {CANARY}", f"m {n} {CANARY}" + "x" * 3000)
        for n in range(1, 130)
    ]

    def port(repo: Path, op: str):
        return (*fake_port(repo, op), False, tuple(said))

    art = read_artifact(
        run_port_job(
            repo, head, ["silu_and_mul"], tmp_path / "a", port, repo_name="o/r", base_sha=base_of(repo)
        )
    )
    places = art.verdicts["silu_and_mul"].annotations
    assert [p.start_line for p in places] == list(range(1, 101))
    assert all(CANARY not in p.title + p.message and len(p.message) <= 2000 for p in places)
